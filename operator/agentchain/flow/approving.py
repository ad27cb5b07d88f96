"""Approval gates in the engine: hold a job in AwaitingApproval, let it go or end it.

Runs in ``gating.held`` (so under the job's lock, before anything of it is built),
after the stop check and before concurrency admission, so a job waiting for a human
holds no slot.  The rule is ``flow/rules/approvals.gate`` over the job's annotations; the
status is written once when the job starts waiting (its own watch event comes back
here and finds nothing to write).  An approval or rejection arrives as annotations,
whose watch event starts the job again; a timeout is found by the resync's next look.
"""

from __future__ import annotations

import datetime as dt
import time

from agentchain.core import statuswriting
from agentchain.core.hopstate import Ended, Hop, Obj, typed
from agentchain.flow.rules import approvals
from agentchain.kube import events
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason


def _created(obj: Obj) -> float:
    raw = obj["metadata"].get("creationTimestamp")
    if not raw:
        return time.time()
    return dt.datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()


async def held(hop: Hop, init: Obj) -> bool | Ended | None:
    """True: waiting (its status says so); Ended: rejected or timed out; None: go on."""
    agent = await hop.rt.agents.by_trigger(hop.namespace, hop.job.spec.agent_role)
    approval = agent.spec.approval if isinstance(agent, AiAgent) else None
    if approval is None:
        return None
    annotations = hop.obj["metadata"].get("annotations") or {}
    match approvals.gate(approval, annotations, _created(hop.obj), time.time()):
        case approvals.Approved(by=by):
            if hop.job.status.approved_by is None:
                init.update({"approvedBy": by, "approvedAt": statuswriting.now().isoformat()})
            if hop.job.status.phase == "AwaitingApproval":
                init.update({"phase": "Pending", "reason": Reason.CREATED})
                init["message"] = f"Approved by {by}."
            return None
        case approvals.Closed(reason=reason, message=message):
            return Ended("Failed", reason, message, typed(init))
        case approvals.Held(deadline=deadline):
            await _awaiting(hop, init, deadline)
            return True


async def _awaiting(hop: Hop, init: Obj, deadline: float | None) -> None:
    if hop.job.status.phase == "AwaitingApproval":
        if init:
            await hop.patch(typed(init))
        return
    until = ""
    if deadline is not None:
        until = f" until {dt.datetime.fromtimestamp(deadline, dt.UTC).isoformat()}"
    message = f"Waiting for approval{until} (API, annotation or comment command)."
    status = {"phase": "AwaitingApproval", "reason": Reason.AWAITING_APPROVAL, "message": message}
    await hop.patch(typed({**init, **status}))
    await events.emit(hop.obj, "Normal", Reason.AWAITING_APPROVAL, message, key="approval")
