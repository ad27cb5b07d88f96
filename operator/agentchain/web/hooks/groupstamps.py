"""Concurrency groups at intake: stamp a root job's group, and queue it at once.

A chain's place in its group's queue is its *ticket*, when its job was received
(``bodies.agentjob_body`` stamps it).  The webhook's dispatcher creates AgentJobs side
by side, so the engine may see delivery 3's job before delivery 1's; if admission
waited for the engine, delivery 3 could take the slot first.  So the webhook renders
the group here (the agent's template over the event, the same sandbox and the same
variables as the engine's fallback) and puts the job in its group's queue right after
the delivery is accepted, before the dispatcher is woken: by the time any of these
jobs exists, all of them wait in ticket order.  A crash between the two steps only
loses the early place: the engine queues the job when it first sees it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentchain import models
from agentchain.flow.rules import concurrency
from agentchain.flow.slots import AdmissionStore
from agentchain.github.rules.matching import AgentCandidate
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import AiAgentSpec
from agentchain.store.deliveries import QueuedJob


@dataclass(frozen=True)
class Early:
    """A job to put in its group's queue once its delivery is accepted."""

    job: QueuedJob
    group: str
    ticket: int


def stamp(planned: Sequence[QueuedJob], agents: dict[str, AiAgentSpec]) -> list[Early]:
    """Annotate each planned root job with its group (``agents`` by triggerName); the
    jobs of ``queue`` groups are answered, to be queued early."""
    early = []
    for job in planned:
        spec = agents.get(job.body["spec"]["agentRole"])
        if spec is None or spec.concurrency is None:
            continue
        raw_event = job.body["spec"].get("event")
        event = JobEvent.model_validate(raw_event) if raw_event else None
        try:
            group = concurrency.render_group(spec.concurrency, event, spec.trigger_name)
        except concurrency.GroupRenderError:
            continue  # The engine renders it again and records why it fails.
        annotations = job.body["metadata"].setdefault("annotations", {})
        annotations[concurrency.GROUP] = group
        ticket = concurrency.ticket_of(annotations, 0)
        if spec.concurrency.policy == "queue" and ticket:
            early.append(Early(job, group, ticket))
    return early


def specs_of(candidates: Sequence[AgentCandidate]) -> dict[str, AiAgentSpec]:
    found: dict[str, AiAgentSpec] = {}
    for candidate in candidates:
        found.setdefault(candidate.spec.trigger_name, candidate.spec)
    return found


async def enqueue(store: AdmissionStore, early: Sequence[Early]) -> None:
    for item in early:
        chain = item.job.body["metadata"]["annotations"][models.CHAIN_ID]
        await store.enqueue(
            item.job.namespace, item.group, chain=chain, job=item.job.name, ticket=item.ticket
        )
