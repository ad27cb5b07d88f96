"""Concurrency groups in the engine: admit a chain's root job, release at completion, repair.

``admit`` runs where a root job would start (``gating.held``, from ``launching``, under
the job's lock):
the group is the AgentJob's ``concurrency-group`` annotation (stamped by the webhook
or the API) or the agent's template rendered now, and ``flow/slots.py`` answers
in one atomic step.  Then:

* admitted: the start goes on; chains it displaced (``cancel-in-progress``) are asked
  to stop, each pointing to this job as its successor; queued jobs it let in are
  started (``due``, which ``hop.reconciling`` reconciles once the locks are released);
* queued: the job shows phase ``Queued`` (once: its watch events and the resync come
  back here, and find it still queued or admitted by then);
* refused: the job ends Failed, reason ``ConcurrencyLimited``;
* superseded (a newer chain of the group already runs): the job ends Cancelled.

``release`` runs when a chain is marked complete (``closing.complete_chain``) and
hands whatever the freed slots let in to ``due``.  Every step is idempotent: a crash after the
release but before the start leaves the next job a holder still ``Queued``, and the
resync's next look at it admits it (it already holds the slot) and starts it.

The slots are an index of the AgentJobs, which stay the truth: ``repair`` (from the
resync loop) releases a holder whose chain is complete or whose root job is gone.
"""

from __future__ import annotations

import logging
import time

from agentchain import metrics, models
from agentchain.core import statuswriting
from agentchain.core.hopstate import Ended, Hop, typed
from agentchain.core.rules.outcomes import is_terminal
from agentchain.core.runtime import Runtime
from agentchain.flow import stoprequests
from agentchain.flow.rules import concurrency, stoprules
from agentchain.flow.slots import AdmissionStore
from agentchain.kube import events, resources
from agentchain.models.aiagent import AiAgent, Concurrency
from agentchain.models.conditions import Reason

log = logging.getLogger(__name__)
Obj = statuswriting.Obj
SUPERSEDED_BY = "concurrency"
NAMESPACE_GROUP = concurrency.NAMESPACE_GROUP
REPAIR_EVERY_SECONDS = 30.0
ORPHAN_GRACE_SECONDS = 300.0
"""A holder whose root AgentJob does not exist this long after its ticket is released."""
Gate = bool | Ended | None
"""True: held (its status says why); Ended: it ends without running; None: go on."""


def _now_us() -> int:
    return time.time_ns() // 1000


def due(rt: Runtime, namespace: str) -> list[str]:
    """The jobs let in since the last call (``hop.reconciling`` reconciles them)."""
    return sorted(rt.admitted.pop(namespace, set()))


def _let_in(
    rt: Runtime, namespace: str, admitted: tuple[tuple[str, str], ...] | list[tuple[str, str]]
) -> None:
    for _, job in admitted:
        if job:
            rt.admitted.setdefault(namespace, set()).add(job)


async def _settings(hop: Hop) -> tuple[str, Concurrency] | None:
    """The job's group and its settings, when it is a chain's root in a group."""
    if statuswriting.parent_of(hop.obj) is not None:
        return None
    round_group = concurrency.round_group(hop.github_event, hop.job.spec.agent_role)
    if round_group is not None:  # A follow-up round: its pull request's own group.
        return round_group, concurrency.ROUND_CONCURRENCY
    annotations = hop.obj["metadata"].get("annotations") or {}
    agent = await hop.rt.agents.by_trigger(hop.namespace, hop.job.spec.agent_role)
    spec = agent.spec.concurrency if isinstance(agent, AiAgent) else None
    named = annotations.get(concurrency.GROUP)
    if spec is None and named is None:
        return None
    spec = spec or Concurrency(group=named or "-")
    if named:
        return named, spec
    job = hop.job
    return concurrency.render_group(spec, job.spec.event, job.spec.agent_role), spec


async def admit(hop: Hop, init: Obj) -> Gate:
    """The chain's concurrency group, for its root job ``hop``."""
    try:
        found = await _settings(hop)
    except concurrency.GroupRenderError as exc:
        return Ended("Failed", Reason.PROMPT_RENDER_FAILED, str(exc), typed(init))
    if found is None:
        return None
    group, spec = found
    chain = str(init.get("chainId") or hop.job.status.chain_id)
    ticket = concurrency.ticket_of(hop.obj["metadata"].get("annotations"), _now_us())
    answer = await AdmissionStore(hop.rt.redis).admit(
        hop.namespace,
        group,
        chain=chain,
        job=hop.name,
        ticket=ticket,
        limit=spec.limit,
        policy=spec.policy,
    )
    verdict = concurrency.verdict(answer, spec.limit)
    metrics.ADMISSIONS.labels(hop.namespace, type(verdict).__name__.lower()).inc()
    match verdict:
        case concurrency.Admitted(victims=victims, promoted=promoted):
            _admitted(hop, init, f"Admitted to concurrency group {group!r}.")
            for victim_chain, victim_job in victims:
                await _supersede(hop, victim_chain, victim_job)
            _let_in(hop.rt, hop.namespace, promoted)
            return None
        case concurrency.Queued(position=position, promoted=promoted):
            await _queued(hop, init, group, position, spec.limit)
            _let_in(hop.rt, hop.namespace, promoted)
            return True
        case concurrency.Refused():
            message = concurrency.refused_message(group, spec.limit)
            return Ended("Failed", Reason.CONCURRENCY_LIMITED, message, typed(init))
        case concurrency.Superseded(by_job=by_job):
            request = stoprules.StopRequest(by=SUPERSEDED_BY, successor=by_job)
            ending = stoprules.ending(request)
            fields = {**init, "stoppedBy": SUPERSEDED_BY, "supersededBy": by_job}
            return Ended("Cancelled", ending.reason, ending.message, typed(fields))


