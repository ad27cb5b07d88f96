"""Progressing a chain: apply the pure ``next_step`` decision exactly once.

The decision is recomputed from recorded facts every time, so replaying it
after a crash gives the same answer; the child's name is derived from the
parent and the step, so re-creating it answers AlreadyExists; and the parent's
``status.next`` is written only after the child exists.  Killing the operator
between any two lines therefore neither loses nor repeats a transition.

A job that just ended has its end written here too, deferred (``Close``): the
ending is already durable in Redis, so the child's AgentJob and batch Job are
created first and the parent's end goes out afterwards in the same patch as its
``status.next``: one write fewer per hop, and none beside the hop's creates.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentchain import metrics, models
from agentchain.engine import admitting, catalog, records, starting, team
from agentchain.engine.locking import lock_for
from agentchain.engine.runtime import Runtime
from agentchain.kube import events, resources, workloads
from agentchain.models.aiagent import AiAgent, ContextWindow
from agentchain.models.conditions import CHAIN_COMPLETE, Condition, Reason
from agentchain.policy import chains, context
from agentchain.policy.agents import Ambiguous
from agentchain.policy.outcomes import (
    REFUSAL_REASONS,
    is_settled,
    is_terminal,
    outcome,
    trigger_step,
)

log = logging.getLogger(__name__)
Obj = dict[str, Any]
T = TypeVar("T")
Output = tuple[str | None, str | None]
"""A job's captured output and, when it was lost, why."""
Close = Callable[[Obj], Awaitable[object]]
"""Writes a just-ended job's end status, with the given extra status fields."""
_AGENT_REASONS = frozenset(
    {Reason.NEXT_AGENT_NOT_FOUND, Reason.NEXT_AGENT_DISABLED, Reason.DUPLICATE_TRIGGER_NAME}
)


async def progress(rt: Runtime, obj: Obj) -> None:
    namespace, name = records.name_of(obj)
    async with lock_for(namespace, name):
        fresh = await resources.get(namespace, resources.AGENTJOBS, name)
        if fresh is not None:
            await progress_locked(rt, fresh)


async def progress_locked(
    rt: Runtime,
    obj: Obj,
    *,
    ended_at: float | None = None,
    closed: Closed | None = None,
    output: Output | None = None,
    first_pass: bool = False,
    durable: Awaitable[None] | None = None,
) -> None:
    """Apply the chain's next step after ``obj``, whose status says it ended.

    ``closed`` holds the write of that status when it has not been made yet: the
    child is created and started first, and the end goes out with what records the
    step.  ``output`` is the job's (text, lost reason) when the caller just captured
    it.  ``first_pass`` says the ending was decided just now, for the first time, so
    no child of it can exist yet: the child's batch Job may be created beside it.
    ``durable`` is the write of that ending, still under way: the child's launch is
    prepared meanwhile, but nothing is created before it is done.
    """
    closed = closed or Closed(None)
    job = records.parse(obj)
    if not is_terminal(job.status) or is_settled(job.status):
        await closed()
        return
    if job.status.next:  # Decided before a crash; only the completion is missing.
        last = job.status.next[-1]
        await closed()
        await complete_chain(rt, obj, last.action, last.message or "")
        return
    namespace = obj["metadata"]["namespace"]
    agents = await rt.agents.agents_in(namespace)
    try:
        decision = _decide(rt, obj, agents)
        if _needs_confirmation(decision, obj, agents):
            agents = await rt.agents.refresh(namespace)
            decision = _decide(rt, obj, agents)
    except chains.ChainMetadataError as exc:
        # Without readable chain metadata there is no chain to continue or complete.
        entry = {"action": "none", "reason": Reason.INVALID_CHAIN_METADATA, "message": str(exc)}
        fields = {"next": [entry], "chainComplete": True}
        if not await closed(fields):
            await records.patch(obj, fields)
        return
    await _apply(rt, obj, decision, agents, ended_at, closed, output, first_pass, durable)


class Closed:
    """A deferred end-status write (``Close``), made at most once.

    Calling it makes the write, with ``fields`` in the same patch, and answers
    whether it did; once made (or when there was none) it answers False and the
    caller writes ``fields`` itself.
    """

    def __init__(self, close: Close | None) -> None:
        self._close = close

    async def __call__(self, fields: Obj | None = None) -> bool:
        close, self._close = self._close, None
        if close is None:
            return False
        await close(fields or {})
        return True


