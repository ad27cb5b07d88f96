"""A job whose ``agentRole`` names no AiAgent yet: wait for it, or end ``AgentNotFound``.

Objects applied together (``kubectl apply -f dir/``, Argo CD, Flux) reach the API
server in any order, so an AgentJob may be created a moment before its AiAgent.  Such
a job waits up to ``AGENTCHAIN_AGENT_WAIT_SECONDS`` after its creation (0: it ends at
once, as it did before the setting), then ends Failed, reason ``AgentNotFound``.  Only
a missing agent is waited for: a disabled agent or a triggerName two agents share is
what the user declared, not an arrival order, so those jobs end at once.

The clock is the job's ``creationTimestamp``, so the deadline is the same on every
look (the resync's, a watch event's, another replica's) and survives a restart.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from agentchain.models.conditions import Reason


@dataclass(frozen=True)
class AwaitAgent:
    """Wait until ``deadline`` (unix seconds); ``message`` says for what and how long."""

    deadline: float
    message: str


@dataclass(frozen=True)
class NoAgent:
    """The wait is over (or there is none): the job ends ``AgentNotFound``."""

    message: str
    reason: str = Reason.AGENT_NOT_FOUND


Verdict = AwaitAgent | NoAgent


def created_at(raw: object) -> float | None:
    """``metadata.creationTimestamp`` in unix seconds; None when absent or unreadable."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        when = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:  # The API server writes UTC; a bare time is read as UTC too.
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def missing_agent(role: str, created: float | None, now: float, wait_seconds: int) -> Verdict:
    """What a job does whose ``role`` names no AiAgent, ``now``, ``created`` (None: not
    known, counted as now: the job is new to whoever has no timestamp for it)."""
    if wait_seconds <= 0:
        return NoAgent(f"No AiAgent in this namespace has triggerName {role!r}.")
    start = now if created is None else created
    deadline = start + wait_seconds
    if now >= deadline:
        waited = int(now - start)
        return NoAgent(
            f"No AiAgent in this namespace has triggerName {role!r}: none was created within"
            f" {wait_seconds} s of the job (it waited {waited} s)."
        )
    until = dt.datetime.fromtimestamp(deadline, dt.UTC).isoformat(timespec="seconds")
    return AwaitAgent(
        deadline,
        f"Waiting for an AiAgent with triggerName {role!r} in this namespace until {until}"
        f" ({wait_seconds} s after the job's creation); then it ends AgentNotFound.",
    )