async def admit_job(hop: Hop, init: Obj) -> Gate:
    """The namespace's limit on started jobs (a setting), for any job: the slot is the
    job's, from its start to its end."""
    limit = hop.rt.settings.max_running_jobs_per_namespace
    if not limit:
        return None
    ticket = concurrency.ticket_of(hop.obj["metadata"].get("annotations"), _now_us())
    answer = await AdmissionStore(hop.rt.redis).admit(
        hop.namespace,
        NAMESPACE_GROUP,
        chain=hop.name,
        job=hop.name,
        ticket=ticket,
        limit=limit,
        policy="queue",
    )
    verdict = concurrency.verdict(answer, limit)
    if isinstance(verdict, concurrency.Admitted):
        _admitted(hop, init, "Admitted under the namespace's limit on running jobs.")
        _let_in(hop.rt, hop.namespace, verdict.promoted)
        return None
    assert isinstance(verdict, concurrency.Queued)
    await _queued(hop, init, NAMESPACE_GROUP, verdict.position, limit)
    _let_in(hop.rt, hop.namespace, verdict.promoted)
    return True


def _admitted(hop: Hop, init: Obj, message: str) -> None:
    if hop.job.status.phase == "Queued":  # Leaves Queued with the launch's status write.
        init.update({"phase": "Pending", "reason": Reason.ADMITTED, "message": message})


async def _queued(hop: Hop, init: Obj, group: str, position: int, limit: int) -> None:
    """Show the job Queued, once: a write per look would wake its own watch again."""
    if hop.job.status.phase == "Queued":
        if init:
            await hop.patch(typed(init))
        return
    message = concurrency.queued_message(group, position, limit)
    queued = {"phase": "Queued", "reason": Reason.QUEUED, "message": message}
    await hop.patch(typed({**init, **queued}))
    await events.emit(hop.obj, "Normal", Reason.QUEUED, message, key="queued")


async def _supersede(hop: Hop, chain: str, job: str) -> None:
    """Stop the displaced chain, pointing to its successor (this job)."""
    request = stoprules.StopRequest(by=SUPERSEDED_BY, successor=hop.name)
    await _stop_displaced(hop.rt, hop.namespace, chain, job, request)


async def _stop_displaced(
    rt: Runtime, namespace: str, chain: str, job: str, request: stoprules.StopRequest
) -> list[str]:
    selector = f"{models.CHAIN_ID}={chain}"
    jobs, _ = await resources.list_objects(namespace, resources.AGENTJOBS, label_selector=selector)
    asked = await stoprequests.request_chain_stop(rt, namespace, chain, jobs, request)
    log.info(
        "chain %s/%s (%s) superseded by %s: %s", namespace, chain, job, request.successor, asked
    )
    return asked


async def supersede_holders(
    rt: Runtime, namespace: str, group: str, holder: str, reason: str
) -> list[str]:
    """Supersede the chains of a ``cancel-in-progress`` group (limit 1) for something newer
    that is no chain (a person's push to a round's pull request): ``holder``, a name no
    AgentJob has, takes the group's slot now, exactly as a newer chain's root would, and
    the chains it displaces are stopped (Cancelled, reason Superseded, ``reason`` in their
    message).  It keeps the slot, so a chain of the group received before it and started
    after it is superseded too; a newer chain displaces it at once, and slot repair
    releases it once its grace is over (no AgentJob has its name).  The jobs asked to
    stop."""
    answer = await AdmissionStore(rt.redis).admit(
        namespace,
        group,
        chain=holder,
        job=holder,
        ticket=_now_us(),
        limit=1,
        policy="cancel-in-progress",
    )
    verdict = concurrency.verdict(answer, 1)
    if not isinstance(verdict, concurrency.Admitted):
        return []  # A newer chain of the group already holds it: nothing older runs.
    request = stoprules.StopRequest(by=SUPERSEDED_BY, reason=reason, successor=holder)
    asked: list[str] = []
    for chain, job in verdict.victims:
        asked.extend(await _stop_displaced(rt, namespace, chain, job, request))
    return asked


async def release(rt: Runtime, namespace: str, chain: str) -> None:
    """The chain completed: free its slot; whoever it lets in is ``due``."""
    _let_in(rt, namespace, await AdmissionStore(rt.redis).release(namespace, chain))


async def job_ended(rt: Runtime, obj: Obj) -> None:
    """A job ended: free its slot under the namespace's limit."""
    if rt.settings.max_running_jobs_per_namespace:
        namespace, name = statuswriting.name_of(obj)
        store = AdmissionStore(rt.redis)
        _let_in(rt, namespace, await store.release(namespace, name, NAMESPACE_GROUP))


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
                    _let_in(rt, namespace, await store.release(namespace, chain, group))


async def _leaked(
    rt: Runtime, namespace: str, group: str, chain: str, job: str, ticket: float
) -> bool:
    if group == NAMESPACE_GROUP:  # Held by a job: until it ends.
        found = await resources.get(namespace, resources.AGENTJOBS, job)
        return found is None or is_terminal(statuswriting.parse(found).status)
    record = await rt.chains.get(namespace, chain)
    if record is not None and record.complete:
        return True
    if time.time() - ticket / 1e6 < ORPHAN_GRACE_SECONDS:
        return False
    return not job or await resources.get(namespace, resources.AGENTJOBS, job) is None


async def repair_due(rt: Runtime) -> None:
    """``repair`` at most every ``REPAIR_EVERY_SECONDS`` (the resync loop calls it each tick)."""
    now = time.monotonic()
    if now - rt.last_repair < REPAIR_EVERY_SECONDS:
        return
    rt.last_repair = now
    await repair(rt)