def _decide(rt: Runtime, obj: Obj, agents: list[tuple[Obj, AiAgent]]) -> chains.Decision:
    return chains.next_step(_finished(obj, agents), _infos(agents), _limits(rt))


def _needs_confirmation(
    decision: chains.Decision, obj: Obj, agents: list[tuple[Obj, AiAgent]]
) -> bool:
    """A decision that rests on an agent being absent or disabled is re-checked
    against a fresh list: the catalog may not have seen a just-made change yet."""
    if isinstance(decision, chains.Refuse | chains.Stop) and decision.reason in _AGENT_REASONS:
        return True
    role = records.parse(obj).spec.agent_role
    return not any(a.spec.trigger_name == role for _, a in agents)


def _limits(rt: Runtime) -> chains.Limits:
    return chains.Limits(max_jobs=rt.settings.max_chain_jobs)


def _infos(agents: list[tuple[Obj, AiAgent]]) -> dict[str, chains.AgentInfo]:
    infos: dict[str, chains.AgentInfo] = {}
    for obj, agent in agents:
        spec = agent.spec
        seen = infos.get(spec.trigger_name)
        holders = (*(seen.holders if seen else ()), obj["metadata"]["name"])
        info = seen or chains.AgentInfo(spec.trigger_name, spec.enabled, agent.manual_next())
        infos[spec.trigger_name] = dataclasses.replace(info, holders=holders)
    return infos


def _finished(obj: Obj, agents: list[tuple[Obj, AiAgent]]) -> chains.Finished:
    job = records.parse(obj)
    role = job.spec.agent_role
    agent = catalog.by_trigger(agents, role)
    refused = job.status.reason in REFUSAL_REASONS or (
        job.status.phase == "Failed" and agent is None
    )
    step = None
    if isinstance(agent, AiAgent) and not refused:
        step = trigger_step(agent.spec, job.spec.origin, job.spec.event)
    return chains.Finished(
        name=obj["metadata"]["name"],
        agent=role,
        position=records.position(obj),
        outcome=outcome(job.status),  # type: ignore[arg-type]
        step=step,
        refused=refused,
        ambiguity=agent.message if isinstance(agent, Ambiguous) and not refused else None,
    )


async def _apply(
    rt: Runtime,
    obj: Obj,
    decision: chains.Decision,
    agents: list[tuple[Obj, AiAgent]],
    ended_at: float | None,
    closed: Closed,
    output: Output | None,
    first_pass: bool,
    durable: Awaitable[None] | None,
) -> None:
    namespace = obj["metadata"]["namespace"]
    if isinstance(decision, chains.Stop | chains.End):
        action = "stopped" if isinstance(decision, chains.Stop) else "none"
        reason = decision.reason if isinstance(decision, chains.Stop) else Reason.CHAIN_COMPLETE
        entry = {"action": action, "reason": reason, "message": decision.message}
        await _record_next(rt, obj, entry, closed)
        await complete_chain(rt, obj, action, decision.message)
        return
    actions = {chains.Spawn: "spawned", chains.Skip: "skipped", chains.Refuse: "refused"}
    entry = {
        "action": actions[type(decision)],
        "agent": decision.child.agent,
        "child": decision.child.name,
        "reason": getattr(decision, "reason", Reason.CHILD_SPAWNED),  # Skip: Skipped.
        "message": decision.message,
    }
    spawn = isinstance(decision, chains.Spawn)
    # The child's lock is held from before its create to the end of its start: its
    # watch event, often here before the create's answer, waits and then finds it
    # started, instead of reading and starting it a second time.
    async with lock_for(namespace, decision.child.name):
        made = await _create_child(rt, obj, decision, agents, output, first_pass, durable)
        child, created, prepared = made
        if prepared is None:
            # Only a prepared launch goes before the parent's end: any other start may
            # end the child, even the chain, at once (a Skipped or refused record, a
            # missing agent), and a memoryScope: all prompt lists the ended jobs.
            await closed()
        if not spawn:
            # A Skipped or refused record ends as it starts and may complete the chain:
            # the parent's record of the step goes first, so that a complete chain
            # never shows a parent without its ``next``.  The child exists, so a crash
            # here leaves it to its watch event and the resync, like any unstarted job.
            await _record_next(rt, obj, entry, closed)
        # Fast path: start the child now rather than on its watch event.  A spawned
        # child's parent record comes after, off the hop's critical path: a crash in
        # between replays the same decision, whose create answers AlreadyExists.
        if created:
            await starting.start_locked(rt, child, prepared)
    if not created:
        await starting.start(rt, child)
    if isinstance(decision, chains.Refuse):
        _count_refusal(namespace, decision.reason)
    if not spawn:
        return
    if ended_at is not None:
        metrics.HOP_LATENCY.observe(time.monotonic() - ended_at)
    await _record_next(rt, obj, entry, closed)


