"""Closing: a job's end and what its chain did next, written where people look.

:func:`close` writes a job's end status (phase, reason, result, ...) and its
``status.next`` entry, in one patch when both are due, then revokes the job's token,
updates the team anchor, counts it and raises a Warning Event for a failure.  The
``next`` entry is the marker exactly-once rests on: a job whose ``status.next`` is
set is decided, so ``engine.hopping`` calls this only after the child exists.
:func:`complete_chain` marks the chain complete on its last job: once in Redis,
visibly on the job (condition ``ChainComplete``, Event ``ChainComplete``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentchain import metrics
from agentchain.engine import records, team
from agentchain.engine.hops import Ended, Hop, Obj
from agentchain.kube import events
from agentchain.models.conditions import CHAIN_COMPLETE, Condition, Reason
from agentchain.policy.outcomes import REFUSAL_REASONS


def ended_status(ended: Ended) -> Obj:
    """The end status of a job that ends without running."""
    return {
        **ended.fields,
        "phase": ended.phase,
        "reason": ended.reason,
        "message": ended.message,
        "completionTime": records.now().isoformat(),
    }


async def close(
    hop: Hop, end: Obj | None, entry: Mapping[str, Any] | None = None, *, complete: bool = False
) -> None:
    """Write ``end`` (the job's end status, unless written already) and ``entry`` (its
    ``status.next``) in one patch, and record each where else it goes; ``complete``
    marks the chain complete in the same patch, with nothing more to record."""
    fields: Obj = dict(end or {})
    if entry is not None:
        entry = {k: v for k, v in entry.items() if v is not None}
        fields["next"] = [entry]
    if complete:
        fields["chainComplete"] = True
    if fields:
        await hop.patch(fields)
    if end is not None:
        await _ended(hop, end)
    if entry is not None:
        await _record_hop(hop, entry)


async def _ended(hop: Hop, end: Obj) -> None:
    # A job token dies with its job.
    await hop.rt.tokens.revoke(hop.namespace, hop.name, hop.uid)
    await team.job(hop.rt, hop.obj)
    phase = str(end["phase"])
    metrics.JOBS.labels(hop.namespace, hop.job.spec.agent_role, phase).inc()
    if phase == "Failed":
        reason, message = str(end["reason"]), str(end["message"])
        await events.emit(hop.obj, "Warning", reason, message, key="ended")
    elif phase == "Skipped":
        reason, message = str(end["reason"]), str(end["message"])
        await events.emit(hop.obj, "Normal", reason, message, key=f"disposition:{reason}")


async def _record_hop(hop: Hop, entry: Mapping[str, Any]) -> None:
    job = hop.job
    await hop.rt.chains.record_hop(
        hop.namespace,
        records.position(hop.obj).chain_id,
        job_name=hop.name,
        agent=job.spec.agent_role,
        phase=job.status.phase or "",
        decision=str(entry["action"]),
        detail=str(entry.get("child") or entry.get("message") or ""),
    )
    await team.hop(hop.rt, hop.obj, dict(entry))


async def complete_chain(hop: Hop, action: str, message: str) -> None:
    """Mark the chain complete on its last job: once in Redis, visibly on the job."""
    job = hop.job
    chain_id = records.position(hop.obj).chain_id
    result = _chain_outcome(action, job.status.phase or "", job.status.reason or "")
    if await hop.rt.chains.mark_complete(hop.namespace, chain_id, result, hop.name):
        metrics.CHAIN_OUTCOMES.labels(hop.namespace, result).inc()
    await team.complete(hop.rt, hop.obj, result)
    text = f"Chain {chain_id} is complete ({result}) at {hop.name}: {message}".strip()
    cond = Condition(type=CHAIN_COMPLETE, status="True", reason=Reason.CHAIN_COMPLETE, message=text)
    # The Event goes first: ``chainComplete`` settles the job, after which nothing
    # replays this function, so a kill between the two writes in the other order lost
    # the Event for good (seen in e2e/chaos.py).  The Event's name is deterministic,
    # so a replay that already emitted it gets AlreadyExists.
    await events.emit(hop.obj, "Normal", Reason.CHAIN_COMPLETE, text, key="chain-complete")
    await hop.patch({"chainComplete": True}, condition=cond)


def _chain_outcome(action: str, phase: str, reason: str) -> str:
    if reason in REFUSAL_REASONS:
        return "refused"
    if action == "stopped":
        return "stopped"
    return "succeeded" if phase in ("Succeeded", "Skipped") else "failed"
