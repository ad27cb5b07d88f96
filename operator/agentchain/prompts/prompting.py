"""Gathering what goes into an agent's prompt, then handing it to the pure builders.

The I/O half of prompt building: dependency results, learnings (claimed in
Redis for one AgentJob *before* the prompt is built, see :func:`_learnings`),
store entries the agent may read, and the job's anchor.  The text itself is
composed by ``prompts.rules.assembly`` and ``prompts.rules.chaincontext.assemble``,
which make everything but the operator's own ``<chain-context>`` block inert.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field

from agentchain import faults, models
from agentchain.core import statuswriting
from agentchain.core.runtime import Runtime
from agentchain.hop.rules import chains
from agentchain.kube import resources, workloads
from agentchain.models.agentjob import TERMINAL_PHASES, AgentJob
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason
from agentchain.prompts.rules import assembly, chaincontext, storetrust
from agentchain.prompts.rules.assembly import DependencyResult
from agentchain.store import sealing

__all__ = ["DependencyResult", "DependencyState", "build", "dependencies"]


@dataclass
class DependencyState:
    waiting: bool = False
    reason: str = ""
    message: str = ""
    results: list[DependencyResult] = field(default_factory=list)
    # A dependency ended for a dependsOn cycle: this job may be in that cycle too, so
    # the cycle search runs although nothing is left to wait for.
    after_cycle: bool = False


async def dependencies(obj: statuswriting.Obj, job: AgentJob) -> DependencyState:
    namespace = obj["metadata"]["namespace"]
    state = DependencyState()
    for dep in job.spec.depends_on:
        if "/" in dep:
            msg = f"dependsOn names {dep!r}: dependencies must be in namespace {namespace}."
            return DependencyState(True, Reason.DEPENDENCY_NOT_FOUND, msg)
        found = await resources.get(namespace, resources.AGENTJOBS, dep)
        if found is None:
            msg = f"dependsOn names {dep!r}, which does not exist in namespace {namespace}."
            return DependencyState(True, Reason.DEPENDENCY_NOT_FOUND, msg)
        phase = (found.get("status") or {}).get("phase")
        if phase not in TERMINAL_PHASES:
            msg = f"Waiting for {dep} (phase {phase or 'Pending'})."
            return DependencyState(True, Reason.WAITING_FOR_DEPENDENCIES, msg)
        state.results.append(_result_of(found))
        state.after_cycle |= (found.get("status") or {}).get("reason") == Reason.DEPENDENCY_CYCLE
    return state


def _result_of(found: statuswriting.Obj) -> DependencyResult:
    spec = found.get("spec") or {}
    status = found.get("status") or {}
    return DependencyResult(
        name=found["metadata"]["name"],
        uid=str(found["metadata"].get("uid") or ""),
        agent=spec.get("agentRole", ""),
        title=spec.get("type") or found["metadata"]["name"],
        phase=status.get("phase", ""),
        result=status.get("result"),
    )


async def _chain_results(
    rt: Runtime, obj: statuswriting.Obj, job: AgentJob, pos: chains.ChainPosition
) -> list[DependencyResult]:
    """memoryScope: all — every ended job of the job's own chain and of its dependencies'
    chains, except this one.

    The dependencies' chains are how a hand-made coordinator reaches the chains it
    synthesises: only the operator places a job in a chain (``core.rules.provenance``), and
    for the same reason only jobs it placed there count (a hand-made AgentJob carrying
    a chain's label is none of its steps).
    """
    namespace, name = statuswriting.name_of(obj)
    chain_ids = [pos.chain_id]
    for dep in job.spec.depends_on:
        found = await resources.get(namespace, resources.AGENTJOBS, dep)
        chain = ((found or {}).get("status") or {}).get("chainId")
        if isinstance(chain, str) and chain not in chain_ids:
            chain_ids.append(chain)
    items: dict[str, statuswriting.Obj] = {}
    for chain in chain_ids:
        selector = f"{models.CHAIN_ID}={chain}"
        listed, _ = await resources.list_objects(
            namespace, resources.AGENTJOBS, label_selector=selector
        )
        items.update(
            (i["metadata"]["name"], i) for i in listed if sealing.placed(rt.operator_keys, i)
        )
    ended = [i for i in items.values() if (i.get("status") or {}).get("phase") in TERMINAL_PHASES]
    # Chain order: creationTimestamp has one-second resolution, so a fast parent and its
    # child often tie on it; the depth (set before a job runs) does not.
    ended.sort(key=_chain_order)
    return [_result_of(i) for i in ended if i["metadata"]["name"] != name]


def _chain_order(item: statuswriting.Obj) -> tuple[int, str, str]:
    depth = (item.get("status") or {}).get("chainDepth")
    meta = item["metadata"]
    created = meta.get("creationTimestamp", "")
    return (depth if isinstance(depth, int) else 0, created, meta["name"])


async def _full_outputs(
    rt: Runtime, namespace: str, deps: list[DependencyResult]
) -> list[DependencyResult]:
    """Prefer the full captured output over the 4,000-character status excerpt."""
    out = []
    for dep in deps:
        record = await rt.outputs.get(namespace, dep.name, dep.uid) if dep.uid else None
        text = record.text if record is not None else dep.result
        out.append(DependencyResult(dep.name, dep.agent, dep.title, dep.phase, text, dep.uid))
    return out


async def _learnings(
    rt: Runtime, obj: statuswriting.Obj, agent: AiAgent, pos: chains.ChainPosition
) -> str:
    """The learnings section, for the agent's first run in this chain only (SPEC §5).

    The claim names this AgentJob and is recorded before the prompt is built. After a
    crash anywhere past it, the rebuilt prompt of the *same* job gets the learnings
    again, and since that prompt only ever reaches the job's one batch Job (fixed name,
    created once), the learnings land in exactly one run: never twice, never lost.
    """
    ref = agent.spec.learnings
    if ref is None:
        return ""
    namespace, name = statuswriting.name_of(obj)
    claimant = f"{name}/{obj['metadata']['uid']}"
    if not await rt.chains.learnings_claim(
        namespace, pos.chain_id, agent.spec.trigger_name, claimant
    ):
        return ""
    faults.crashpoint("learnings-claimed")
    data = await workloads.read_config_map(namespace, ref.config_map_name)
    return assembly.learnings_section(data or {})


async def _store(rt: Runtime, namespace: str, agent: AiAgent) -> str:
    """The store section: the entries of the namespaces the agent reads, each one's value
    only if the agent's sender policy admits its writer (``prompts/rules/storetrust.py``)."""
    access = agent.spec.context_store
    if access is None or not access.read_namespaces:
        return ""  # Default deny: no store entries unless the AiAgent names namespaces.
    policy = agent.spec.sender_policy
    sections: dict[str, list[tuple[str, str]]] = {}
    for store_ns in access.read_namespaces:
        entries = await rt.contexts.recent(namespace, store_ns, access.max_entries)
        sections[store_ns] = [(e.key, storetrust.shown(e.value, e.trust, policy)) for e in entries]
    return assembly.store_section(sections)


