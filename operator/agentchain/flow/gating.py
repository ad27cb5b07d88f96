"""What may hold a job back just before it launches, and what its end frees.

``held`` runs in ``launching.launch`` after the agent checks and before anything is
built, under the job's lock, in this order:

1. a stop: the job asks to stop, or its chain was stopped -> it ends ``Cancelled``
   without running (``stoprequests.pending_stop``);
2. an approval gate -> it waits in ``AwaitingApproval``, or ends rejected or timed
   out (``approving.held``);
3. its concurrency group, for a chain's root job -> queued, refused or superseded
   (``admitting.admit``);
4. the namespace's limit on started jobs (a setting) -> queued (``admitting.admit_job``);
5. its chain's budget: the launch is counted; over budget it ends ``Cancelled``,
   reason ``BudgetExceeded`` (``budgeting.at_launch``).

``ending`` runs in ``closing`` just before an end is recorded: a cancelled job's Event
and metric; ``ended`` just after: the namespace slot it held.
"""

from __future__ import annotations

from agentchain import metrics
from agentchain.core.hopstate import Ended, Hop, Obj, typed
from agentchain.flow import admitting, approving, budgeting, stoprequests
from agentchain.flow.rules import stoprules
from agentchain.kube import events
from agentchain.models.agentjob import AgentJobStatus


async def held(hop: Hop, init: Obj, attempt: int = 1) -> admitting.Gate:
    """Whether the job must not launch now (True: held, status written; Ended: it ends
    without running); ``init`` (its first status fields) is updated for the launch."""
    gate: admitting.Gate = await stopped(hop, init)
    if gate is None:
        gate = await approving.held(hop, init)
    if gate is None:
        gate = await admitting.admit(hop, init)
    if gate is None:
        gate = await admitting.admit_job(hop, init)
    if gate is None:
        gate = await budgeting.at_launch(hop, init, attempt)
    return gate


async def stopped(hop: Hop, init: Obj) -> Ended | None:
    """The job's end when it asks to stop or its chain was stopped; else None.  Also
    asked by a job that waits for its AiAgent, which never reaches the other gates."""
    chain_id = init.get("chainId") or hop.job.status.chain_id
    request = await stoprequests.pending_stop(hop.rt, hop.obj, chain_id)
    if request is None:
        return None
    ending = stoprules.ending(request)
    fields = {**init, **stop_fields(request)}
    return Ended("Cancelled", ending.reason, ending.message, typed(fields))


def stop_fields(request: stoprules.StopRequest) -> Obj:
    fields: Obj = {"stoppedBy": request.by}
    if request.successor:
        fields["supersededBy"] = request.successor
    return fields


async def ending(hop: Hop, end: AgentJobStatus) -> None:
    """A job's end is about to be recorded (``closing``): a cancelled job's Event, and
    its count, once (the Event is created once; a replay finds it)."""
    if end.phase == "Cancelled":
        reason, message = end.reason or "", end.message or ""
        if await events.emit(hop.obj, "Normal", reason, message, key="stopped"):
            metrics.STOPS.labels(hop.namespace, reason).inc()


async def ended(hop: Hop, end: AgentJobStatus) -> None:
    """A job's end was recorded (``closing``): idempotent, it may run again on a replay."""
    await admitting.job_ended(hop.rt, hop.obj)
