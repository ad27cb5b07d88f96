"""Closing: a job's end and what its chain did next, written where people look.

:func:`close` revokes an ending job's token and raises its Event (a failure's Warning,
a stop's or a skip's), then writes its end status (phase, reason, result, ...) and its
``status.next`` entry, in one patch when both are due, then updates the team anchor and
counts it.  The token and the Event go first because the patch settles the job: a
crash after it is never replayed.  The end
is the one the hop carries (``Hop.ending``: decided by the capture's verdict, or by a
launch that ends the job, and written here, nowhere else).  The ``next`` entry is the
marker exactly-once rests on: a job whose ``status.next`` is set is decided, so
``hop.hopping`` calls this only after the child exists.
:func:`complete_chain` marks the chain complete on its last job: once in Redis,
visibly on the job (condition ``ChainComplete``, Event ``ChainComplete``).
"""

from __future__ import annotations

import time

from agentchain import metrics, models
from agentchain.core import statuswriting
from agentchain.core.hopstate import Ended, Hop
from agentchain.core.rules.outcomes import REFUSAL_REASONS
from agentchain.flow import admitting, gating
from agentchain.hop import tracing
from agentchain.hop.rules import chains
from agentchain.kube import events
from agentchain.models.agentjob import AgentJobStatus, NextStatus
from agentchain.models.conditions import (
    CHAIN_COMPLETE,
    COMPLETE,
    Condition,
    ConditionStatus,
    Reason,
)
from agentchain.prompts import teamkeeping
from agentchain.traces.rules import spans


def ended_status(ended: Ended) -> AgentJobStatus:
    """The end status of a job that ends without running."""
    end = AgentJobStatus(
        phase=ended.phase,
        reason=ended.reason,
        message=ended.message,
        completion_time=statuswriting.now(),
    )
    return statuswriting.merged(ended.fields, end)


async def close(
    hop: Hop,
    entry: NextStatus | None = None,
    *conditions: Condition,
    complete: bool = False,
    branch_ended: bool = False,
) -> None:
    """Write the job's end (``hop.ending``, decided and not written yet, if any),
    ``entry`` (its ``status.next``) and ``conditions`` in one patch, and record each
    where else it goes; ``complete`` marks the chain complete in the same patch,
    ``branch_ended`` this job's branch of it only (another of its jobs still runs)."""
    end = hop.ending
    marker = AgentJobStatus(next=[entry]) if entry is not None else None
    status = statuswriting.merged(
        end,
        marker,
        AgentJobStatus(chain_complete=True) if complete else None,
        AgentJobStatus(branch_ended=True) if branch_ended else None,
    )
    if end is not None:
        conditions = (_complete(end), *conditions)
        # Before the patch that settles the job: a replay after a crash in between finds
        # it settled and does nothing, so what must not be lost goes first (each is once).
        await _ending(hop, end)
    if statuswriting.fields(status) or conditions:
        await hop.patch(status, *conditions)
    if end is not None:
        await _ended(hop, end)
    if entry is not None:
        await _record_hop(hop, entry)


def _complete(end: AgentJobStatus) -> Condition:
    """``Complete``: True unless the job Failed (Succeeded, Skipped, Cancelled)."""
    status: ConditionStatus = "False" if end.phase == "Failed" else "True"
    return Condition(
        type=COMPLETE, status=status, reason=end.reason or "", message=end.message or ""
    )


async def _ending(hop: Hop, end: AgentJobStatus) -> None:
    """The job token's revocation and the end's Event: idempotent, sent before the end
    is written (an Event is created once per key)."""
    await hop.rt.tokens.revoke(hop.namespace, hop.name, hop.uid)  # It dies with its job.
    phase, reason, message = end.phase or "", end.reason or "", end.message or ""
    if phase == "Failed":
        await events.emit(hop.obj, "Warning", reason, message, key="ended")
    elif phase == "Skipped":
        await events.emit(hop.obj, "Normal", reason, message, key=f"disposition:{reason}")
    await gating.ending(hop, end)  # Cancelled's Event.
    await _trace(hop, end)


