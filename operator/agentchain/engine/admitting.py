"""Concurrency groups in the engine: admit a chain's root job, release at completion, repair.

``admit`` runs where a root job would start (``gating.held``, under the job's lock):
the group is the AgentJob's ``concurrency-group`` annotation (stamped by the webhook
or the API) or the agent's template rendered now, and ``store/admission.py`` answers
in one atomic step.  Then:

* admitted: the start goes on; chains it displaced (``cancel-in-progress``) are asked
  to stop, each pointing to this job as its successor; queued jobs it let in are
  started;
* queued: the job shows phase ``Queued`` (once: its watch events and the resync come
  back here, and find it still queued or admitted by then);
* refused: the job ends Failed, reason ``ConcurrencyLimited``;
* superseded (a newer chain of the group already runs): the job ends Cancelled.

``release`` runs when a chain is marked complete (``progressing.complete_chain``) and
starts whatever the freed slots let in.  Every step is idempotent: a crash after the
release but before the start leaves the next job a holder still ``Queued``, and the
resync's next look at it admits it (it already holds the slot) and starts it.

The slots are an index of the AgentJobs, which stay the truth: ``repair`` (from the
resync loop) releases a holder whose chain is complete or whose root job is gone.
"""

from __future__ import annotations

import logging
import time

from agentchain import metrics, models
from agentchain.engine import records
from agentchain.engine.runtime import Runtime
from agentchain.kube import events, resources
from agentchain.models.aiagent import AiAgent, Concurrency
from agentchain.models.conditions import Reason
from agentchain.policy import concurrency, stops
from agentchain.policy.outcomes import is_terminal
from agentchain.store.admission import AdmissionStore

log = logging.getLogger(__name__)
Obj = records.Obj
SUPERSEDED_BY = "concurrency"
NAMESPACE_GROUP = concurrency.NAMESPACE_GROUP
REPAIR_EVERY_SECONDS = 30.0
ORPHAN_GRACE_SECONDS = 300.0
"""A holder whose root AgentJob does not exist this long after its ticket is released."""
_last_repair = 0.0


def _now_us() -> int:
    return time.time_ns() // 1000


async def _settings(rt: Runtime, obj: Obj) -> tuple[str, Concurrency] | None:
    """The job's group and its settings, when it is a chain's root in a group."""
    if records.parent_of(obj) is not None:
        return None
    annotations = obj["metadata"].get("annotations") or {}
    agent = await rt.agents.by_trigger(obj["metadata"]["namespace"], obj["spec"]["agentRole"])
    spec = agent.spec.concurrency if isinstance(agent, AiAgent) else None
    named = annotations.get(concurrency.GROUP)
    if spec is None and named is None:
        return None
    spec = spec or Concurrency(group=named or "-")
    if named:
        return named, spec
    job = records.parse(obj)
    return concurrency.render_group(spec, job.spec.event, job.spec.agent_role), spec


async def admit(rt: Runtime, obj: Obj, init: Obj) -> bool:
    """Whether the root job ``obj`` is held back (queued, refused or superseded);
    the caller holds its lock."""
    from agentchain.engine import finishing, stopping  # Cycle: they start jobs.

    try:
        found = await _settings(rt, obj)
    except concurrency.GroupRenderError as exc:
        await _write(obj, init)
        await finishing.record_failure(rt, obj, Reason.PROMPT_RENDER_FAILED, str(exc))
        return True
    if found is None:
        return False
    group, spec = found
    namespace, name = records.name_of(obj)
    chain = str(init.get("chainId") or records.parse(obj).status.chain_id)
    ticket = concurrency.ticket_of(obj["metadata"].get("annotations"), _now_us())
    answer = await AdmissionStore(rt.redis).admit(
        namespace, group, chain=chain, job=name, ticket=ticket, limit=spec.limit, policy=spec.policy
    )
    verdict = concurrency.verdict(answer, spec.limit)
    metrics.ADMISSIONS.labels(namespace, type(verdict).__name__.lower()).inc()
    if isinstance(verdict, concurrency.Admitted):
        if records.parse(obj).status.phase == "Queued":
            init.update({"phase": "Pending", "reason": Reason.ADMITTED})
            init["message"] = f"Admitted to concurrency group {group!r}."
        for victim_chain, victim_job in verdict.victims:
            await _supersede(rt, namespace, victim_chain, victim_job, successor=name)
        await _start_each(rt, namespace, verdict.promoted)
        return False
    await _write(obj, init)
    if isinstance(verdict, concurrency.Queued):
        await _show_queued(obj, group, verdict.position, spec.limit)
        await _start_each(rt, namespace, verdict.promoted)
    elif isinstance(verdict, concurrency.Refused):
        message = concurrency.refused_message(group, spec.limit)
        await finishing.record_failure(rt, obj, Reason.CONCURRENCY_LIMITED, message)
    else:
        request = stops.StopRequest(by=SUPERSEDED_BY, successor=verdict.by_job)
        await stopping.cancel_locked(rt, obj, request)
    return True


