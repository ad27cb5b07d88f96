"""Deciding: the facts ``hop.rules.chains.next_step`` needs, gathered for one ended job.

The decision is recomputed from recorded facts every time (the job's chain
annotations and status, the ``next`` of the trigger that started it, the
namespace's agents, the limits), so a replay after a crash gives the same answer
and therefore the same child name.  The agents come from the watch-fed catalog; a
decision that rests on an agent being absent or disabled is confirmed against a
fresh list first, so a just-made change is never missed.

A decision that ends the job's branch (``Stop``, ``End``) completes the chain only
when no other job of it is open, so those decisions are made again with the chain's
open jobs (``Finished.others_open``, ruled by ``hop.rules.branches``), read from a fresh
list of the chain's AgentJobs (not the watch, which may lag a write another branch just
made).  The caller holds
the chain's lock (:func:`chain_lock`) from before this read until the job's
``status.next`` is written: two branches ending together then take turns, and the
second sees the first's ``next``, so exactly one of them completes the chain.  Only
jobs under the operator's seal count (``statuswriting.position``): a hand-made AgentJob
labelled with a chain's id cannot hold that chain open.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from agentchain import models
from agentchain.aiagents.rules.resolution import Ambiguous
from agentchain.core import catalog, statuswriting
from agentchain.core.hopstate import Hop, Obj
from agentchain.core.rules.outcomes import REFUSAL_REASONS, is_terminal, outcome, trigger_step
from agentchain.hop import tracing
from agentchain.hop.rules import branches, chains
from agentchain.kube import resources
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason
from agentchain.traces.rules import steps

_AGENT_REASONS = frozenset(
    {Reason.NEXT_AGENT_NOT_FOUND, Reason.NEXT_AGENT_DISABLED, Reason.DUPLICATE_TRIGGER_NAME}
)


@dataclass(frozen=True)
class Broken:
    """The job's chain metadata cannot be read: no chain to continue or complete."""

    message: str


CHAIN_LOCK = "chain/"
"""The per-chain lock (``Locks``, a key no AgentJob name can be) around a branch's end."""


def chain_lock(hop: Hop) -> str | None:
    """The lock key of ``hop``'s chain; None when its chain metadata cannot be read."""
    try:
        return CHAIN_LOCK + statuswriting.position(hop.obj, hop.rt.operator_keys).chain_id
    except chains.ChainMetadataError:
        return None


async def decide(hop: Hop) -> chains.Decision | Broken:
    """What the chain does after ``hop``'s job, whose status says it ended; its span
    recorded before anything acts on it (a replay decides, and records, the same)."""
    began = time.time_ns()
    agents = await hop.rt.agents.agents_in(hop.namespace)
    try:
        decision = _decide(hop, agents)
        if _needs_confirmation(decision, hop, agents):
            agents = await hop.rt.agents.refresh(hop.namespace)
            decision = _decide(hop, agents)
        if isinstance(decision, chains.Stop | chains.End):  # Does it complete the chain?
            decision = _decide(hop, agents, await _others_open(hop))
    except chains.ChainMetadataError as exc:
        return Broken(str(exc))  # In no chain the operator can read, so in no trace.
    await _trace(hop, decision, began)
    return decision


async def _trace(hop: Hop, decision: chains.Decision, began: int) -> None:
    """The decision's span: what comes next (agent, job), or why nothing does."""
    job = tracing.job_ref(hop)
    if job is None:
        return
    said = {f"agentchain.decision.{k}": v for k, v in chains.summary(decision).items()}
    span = steps.step_span(job, "decision", began, time.time_ns(), said)
    await hop.rt.traces.record(span)


def _decide(
    hop: Hop, agents: list[catalog.Entry], others_open: tuple[str, ...] = ()
) -> chains.Decision:
    limits = chains.Limits(max_jobs=hop.rt.settings.max_chain_jobs)
    finished = dataclasses.replace(_finished(hop, agents), others_open=others_open)
    return chains.next_step(finished, _infos(agents), limits)


async def _others_open(hop: Hop) -> tuple[str, ...]:
    """The other jobs of ``hop``'s chain that have not ended and decided yet
    (``hop.rules.branches``)."""
    chain_id = statuswriting.position(hop.obj, hop.rt.operator_keys).chain_id
    selector = f"{models.CHAIN_ID}={chain_id}"
    jobs, _ = await resources.list_objects(
        hop.namespace, resources.AGENTJOBS, label_selector=selector
    )
    ending = branches.Member(hop.name, hop.job.spec.agent_role, decided=False)
    members = (m for obj in jobs if (m := _member(obj, chain_id, hop)) is not None)
    return branches.still_open(ending, members)


def _member(obj: Obj, chain_id: str, hop: Hop) -> branches.Member | None:
    """``obj`` as a member of chain ``chain_id``; None when it is not the operator's
    record of this chain (a hand-made AgentJob with the chain's label holds nothing open)."""
    try:
        if statuswriting.position(obj, hop.rt.operator_keys).chain_id != chain_id:
            return None
    except chains.ChainMetadataError:
        return None
    status = statuswriting.parse(obj).status
    role = str(obj.get("spec", {}).get("agentRole", ""))
    return branches.Member(
        str(obj["metadata"]["name"]), role, decided=is_terminal(status) and bool(status.next)
    )


def _needs_confirmation(decision: chains.Decision, hop: Hop, agents: list[catalog.Entry]) -> bool:
    """A decision that rests on an agent being absent or disabled is re-checked
    against a fresh list: the catalog may not have seen a just-made change yet."""
    if isinstance(decision, chains.Refuse | chains.Stop) and decision.reason in _AGENT_REASONS:
        return True
    role = hop.job.spec.agent_role
    return not any(a.spec.trigger_name == role for _, a in agents)


def _infos(agents: list[catalog.Entry]) -> dict[str, chains.AgentInfo]:
    infos: dict[str, chains.AgentInfo] = {}
    for obj, agent in agents:
        spec = agent.spec
        seen = infos.get(spec.trigger_name)
        holders = (*(seen.holders if seen else ()), obj["metadata"]["name"])
        info = seen or chains.AgentInfo(spec.trigger_name, spec.enabled, agent.manual_next())
        infos[spec.trigger_name] = dataclasses.replace(info, holders=holders)
    return infos


def _finished(hop: Hop, agents: list[catalog.Entry]) -> chains.Finished:
    obj = hop.obj
    job = statuswriting.parse(obj)
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
        position=statuswriting.position(obj, hop.rt.operator_keys),
        outcome=outcome(job.status),  # type: ignore[arg-type]
        step=step,
        refused=refused,
        ambiguity=agent.message if isinstance(agent, Ambiguous) and not refused else None,
    )
