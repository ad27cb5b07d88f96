"""Deciding: the facts ``hop.rules.chains.next_step`` needs, gathered for one ended job.

The decision is recomputed from recorded facts every time (the job's chain
annotations and status, the ``next`` of the trigger that started it, the
namespace's agents, the limits), so a replay after a crash gives the same answer
and therefore the same child name.  The agents come from the watch-fed catalog; a
decision that rests on an agent being absent or disabled is confirmed against a
fresh list first, so a just-made change is never missed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agentchain.aiagents.rules.resolution import Ambiguous
from agentchain.core import catalog, statuswriting
from agentchain.core.hopstate import Hop
from agentchain.core.rules.outcomes import REFUSAL_REASONS, outcome, trigger_step
from agentchain.hop.rules import chains
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason

_AGENT_REASONS = frozenset(
    {Reason.NEXT_AGENT_NOT_FOUND, Reason.NEXT_AGENT_DISABLED, Reason.DUPLICATE_TRIGGER_NAME}
)


@dataclass(frozen=True)
class Broken:
    """The job's chain metadata cannot be read: no chain to continue or complete."""

    message: str


async def decide(hop: Hop) -> chains.Decision | Broken:
    """What the chain does after ``hop``'s job, whose status says it ended."""
    agents = await hop.rt.agents.agents_in(hop.namespace)
    try:
        decision = _decide(hop, agents)
        if _needs_confirmation(decision, hop, agents):
            agents = await hop.rt.agents.refresh(hop.namespace)
            decision = _decide(hop, agents)
    except chains.ChainMetadataError as exc:
        return Broken(str(exc))
    return decision


def _decide(hop: Hop, agents: list[catalog.Entry]) -> chains.Decision:
    limits = chains.Limits(max_jobs=hop.rt.settings.max_chain_jobs)
    return chains.next_step(_finished(hop, agents), _infos(agents), limits)


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