async def admit_job(rt: Runtime, obj: Obj, init: Obj) -> bool:
    """Whether ``obj`` waits for the namespace's limit on started jobs (a setting); any
    job, not only roots: the slot is the job's, from its start to its end."""
    limit = rt.settings.max_running_jobs_per_namespace
    if not limit:
        return False
    namespace, name = records.name_of(obj)
    ticket = concurrency.ticket_of(obj["metadata"].get("annotations"), _now_us())
    answer = await AdmissionStore(rt.redis).admit(
        namespace, NAMESPACE_GROUP, chain=name, job=name, ticket=ticket, limit=limit, policy="queue"
    )
    verdict = concurrency.verdict(answer, limit)
    if isinstance(verdict, concurrency.Admitted):
        if records.parse(obj).status.phase == "Queued":
            init.update({"phase": "Pending", "reason": Reason.ADMITTED})
            init["message"] = "Admitted under the namespace's limit on running jobs."
        await _start_each(rt, namespace, verdict.promoted)
        return False
    assert isinstance(verdict, concurrency.Queued)
    await _write(obj, init)
    await _show_queued(obj, NAMESPACE_GROUP, verdict.position, limit)
    await _start_each(rt, namespace, verdict.promoted)
    return True


async def job_ended(rt: Runtime, obj: Obj) -> None:
    """A job ended: free its slot under the namespace's limit, start whoever it lets in."""
    if rt.settings.max_running_jobs_per_namespace:
        namespace, name = records.name_of(obj)
        promoted = await AdmissionStore(rt.redis).release(namespace, name, NAMESPACE_GROUP)
        await _start_each(rt, namespace, tuple(promoted))


async def _write(obj: Obj, init: Obj) -> None:
    if init:
        await records.patch(obj, dict(init))
        init.clear()


async def _show_queued(obj: Obj, group: str, position: int, limit: int) -> None:
    if records.parse(obj).status.phase == "Queued":
        return  # Shown once: a write per look would wake its own watch again.
    message = concurrency.queued_message(group, position, limit)
    await records.patch(obj, {"phase": "Queued", "reason": Reason.QUEUED, "message": message})
    await events.emit(obj, "Normal", Reason.QUEUED, message, key="queued")


async def _supersede(rt: Runtime, namespace: str, chain: str, job: str, *, successor: str) -> None:
    """Stop the displaced chain, pointing to its successor."""
    from agentchain.engine import stopping

    selector = f"{models.CHAIN_ID}={chain}"
    jobs, _ = await resources.list_objects(namespace, resources.AGENTJOBS, label_selector=selector)
    request = stops.StopRequest(by=SUPERSEDED_BY, successor=successor)
    asked = await stopping.request_chain_stop(rt, namespace, chain, jobs, request)
    log.info("chain %s/%s (%s) superseded by %s: %s", namespace, chain, job, successor, asked)


async def _start_each(rt: Runtime, namespace: str, admitted: tuple[tuple[str, str], ...]) -> None:
    """Start the root jobs a freed slot let in (those already created; the others start
    when they are, as holders already)."""
    from agentchain.engine import starting

    for _, job in admitted:
        obj = await resources.get(namespace, resources.AGENTJOBS, job) if job else None
        if obj is not None:
            await starting.start(rt, obj)


async def release(rt: Runtime, namespace: str, chain: str) -> None:
    """The chain completed: free its slot and start whoever it lets in."""
    promoted = await AdmissionStore(rt.redis).release(namespace, chain)
    await _start_each(rt, namespace, tuple(promoted))


async def repair(rt: Runtime) -> None:
    """Release slots the CRs say are free: chains complete, or root jobs long gone."""
    store = AdmissionStore(rt.redis)
    for namespace in await store.tenants():
        for group in await store.groups(namespace):
            for chain, job, ticket in await store.holders(namespace, group):
                if await _leaked(rt, namespace, group, chain, job, ticket):
                    log.warning(
                        "concurrency slot of chain %s/%s released by repair", namespace, chain
                    )
                    promoted = await store.release(namespace, chain, group)
                    await _start_each(rt, namespace, tuple(promoted))


async def _leaked(
    rt: Runtime, namespace: str, group: str, chain: str, job: str, ticket: float
) -> bool:
    if group == NAMESPACE_GROUP:  # Held by a job: until it ends.
        found = await resources.get(namespace, resources.AGENTJOBS, job)
        return found is None or is_terminal(records.parse(found).status)
    record = await rt.chains.get(namespace, chain)
    if record is not None and record.complete:
        return True
    if time.time() - ticket / 1e6 < ORPHAN_GRACE_SECONDS:
        return False
    return not job or await resources.get(namespace, resources.AGENTJOBS, job) is None


async def repair_due(rt: Runtime) -> None:
    """``repair`` at most every ``REPAIR_EVERY_SECONDS`` (the resync loop calls it each tick)."""
    global _last_repair
    now = time.monotonic()
    if now - _last_repair < REPAIR_EVERY_SECONDS:
        return
    _last_repair = now
    await repair(rt)
