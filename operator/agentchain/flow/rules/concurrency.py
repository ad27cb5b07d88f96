"""Concurrency groups: which group a chain belongs to, and what an admission answer means.

A root job (a chain's first) whose AiAgent names ``concurrency`` joins a group, the
agent's ``group`` template rendered over the event in the prompt sandbox (event text
is data: a ``{{`` in an issue title is never evaluated).  The group's slots are held
by chains, from admission to the chain's completion, and handed out by one Lua step
in Redis (``flow/slots.py``), so a burst of deliveries never over-admits.

The queue is ordered by a *ticket*: when the job was received (the webhook or the
API stamps it on the AgentJob), not when the engine first saw it, so chains run in
delivery order although the webhook's dispatcher creates AgentJobs side by side.

This module is pure: rendering, the annotations, and reading the Lua step's answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentchain import models
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import Concurrency
from agentchain.prompts.rules import assembly

GROUP = f"{models.GROUP}/concurrency-group"
"""The rendered group, on a root AgentJob."""
TICKET = f"{models.GROUP}/ticket"
"""When the job was received (ns since the epoch): its place in its group's queue."""
GROUP_MAX_CHARS = 200
NAMESPACE_GROUP = "\x00namespace"
"""The per-namespace limit on started jobs, kept as a group whose holders are jobs; never
a rendered group's name, which is printable."""


ROUND_GROUP_PREFIX = "\x00follow-up rounds on "
"""A follow-up round's group (:func:`round_group`): never a rendered group's name, which is
printable, so no agent's template can join it."""
ROUND_CONCURRENCY = Concurrency(group="-", limit=1, policy="cancel-in-progress")
"""One round per pull request and agent at a time; a newer one stops the one running."""


def round_group(event: JobEvent | None, agent: str) -> str | None:
    """The group of a follow-up round's root job (``event`` as the operator vouches for
    it): one per pull request and agent, whatever the agent's own ``concurrency`` says,
    so a failure reported while a round runs supersedes it (cancel-in-progress) rather
    than starting a second round beside it.  None for any other job."""
    if event is None or not event.continues or event.number is None or not event.repository:
        return None
    return pull_round_group(event.repository, event.number, agent)


def pull_round_group(repository: str, number: int, agent: str) -> str:
    """The group of ``agent``'s rounds on pull request ``number`` of ``repository``."""
    return f"{ROUND_GROUP_PREFIX}{repository}#{number} by {agent}"[:GROUP_MAX_CHARS]


class GroupRenderError(ValueError):
    """The group template did not render; the message says why."""


def group_variables(event: JobEvent | None, agent: str) -> dict[str, Any]:
    """What a concurrency ``group`` template sees (docs/prompts.md lists it; a test
    holds the two together): the event as a prompt template has it, and short names
    for what groups are usually made of."""
    data: dict[str, Any] = event.model_dump(mode="json") if event is not None else {}
    return {
        "event": data or None,
        "repository": data.get("repository") or "",
        "issue": {"number": data.get("number"), "title": data.get("title")},
        "number": data.get("number"),
        "sender": data.get("sender") or "",
        "agent": agent,
    }


def render_group(concurrency: Concurrency, event: JobEvent | None, agent: str) -> str:
    """The group a chain joins: the template rendered over the event, one clean line."""
    try:
        rendered = assembly.render_template(concurrency.group, group_variables(event, agent))
    except assembly.PromptRenderError as exc:
        raise GroupRenderError(str(exc)) from exc
    group = " ".join("".join(c if c.isprintable() else " " for c in rendered).split())
    if not group:
        raise GroupRenderError(f"concurrency group {concurrency.group!r} rendered empty")
    return group[:GROUP_MAX_CHARS]


def ticket_of(annotations: dict[str, str] | None, fallback: int) -> int:
    """The job's ticket from its annotation, or ``fallback`` (when first seen)."""
    raw = (annotations or {}).get(TICKET, "")
    return int(raw) if raw.isdigit() and len(raw) <= 20 else fallback


@dataclass(frozen=True)
class Admitted:
    """The chain holds a slot; ``victims`` (cancel-in-progress) are the root jobs of the
    chains it displaced, and ``promoted`` the queued root jobs now admitted too."""

    victims: tuple[tuple[str, str], ...] = ()
    promoted: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Queued:
    position: int
    promoted: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Refused:
    limit: int


@dataclass(frozen=True)
class Superseded:
    """cancel-in-progress, and a newer chain already holds the group: this one is stale."""

    by_job: str


Verdict = Admitted | Queued | Refused | Superseded


def _pairs(flat: list[str]) -> tuple[tuple[str, str], ...]:
    return tuple((flat[i], flat[i + 1]) for i in range(0, len(flat) - 1, 2))


def verdict(answer: list[str], limit: int) -> Verdict:
    """The Lua step's answer (``flow/slots.py``) as a verdict."""
    kind = answer[0] if answer else ""
    if kind == "admitted":
        victims, promoted = _split(answer[1:])
        return Admitted(victims=victims, promoted=promoted)
    if kind == "queued":
        _, promoted = _split(answer[2:])
        return Queued(position=int(answer[1]), promoted=promoted)
    if kind == "superseded":
        return Superseded(by_job=answer[1])
    if kind == "refused":
        return Refused(limit=limit)
    raise ValueError(f"unknown admission answer {answer!r}")


def _split(rest: list[str]) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """``[victims..., '|', promoted...]`` as (chain, job) pairs."""
    cut = rest.index("|") if "|" in rest else len(rest)
    return _pairs(rest[:cut]), _pairs(rest[cut + 1 :])


def queued_message(group: str, position: int, limit: int) -> str:
    if group == NAMESPACE_GROUP:
        return (
            f"Queued under the namespace's limit of {limit} running job(s): position "
            f"{position}; it starts when one of them ends."
        )
    return (
        f"Queued in concurrency group {group!r} (limit {limit}): position {position}; "
        "it starts when a chain of the group completes."
    )


def refused_message(group: str, limit: int) -> str:
    return (
        f"Concurrency group {group!r} already runs {limit} chain(s) and its policy is "
        "refuse: this chain was not started."
    )