async def _trace(hop: Hop, end: AgentJobStatus) -> None:
    """Record the job's span (and, for a root, the chain's root span if its trigger
    recorded none): once each, whichever replay gets here (``traces/outbox``)."""
    if not hop.rt.traces.enabled:
        return
    try:
        pos = statuswriting.position(hop.obj, hop.rt.operator_keys)
    except chains.ChainMetadataError:
        return  # In no chain, so in no trace.
    meta, status = hop.obj["metadata"], statuswriting.merged(hop.job.status, end)
    now = time.time_ns()
    usage, parent = status.usage, statuswriting.parent_of(hop.obj)
    facts = spans.JobFacts(
        namespace=hop.namespace,
        name=hop.name,
        chain_id=pos.chain_id,
        depth=pos.depth,
        agent=hop.job.spec.agent_role,
        parent_job=parent,
        created=meta.get("creationTimestamp"),
        asked=(meta.get("annotations") or {}).get(models.CREATED_NS),
        completed=status.completion_time.isoformat() if status.completion_time else None,
        phase=status.phase or "",
        reason=status.reason or "",
        exit_code=status.exit_code,
        attempt=status.attempt,
        tokens=usage.tokens if usage else None,
        cost=usage.cost if usage else None,
        turns=usage.turns if usage else None,
        input_tokens=usage.input_tokens if usage else None,
        output_tokens=usage.output_tokens if usage else None,
        started=status.start_time.isoformat() if status.start_time else None,
        pod=status.pod_name,
        # Its end is recorded now, after the capture, the decision and the publish (the
        # patch that settles it comes next): the span covers them, to the nanosecond.
        ended_ns=now,
    )
    if parent is None:
        await tracing.root(hop, pos.chain_id)  # Nothing if the trigger recorded its own.
    for span in spans.job_spans(facts, now):
        await hop.rt.traces.record(span)


async def _ended(hop: Hop, end: AgentJobStatus) -> None:
    await teamkeeping.job(hop.rt, hop.obj)
    jobs = metrics.JOBS.labels(hop.namespace, hop.job.spec.agent_role, end.phase or "")
    jobs.inc(exemplar=hop.rt.traces.exemplar(hop.job.status.chain_id))
    await gating.ended(hop, end)  # The namespace slot it held.


async def _record_hop(hop: Hop, entry: NextStatus) -> None:
    try:
        chain_id = statuswriting.position(hop.obj, hop.rt.operator_keys).chain_id
    except chains.ChainMetadataError:
        return  # No chain to record the hop in; the job's status says why.
    job = hop.job
    await hop.rt.chains.record_hop(
        hop.namespace,
        chain_id,
        job_name=hop.name,
        agent=job.spec.agent_role,
        phase=job.status.phase or "",
        decision=entry.action,
        detail=entry.child or entry.message or "",
    )
    await teamkeeping.hop(hop.rt, hop.obj, entry.to_api())


async def complete_chain(hop: Hop, action: str, message: str) -> Condition:
    """Mark the chain complete on its last job: once in Redis, with its Event; the
    job's ``ChainComplete`` condition is the caller's to write, with
    ``chainComplete`` (``close(..., complete=True)``)."""
    job = hop.job
    chain_id = statuswriting.position(hop.obj, hop.rt.operator_keys).chain_id
    result = _chain_outcome(action, job.status.phase or "", job.status.reason or "")
    if await hop.rt.chains.mark_complete(hop.namespace, chain_id, result, hop.name):
        outcomes = metrics.CHAIN_OUTCOMES.labels(hop.namespace, result)
        outcomes.inc(exemplar=hop.rt.traces.exemplar(chain_id))
    await admitting.release(hop.rt, hop.namespace, chain_id)  # Its concurrency slot.
    await teamkeeping.complete(hop.rt, hop.obj, result)
    text = f"Chain {chain_id} is complete ({result}) at {hop.name}: {message}".strip()
    cond = Condition(type=CHAIN_COMPLETE, status="True", reason=Reason.CHAIN_COMPLETE, message=text)
    # The Event goes before ``chainComplete``, which settles the job, after which
    # nothing replays this function: a kill between the two writes in the other order
    # lost the Event for good (seen in e2e/chaos.py).  The Event's name is
    # deterministic, so a replay that already emitted it gets AlreadyExists.
    await events.emit(hop.obj, "Normal", Reason.CHAIN_COMPLETE, text, key="chain-complete")
    return cond


def _chain_outcome(action: str, phase: str, reason: str) -> str:
    if reason in REFUSAL_REASONS:
        return "refused"
    if action == "stopped":
        return "stopped"
    return "succeeded" if phase in ("Succeeded", "Skipped") else "failed"
