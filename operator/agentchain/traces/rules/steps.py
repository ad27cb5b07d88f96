"""The parts of a job's span: each attempt, the capture, the decision, the publish.

Each is a child of the job's span (``spans.job_span_id``) whose id is a digest of the
job's namespace and name and the part (``attempt 2``, ``capture``, ``decision``,
``publish``), like every id of the trace: a step replayed after a SIGKILL or on the
next leader describes the same span again, which the outbox records once.

Their times come from two clocks, and say which:

- an attempt is its pod's life, from the pod's own timestamps (created, scheduled,
  running, exited), which Kubernetes keeps to the whole second; the operator did not
  do those things, it saw them;
- the capture, the decision and the publish are the operator's own actions, timed by
  its clock in nanoseconds around them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from agentchain.traces.rules.spans import (
    AttributeValue,
    Span,
    attributes_of,
    job_part_span_id,
    job_span_id,
    nanos,
    trace_id,
)


@dataclass(frozen=True)
class PodMoments:
    """An attempt's pod's timestamps, as the API server wrote them (RFC 3339, whole
    seconds); None where the pod never got there or is not known."""

    created: str | None = None
    scheduled: str | None = None
    running: str | None = None
    exited: str | None = None


@dataclass(frozen=True)
class JobRef:
    """The job whose span the parts hang under."""

    namespace: str
    name: str
    chain_id: str
    agent: str


def step_span(
    job: JobRef,
    part: str,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, object] | None = None,
    error: str | None = None,
    events: tuple[tuple[str, int], ...] = (),
    title: str | None = None,
) -> Span:
    """Span ``agentjob <agent> <title>`` (``title`` defaults to ``part``, which names its
    id) under the job's span; None attributes are dropped."""
    values: dict[str, AttributeValue] = {"agentchain.chain.id": job.chain_id}
    return Span(
        name=f"agentjob {job.agent} {title or part}",
        trace=trace_id(job.chain_id),
        span=job_part_span_id(job.namespace, job.name, part),
        parent=job_span_id(job.namespace, job.name),
        start_ns=start_ns,
        end_ns=max(start_ns, end_ns),
        attributes=values | attributes_of(attributes or {}),
        error=error,
        events=events,
    )


@dataclass(frozen=True)
class AttemptFacts:
    """How one attempt went: its number, its pod, how it ended and what came of it
    (``reason``: the job's end reason, or why it is retried)."""

    attempt: int
    pod: str | None
    exit_code: int | None
    reason: str
    failed: bool
    moments: PodMoments
    deadline: bool = False
    lost: str | None = None
    not_before: int | None = None
    """Its job's start (``spans.created_ns``): the pod's whole-second times are kept
    within the job's span, as its ``running`` part is."""


def attempt_span(job: JobRef, facts: AttemptFacts, observed_ns: int) -> Span:
    """The attempt's span: its pod's creation to its agent's exit (when the pod says
    neither, the moment the operator saw the end), with its pod's moments as events;
    all within its job's span (``not_before``)."""
    moments = facts.moments
    floor = facts.not_before if facts.not_before is not None else 0
    end = max(nanos(moments.exited, observed_ns), floor)
    start = min(
        max(nanos(moments.created or moments.scheduled or moments.running, end), floor), end
    )
    events = tuple(
        (name, min(max(nanos(at, start), start), end))
        for name, at in (
            ("pod.scheduled", moments.scheduled),
            ("pod.running", moments.running),
            ("pod.exited", moments.exited),
        )
        if at
    )
    attributes = {
        "agentchain.job.attempt": facts.attempt,
        "agentchain.job.pod": facts.pod,
        "agentchain.job.exit_code": facts.exit_code,
        "agentchain.job.reason": facts.reason or None,
        "agentchain.job.deadline_exceeded": True if facts.deadline else None,
        "agentchain.output.lost": facts.lost,
    }
    error = (facts.reason or "Failed") if facts.failed else None
    return step_span(job, f"attempt {facts.attempt}", start, end, attributes, error, events)


def publish_span_id(namespace: str, publisher: str) -> int:
    """The 64-bit id of the span of publish Job ``publisher``'s start: named by the Job,
    so its end, seen later by whichever replica, finds it without knowing which job's
    hop started it."""
    return job_part_span_id(namespace, publisher, "publish")


def publish_span(
    job: JobRef, publisher: str, start_ns: int, end_ns: int, attributes: Mapping[str, object]
) -> Span:
    """``agentjob <agent> publish``: the operator starting publish Job ``publisher`` (the
    push of the chain's workspace) in ``job``'s hop, under ``job``'s span."""
    span = step_span(job, "publish", start_ns, end_ns, {"agentchain.publish.job": publisher})
    extra = attributes_of(attributes)
    return replace(
        span,
        span=publish_span_id(job.namespace, publisher),
        attributes={**span.attributes, **extra},
    )


def push_span(
    chain_id: str,
    namespace: str,
    publisher: str,
    times: tuple[str | None, str | None],
    observed_ns: int,
    outcome: str,
    failed: bool,
) -> Span:
    """``publish <outcome>``: publish Job ``publisher``'s run, from its creation to its end
    (``times``: the Job's own timestamps, to the second; the end, when the Job says none,
    is when the operator saw it), under the span of its start (:func:`publish_span`)."""
    end = nanos(times[1], observed_ns)
    start = min(nanos(times[0], end), end)
    return Span(
        name=f"publish {outcome}",
        trace=trace_id(chain_id),
        span=job_part_span_id(namespace, publisher, "push"),
        parent=publish_span_id(namespace, publisher),
        start_ns=start,
        end_ns=end,
        attributes={
            "agentchain.chain.id": chain_id,
            "agentchain.publish.job": publisher,
            "agentchain.publish.outcome": outcome,
        },
        error=outcome if failed else None,
    )