async def build(
    rt: Runtime,
    obj: statuswriting.Obj,
    job: AgentJob,
    agent: AiAgent,
    pos: chains.ChainPosition,
    deps: list[DependencyResult],
    *,
    attempt: int = 1,
) -> str:
    """The prompt of ``attempt`` of the job.

    Only a retried attempt carries the job's anchor (SPEC §6): attempt 1 has not
    run, so it has written none. The anchor is this object's (keyed by its uid): one
    an earlier AgentJob of the same name wrote (deleted and created again) is not
    this job's to resume from.
    """
    namespace, name = statuswriting.name_of(obj)
    original = job.spec.prompt or assembly.render_prompt(
        agent.spec.prompt_template, job.spec.event, agent=agent.spec.trigger_name
    )
    if job.spec.memory_scope == "all":
        deps = await _chain_results(rt, obj, job, pos)
    dependency_text = ""
    if deps:
        full = await _full_outputs(rt, namespace, deps)
        dependency_text = assembly.dependency_section(full, scope=job.spec.memory_scope)
    uid = str(obj["metadata"].get("uid") or "")
    anchor = await rt.anchors.get_job_anchor(namespace, name, uid) if attempt > 1 and uid else None
    # Dependency results can be megabytes of agent output: neutralised in a thread.
    return await asyncio.to_thread(
        functools.partial(
            chaincontext.assemble,
            original=original,
            chain_context=job.spec.chain_context,
            learnings=await _learnings(rt, obj, agent, pos),
            store=await _store(rt, namespace, agent),
            dependencies=dependency_text,
            anchor=assembly.anchor_section(anchor) if anchor else "",
        )
    )