def _count_refusal(namespace: str, reason: str) -> None:
    if reason == Reason.LOOP_DETECTED:
        metrics.LOOPS_BLOCKED.labels(namespace).inc()
    elif reason == Reason.MAX_CHAIN_DEPTH_EXCEEDED:
        metrics.DEPTH_REFUSALS.labels(namespace).inc()


async def _record_next(rt: Runtime, obj: Obj, entry: Obj, closed: Closed) -> None:
    namespace, name = records.name_of(obj)
    entry = {k: v for k, v in entry.items() if v is not None}
    if not await closed({"next": [entry]}):
        await records.patch(obj, {"next": [entry]})
    job = records.parse(obj)
    await rt.chains.record_hop(
        namespace,
        records.position(obj).chain_id,
        job_name=name,
        agent=job.spec.agent_role,
        phase=job.status.phase or "",
        decision=str(entry["action"]),
        detail=str(entry.get("child") or entry.get("message") or ""),
    )
    await team.hop(rt, obj, entry)


async def _create_child(
    rt: Runtime,
    parent: Obj,
    decision: chains.Spawn | chains.Skip | chains.Refuse,
    agents: list[tuple[Obj, AiAgent]],
    output: Output | None,
    first_pass: bool,
    durable: Awaitable[None] | None,
) -> tuple[Obj, bool, starting.Prepared | None]:
    """Create the child once ``durable``; a Spawn's launch is prepared (its prompt, on a
    first pass its batch Job created too) before."""
    namespace = parent["metadata"]["namespace"]
    plan = decision.child
    annotations = chains.position_annotations(plan.position, plan.parent)
    if isinstance(decision, chains.Skip):
        annotations[records.DISPOSITION] = "skipped"
        annotations[records.DISPOSITION_MESSAGE] = decision.message
    elif isinstance(decision, chains.Refuse):
        annotations[records.DISPOSITION] = f"refused:{decision.reason}"
        annotations[records.DISPOSITION_MESSAGE] = decision.message
    spec = records.parse(parent).spec
    child_spec: Obj = {
        "agentRole": plan.agent,
        "type": spec.type,
        "origin": "chain",
        "event": spec.event.to_api() if spec.event else None,
        "chainContext": await _context_for(rt, parent, plan, agents, output),
    }
    body: Obj = {
        "apiVersion": models.API_VERSION,
        "kind": "AgentJob",
        "metadata": {
            "name": plan.name,
            "namespace": namespace,
            "labels": chains.position_labels(plan.position, plan.agent),
            "annotations": annotations,
        },
        "spec": {k: v for k, v in child_spec.items() if v is not None},
    }

    def creating() -> Awaitable[tuple[Obj, bool]]:
        return _after(durable, lambda: resources.create(namespace, resources.AGENTJOBS, body))

    agent = next((a for _, a in agents if a.spec.trigger_name == plan.agent), None)
    prepared = None
    if isinstance(decision, chains.Spawn) and agent and starting.preparable(body, agent):
        # The batch Job's create goes out alone, before the AgentJob's: its pod is the
        # hop, the API server answers it sooner without a second create beside it, and
        # nothing the AgentJob is needed for (owner, Secret, status) is on the hop.
        prepared = await _try_prepare(rt, body, agent, create=first_pass, durable=durable)
        try:
            child, created = await creating()
        except Exception:
            await _drop_unowned(namespace, prepared)
            raise
        if not created:
            # A child made elsewhere, which may have run already: a batch Job created
            # for it here must not run.
            await _drop_unowned(namespace, prepared)
            prepared = None
    else:
        child, created = await creating()
    if created and isinstance(decision, chains.Spawn) and decision.notify:
        metrics.FAILURE_NOTIFICATIONS.labels(namespace, plan.agent).inc()
        await events.emit(parent, "Warning", Reason.CHAIN_NOTIFY, decision.message, key="notify")
    return child, created, prepared


