"""Follow-up rounds planned from a delivery: a failing check on a chain's pull request.

The webhook calls :func:`plan` with every verified delivery.  For a failing
``check_run``, ``check_suite`` or ``workflow_run`` (``github/rules/followups.py``) on a
pull request a chain of the operator opened (``github/roundrecords.py``), it finds the agent
of that chain that asks for rounds (``spec.github.followUps.checks``: the first such agent
in the chain's order), numbers the round, and returns what the webhook queues like any
match: a root AgentJob of that agent, whose event (sealed with it) names the pull request,
carries the failure as its body and the chain it continues (``continues``).  It is queued
in the same atomic step as the delivery's record, so a round starts exactly once per
delivery, across redeliveries and a killed process.

The round's chain gets the continued chain's workspace (``workspaces/attaching.py``):
the same repository and branch, checked out at the branch's head, published to the same
branch, which updates the same pull request.  The delivery that is the first past
``maxRounds`` queues nothing and says so on the pull request (once); later ones say
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from agentchain.core.runtime import Runtime
from agentchain.github import roundrecords
from agentchain.github.rules import followups as rules
from agentchain.github.rules.matching import AgentCandidate
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import GitHubFollowUps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Round:
    """One round to queue: ``agent`` of ``namespace``, with ``event``."""

    namespace: str
    agent: str
    event: JobEvent
    pull: int


@dataclass(frozen=True)
class Limit:
    """The delivery ends ``agent``'s rounds on the pull request: say so once."""

    repository: str
    pull: int
    agent: str
    max_rounds: int
    chain_id: str
    installation_id: int


def _follow_ups(candidate: AgentCandidate) -> GitHubFollowUps | None:
    access = candidate.spec.github
    return access.follow_ups if access is not None else None


def _agent_of(
    candidates: Sequence[AgentCandidate], chain_agents: Sequence[str]
) -> tuple[str, GitHubFollowUps] | None:
    """The first agent of the chain, in its order, that asks for rounds on failing checks
    (a triggerName two AiAgents share asks for nothing: which one's setting holds is
    unknown)."""
    for name in chain_agents:
        found = [c for c in candidates if c.spec.trigger_name == name]
        wants = _follow_ups(found[0]) if len(found) == 1 else None
        if wants is not None and wants.checks and found[0].spec.enabled:
            return name, wants
    return None


def _installation(payload: Mapping[str, Any]) -> int | None:
    found = payload.get("installation")
    value = found.get("id") if isinstance(found, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def plan(
    rt: Runtime,
    event: str,
    action: str | None,
    payload: Mapping[str, Any],
    base: JobEvent,
    grouped: Mapping[str, Sequence[AgentCandidate]],
) -> tuple[list[Round], list[Limit]]:
    """The rounds the delivery starts, and the limits it reaches (none for most)."""
    failed = rules.failed_checks(event, action, payload, rt.settings.github_app_id)
    installation = _installation(payload)
    if failed is None or installation is None or base.delivery_id is None:
        return [], []
    rounds: list[Round] = []
    limits: list[Limit] = []
    for pull in failed.pulls:
        try:
            planned = await _plan_pull(rt, failed, pull, base, grouped, installation)
        except RedisError as exc:  # The delivery's own record then fails the same way.
            log.warning("follow-up round for %s#%d not planned: %s", failed.repository, pull, exc)
            raise
        if isinstance(planned, Round):
            rounds.append(planned)
        elif isinstance(planned, Limit):
            limits.append(planned)
    return rounds, limits


async def _plan_pull(
    rt: Runtime,
    failed: rules.FailedCheck,
    pull: int,
    base: JobEvent,
    grouped: Mapping[str, Sequence[AgentCandidate]],
    installation: int,
) -> Round | Limit | None:
    found = await roundrecords.pull_chain(rt.redis, rt.operator_keys, failed.repository, pull)
    if found is None:
        return None
    namespace, chain_id = found
    record = await rt.chains.get(namespace, chain_id)
    chain_agents = [str(h.get("agent")) for h in (record.hops if record else [])]
    chosen = _agent_of(grouped.get(namespace, ()), chain_agents)
    if chosen is None:
        return None
    agent, wants = chosen
    delivery = str(base.delivery_id)
    number = await roundrecords.claim_round(rt.redis, failed.repository, pull, agent, delivery)
    verdict = rules.round_verdict(number, wants.max_rounds)
    if verdict == "limit":
        return Limit(failed.repository, pull, agent, wants.max_rounds, chain_id, installation)
    if verdict != "start":
        return None
    body = rules.failure_context([failed], pull, number, {})
    event = base.model_copy(
        update={
            "repository": failed.repository,
            "number": pull,
            "subject": "pull_request",
            "installation_id": installation,
            "head_sha": failed.head_sha or None,
            "head_repository": failed.repository,
            "title": f"Checks failed on pull request #{pull}: {failed.name}",
            "body": body,
            "url": failed.url or None,
            "continues": chain_id,
            "round": number,
        }
    )
    return Round(namespace, agent, event, pull)
