"""Stopping a job: what a stop request says, and how a stopped job ends.

A stop reaches a job in one shape whatever sent it: annotations on the AgentJob
(``labrats.work/stop: "true"``, an optional ``stop-reason`` and ``stopped-by``).
``kubectl annotate`` writes them directly; the job API writes the same ones (with
``stopped-by: api``), so a stop is durable in etcd before anyone acts on it, and an
operator killed half-way through applying it finds it again on its next watch.

Who wins when a stop meets the job's natural end is not decided here but in Redis
(``flow/stoprecords.py``): both write the one ending record of the attempt, first writer
wins.  This module only turns the annotations into a request and a request into the
job's ending.  Annotation text is data: it is trimmed to one short line of
printable characters (linear time), never templated or rendered.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentchain import models
from agentchain.core.rules.outcomes import Ending
from agentchain.models.conditions import Reason

STOP = f"{models.GROUP}/stop"
STOP_REASON = f"{models.GROUP}/stop-reason"
STOPPED_BY = f"{models.GROUP}/stopped-by"
SUPERSEDED_BY = f"{models.GROUP}/superseded-by"
"""Set by a concurrency group's ``cancel-in-progress``: the AgentJob that replaced it."""

TEXT_MAX_CHARS = 200
TRUE_VALUES = frozenset({"true", "yes", "1"})


@dataclass(frozen=True)
class StopRequest:
    """Someone asked the job to stop; ``successor`` when a newer chain superseded it."""

    by: str
    reason: str = ""
    successor: str | None = None

    def to_record(self) -> dict[str, str | None]:
        return {"by": self.by, "reason": self.reason, "successor": self.successor}

    @classmethod
    def from_record(cls, data: object) -> StopRequest | None:
        if not isinstance(data, dict) or not isinstance(data.get("by"), str):
            return None
        successor = data.get("successor")
        return cls(
            by=clean(data["by"]) or "unknown",
            reason=clean(str(data.get("reason") or "")),
            successor=clean(successor) if isinstance(successor, str) else None,
        )


def clean(text: str) -> str:
    """One line of at most ``TEXT_MAX_CHARS`` printable characters."""
    kept = "".join(c if c.isprintable() else " " for c in text[: TEXT_MAX_CHARS * 4])
    return " ".join(kept.split())[:TEXT_MAX_CHARS]


def requested(annotations: dict[str, str] | None) -> StopRequest | None:
    """The stop the annotations ask for, or None."""
    annotations = annotations or {}
    if str(annotations.get(STOP, "")).strip().lower() not in TRUE_VALUES:
        return None
    successor = clean(annotations.get(SUPERSEDED_BY, "")) or None
    return StopRequest(
        by=clean(annotations.get(STOPPED_BY, "")) or "annotation",
        reason=clean(annotations.get(STOP_REASON, "")),
        successor=successor,
    )


def annotations_for(request: StopRequest) -> dict[str, str]:
    """The annotations that ask for ``request`` (what the API and supersession write)."""
    out = {STOP: "true", STOPPED_BY: clean(request.by) or "unknown"}
    if request.reason:
        out[STOP_REASON] = clean(request.reason)
    if request.successor:
        out[SUPERSEDED_BY] = clean(request.successor)
    return out


BY_BUDGET = "budget"
"""Who stops a chain over its budget (``flow/rules/budgets.py``)."""


def ending(request: StopRequest) -> Ending:
    """A stopped job's end: Cancelled, reason Stopped (Superseded, BudgetExceeded)."""
    if request.by == BY_BUDGET:
        return Ending("Cancelled", Reason.BUDGET_EXCEEDED, f"Budget exceeded: {request.reason}")
    if request.successor and request.reason:  # Something newer that is no chain: a push.
        message = f"Superseded by {request.successor}: {request.reason}."
        return Ending("Cancelled", Reason.SUPERSEDED, message)
    if request.successor:
        message = f"Superseded by {request.successor} (a newer chain of its concurrency group)."
        return Ending("Cancelled", Reason.SUPERSEDED, message)
    why = f": {request.reason}" if request.reason else "."
    return Ending("Cancelled", Reason.STOPPED, f"Stopped by {request.by}{why}")


def ending_of(stop: object) -> Ending | None:
    """The ending a recorded stop (``StopRequest.to_record``) decided, or None."""
    request = StopRequest.from_record(stop) if stop is not None else None
    return ending(request) if request is not None else None


def status_fields(stop: object) -> dict[str, str]:
    """``stoppedBy`` (and ``supersededBy``) of a recorded stop, for the job's status."""
    request = StopRequest.from_record(stop) if stop is not None else None
    if request is None:
        return {}
    fields = {"stoppedBy": request.by}
    if request.successor:
        fields["supersededBy"] = request.successor
    return fields