async def _drop_unowned(namespace: str, prepared: starting.Prepared | None) -> None:
    if prepared is not None and prepared.unowned is not None:
        unowned = prepared.unowned["metadata"]
        await workloads.delete_job(namespace, unowned["name"], unowned["uid"])


async def _after(durable: Awaitable[None] | None, then: Callable[[], Awaitable[T]]) -> T:
    if durable is not None:
        await durable
    return await then()


async def _try_prepare(
    rt: Runtime, body: Obj, agent: AiAgent, *, create: bool, durable: Awaitable[None] | None
) -> starting.Prepared | None:
    """The child's launch (its batch Job created too when ``create``, once ``durable``),
    or None to leave it to the ordinary start, which then meets the same failure
    (e.g. a template that does not render) and records it."""
    try:
        prepared = await starting.prepare(rt, body, agent, [])
        if not create:
            return prepared
        return await _after(durable, lambda: starting.create_unowned(prepared))
    except Exception:  # Retried, and reported, by the ordinary start.
        log.debug("Preparing %s ahead failed", body["metadata"]["name"], exc_info=True)
        return None


async def _context_for(
    rt: Runtime,
    parent: Obj,
    plan: chains.ChildPlan,
    agents: list[tuple[Obj, AiAgent]],
    output: Output | None,
) -> str:
    """The child's <chain-context>: the parent's output, or its hand-off section."""
    namespace, name = records.name_of(parent)
    job = records.parse(parent)
    if job.status.phase == "Skipped":
        return job.spec.chain_context or ""  # Pass the last real output across the skip.
    if output is None:
        record = await rt.outputs.get(namespace, name)
        if record is None:
            output = (None, None)
        elif record.available:
            output = (record.text, None)
        else:  # Never an empty string standing in for output that was lost.
            output = (None, record.unavailable_reason)
    text, lost = output
    window: ContextWindow = "head" if plan.context_window == "head" else "tail"
    if text is None:
        lost = lost or job.status.message or "The parent's output was not captured."
        return context.chain_context_block(None, window=window, lost_reason=lost)
    agent = next((a for _, a in agents if a.spec.trigger_name == job.spec.agent_role), None)
    heading = agent.spec.handoff_heading if agent is not None else None
    # Up to a megabyte of output to parse: in a thread, so the loop that serves the
    # webhook and /healthz is not held (issue 14).
    return await asyncio.to_thread(
        context.child_block, text, window=window, handoff_heading=heading
    )


async def complete_chain(rt: Runtime, obj: Obj, action: str, message: str) -> None:
    """Mark the chain complete on its last job: once in Redis, visibly on the job."""
    namespace, name = records.name_of(obj)
    job = records.parse(obj)
    chain_id = records.position(obj).chain_id
    result = _chain_outcome(action, job.status.phase or "", job.status.reason or "")
    first = await rt.chains.mark_complete(namespace, chain_id, result, name)
    if first:
        metrics.CHAIN_OUTCOMES.labels(namespace, result).inc()
    await admitting.release(rt, namespace, chain_id)  # Its concurrency slot (issue 16).
    await team.complete(rt, obj, result)
    text = f"Chain {chain_id} is complete ({result}) at {name}: {message}".strip()
    cond = Condition(type=CHAIN_COMPLETE, status="True", reason=Reason.CHAIN_COMPLETE, message=text)
    # The Event goes first: ``chainComplete`` settles the job, after which nothing
    # replays this function, so a kill between the two writes in the other order lost
    # the Event for good (seen in e2e/chaos.py).  The Event's name is deterministic,
    # so a replay that already emitted it gets AlreadyExists.
    await events.emit(obj, "Normal", Reason.CHAIN_COMPLETE, text, key="chain-complete")
    await records.patch(obj, {"chainComplete": True}, condition=cond)


def _chain_outcome(action: str, phase: str, reason: str) -> str:
    if reason in REFUSAL_REASONS:
        return "refused"
    if action == "stopped":
        return "stopped"
    return "succeeded" if phase in ("Succeeded", "Skipped") else "failed"
