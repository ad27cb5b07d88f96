"""A chain's trace as values: its ids, derived from what its records keep for good.

A chain is one trace.  Its trace id and every span id are digests of names the chain's
objects carry for their whole life (the chain id; a job's namespace and name), so any
replica, before or after a crash or a leader failover, names the same span the same way:
continuing a trace needs nothing stored, and a hop replayed after a crash describes the
same span again, which the outbox (``traces/outbox``) then records once.

The tree:

- the root span is the chain's trigger (the webhook delivery, the API call), recorded by
  whatever received it; a chain with no recorded trigger (an AgentJob made by hand, or a
  trigger that died before recording it) gets one at its root job's end, named after the
  job's creation, with the same id, so the tree never has a missing root;
- every AgentJob is a span under its parent job's span (``labrats.work/parent-job``), the
  root job under the root span; a delegated job hangs under the job that delegated to it;
- a job's span starts at the object's creation and ends at its recorded end, so it covers
  waiting (dependencies, queue, approval), every attempt and the capture; for a job that
  ran, two spans under it split it where its pod was first seen running (``waiting``,
  ``running``); its attributes
  say what happened (phase, reason, exit code, attempt, usage) under OpenTelemetry's GenAI
  semantic-convention names where they fit (``gen_ai.agent.name``,
  ``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` and ``output_tokens`` where
  the agent's runtime split its tokens); the total an agent reports, which its budgets
  count and which may count more than the two, keeps agentchain's name.

Spans are recorded after the fact, from the object, with the times it records: never
held open in a process that a SIGKILL could take with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

AttributeValue = str | int | float | bool
Kind = Literal["internal", "server"]

TRACEPARENT_ENV = "TRACEPARENT"
"""The W3C trace context a process started under a span reads (the OpenTelemetry
environment-carrier convention; Claude Code, Codex and the SDKs honour it)."""
SERVICE_NAME = "agentchain"
_HEX = frozenset("0123456789abcdef")


def _digest(kind: str, *parts: str, size: int) -> int:
    raw = hashlib.sha256("\0".join((kind, *parts)).encode()).digest()
    return int.from_bytes(raw[:size], "big") or 1  # An all-zero id is invalid in W3C.


def span_id(kind: str, *parts: str) -> int:
    """A 64-bit span id: the digest of ``kind`` and ``parts`` (names kept for good)."""
    return _digest(kind, *parts, size=8)


def trace_id(chain_id: str) -> int:
    """The 128-bit trace id of chain ``chain_id``."""
    return _digest("agentchain/trace", chain_id, size=16)


def root_span_id(chain_id: str) -> int:
    """The 64-bit id of the chain's root span (its trigger)."""
    return _digest("agentchain/root", chain_id, size=8)


def job_span_id(namespace: str, name: str) -> int:
    """The 64-bit id of AgentJob ``namespace/name``'s span."""
    return _digest("agentchain/job", namespace, name, size=8)


def parent_span_id(chain_id: str, namespace: str, parent_job: str | None) -> int:
    """The span a job's span hangs under: its parent job's, or the chain's root span."""
    if parent_job:
        return job_span_id(namespace, parent_job)
    return root_span_id(chain_id)


def traceparent(trace: int, span: int) -> str:
    """The W3C ``traceparent`` header value for ``span`` of ``trace``, sampled."""
    return f"00-{trace:032x}-{span:016x}-01"


ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
AGENT_ENV_NAMES = (TRACEPARENT_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL")
"""The trace variables an agent's pod gets (``agent_env``): what a process in it, such as
``agentchain mcp``, needs to export its own spans under the job's."""


def configured(environ: Mapping[str, str]) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces to be exported: an endpoint named,
    and neither the SDK nor the traces exporter turned off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_ENVS)


def parse_traceparent(value: str) -> tuple[int, int] | None:
    """The trace id and span id a W3C ``traceparent`` names; None if it is malformed."""
    parts = value.strip().lower().split("-")
    if [len(p) for p in parts] != [2, 32, 16, 2] or parts[0] == "ff":
        return None
    if not all(set(p) <= _HEX for p in parts):
        return None
    trace, span = int(parts[1], 16), int(parts[2], 16)
    return (trace, span) if trace and span else None


def agent_env(chain_id: str, namespace: str, job: str, endpoint: str) -> dict[str, str]:
    """What an agent's pod gets so that its own spans nest under its job's span: the
    job's ``TRACEPARENT`` and, when the operator exports somewhere, that endpoint."""
    env = {TRACEPARENT_ENV: traceparent(trace_id(chain_id), job_span_id(namespace, job))}
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
    return env


@dataclass(frozen=True)
class Span:
    """One finished span, as the outbox keeps it and the exporter sends it."""

    name: str
    trace: int
    span: int
    parent: int | None
    start_ns: int
    end_ns: int
    kind: Kind = "internal"
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    error: str | None = None
    """Set (the reason) when what the span describes failed."""
    events: tuple[tuple[str, int], ...] = ()
    """Moments within the span, by name and Unix nanoseconds (an attempt's pod scheduled,
    running, exited)."""

    def ids(self) -> tuple[str, str]:
        return f"{self.trace:032x}", f"{self.span:016x}"

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "trace": f"{self.trace:032x}",
                "span": f"{self.span:016x}",
                "parent": None if self.parent is None else f"{self.parent:016x}",
                "start": self.start_ns,
                "end": self.end_ns,
                "kind": self.kind,
                "attributes": dict(self.attributes),
                "error": self.error,
                "events": [list(event) for event in self.events],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Span:
        data = json.loads(text)
        parent = data["parent"]
        return cls(
            name=str(data["name"]),
            trace=int(data["trace"], 16),
            span=int(data["span"], 16),
            parent=None if parent is None else int(parent, 16),
            start_ns=int(data["start"]),
            end_ns=int(data["end"]),
            kind="server" if data.get("kind") == "server" else "internal",
            attributes=dict(data.get("attributes") or {}),
            error=data.get("error"),
            events=tuple((str(n), int(t)) for n, t in data.get("events") or ()),
        )


def nanos(stamp: str | datetime | None, default: int) -> int:
    """An RFC 3339 time (as the API server writes them) in Unix nanoseconds."""
    if stamp is None or stamp == "":
        return default
    when = stamp if isinstance(stamp, datetime) else datetime.fromisoformat(str(stamp))
    return int(when.timestamp() * 1_000_000_000)


SECOND_NS = 1_000_000_000


def created_ns(creation: str | None, asked: str | None, default: int) -> int:
    """When a job was made: ``asked`` (the operator's clock, ns, from the job's
    ``created-ns`` annotation) when it agrees with the API server's ``creation``
    (whole seconds, so within a second of it), else ``creation``; ``default`` if none.

    The annotation is the operator's but anyone who may edit the job may change it: one
    that disagrees with the API server's own time is not believed."""
    created = nanos(creation, default)
    try:
        moment = int(asked or "")
    except ValueError:
        return created
    return moment if creation and abs(moment - created) < SECOND_NS else created


@dataclass(frozen=True)
class JobFacts:
    """What a job's span says, read from its object."""

    namespace: str
    name: str
    chain_id: str
    depth: int
    agent: str
    parent_job: str | None
    created: str | None
    completed: str | None
    phase: str
    reason: str
    exit_code: int | None = None
    attempt: int | None = None
    model: str = ""
    tokens: int | None = None
    cost: float | None = None
    turns: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    started: str | None = None
    """When its pod was first seen running (``status.startTime``); None if it never ran."""
    pod: str | None = None
    asked: str | None = None
    """When the operator asked for it, by its clock (the ``created-ns`` annotation)."""
    ended_ns: int | None = None
    """When the operator recorded its end, by its own clock (``completed`` is when it
    decided it, to the second); None: ``completed`` is all there is."""


_FAILED = frozenset({"Failed"})


def job_span(facts: JobFacts, now_ns: int) -> Span:
    """The span of an ended job: from its creation (when the operator asked for it, by
    its clock, where it made the job; else the API server's timestamp, to the second)
    to the moment the operator recorded its end (its own clock, in nanoseconds, when
    known; else its recorded ``completionTime``, to the second)."""
    end = facts.ended_ns if facts.ended_ns is not None else nanos(facts.completed, now_ns)
    start = min(created_ns(facts.created, facts.asked, end), end)
    attributes: dict[str, AttributeValue] = {
        "agentchain.chain.id": facts.chain_id,
        "agentchain.chain.depth": facts.depth,
        "agentchain.job.namespace": facts.namespace,
        "agentchain.job.name": facts.name,
        "agentchain.job.phase": facts.phase,
        "gen_ai.agent.name": facts.agent,
        "gen_ai.operation.name": "invoke_agent",
    }
    optional: dict[str, AttributeValue | None] = {
        "agentchain.job.reason": facts.reason or None,
        "agentchain.job.parent": facts.parent_job,
        "agentchain.job.exit_code": facts.exit_code,
        "agentchain.job.attempt": facts.attempt,
        "gen_ai.request.model": facts.model or None,
        "agentchain.usage.tokens": facts.tokens,
        "agentchain.usage.cost": facts.cost,
        "agentchain.usage.turns": facts.turns,
        "gen_ai.usage.input_tokens": facts.input_tokens,
        "gen_ai.usage.output_tokens": facts.output_tokens,
    }
    attributes |= {k: v for k, v in optional.items() if v is not None}
    return Span(
        name=f"agentjob {facts.agent}",
        trace=trace_id(facts.chain_id),
        span=job_span_id(facts.namespace, facts.name),
        parent=parent_span_id(facts.chain_id, facts.namespace, facts.parent_job),
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        error=(facts.reason or facts.phase) if facts.phase in _FAILED else None,
    )


def job_part_span_id(namespace: str, name: str, part: str) -> int:
    """The 64-bit id of a part (``waiting``, ``running``) of a job's span."""
    return _digest("agentchain/job-part", namespace, name, part, size=8)


def job_spans(facts: JobFacts, now_ns: int) -> list[Span]:
    """The job's span and, for a job that ran, its two parts under it: ``waiting``
    (creation until its pod ran: dependencies, a slot, an approval, scheduling, the
    image) and ``running`` (its pod running, every attempt, until its end)."""
    job = job_span(facts, now_ns)
    if facts.started is None:
        return [job]
    started = min(max(nanos(facts.started, job.start_ns), job.start_ns), job.end_ns)
    parts = [("waiting", job.start_ns, started, None), ("running", started, job.end_ns, job.error)]
    out = [job]
    for part, start, end, error in parts:
        attributes: dict[str, AttributeValue] = {"agentchain.chain.id": facts.chain_id}
        if part == "running" and facts.pod:
            attributes["agentchain.job.pod"] = facts.pod
        out.append(
            Span(
                name=f"agentjob {facts.agent} {part}",
                trace=job.trace,
                span=job_part_span_id(facts.namespace, facts.name, part),
                parent=job.span,
                start_ns=start,
                end_ns=end,
                attributes=attributes,
                error=error,
            )
        )
    return out


def root_span(
    chain_id: str,
    name: str,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, AttributeValue] | None = None,
    kind: Kind = "server",
) -> Span:
    """The chain's root span: its trigger, ``name`` (``webhook issues.opened``, ...)."""
    return Span(
        name=name,
        trace=trace_id(chain_id),
        span=root_span_id(chain_id),
        parent=None,
        start_ns=start_ns,
        end_ns=max(start_ns, end_ns),
        kind=kind,
        attributes={"agentchain.chain.id": chain_id, **(attributes or {})},
    )


API_JOBS_ROOT = "api POST /api/jobs"
"""The root span's name of a chain the job API started (``POST /api/jobs``)."""
RETRY_ROOT = "command /agentchain retry"
"""The root span's name of a chain a ``/agentchain retry`` comment started."""


def started_root(
    chain_id: str,
    job: str,
    origin: str,
    created_ns: int,
    schedule: str | None = None,
    scheduled_at: str | None = None,
    *,
    retry_of: str | None = None,
    caller: str | None = None,
    end_ns: int | None = None,
) -> Span:
    """The root span of a chain started by something other than a webhook delivery,
    named after what started it: a comment's ``/agentchain retry`` of job ``retry_of``
    (``command /agentchain retry``), the job API (``api POST /api/jobs``, by ``caller``:
    who, never a credential), a scheduled run's tick (``schedule <job>``), else the root
    job ``job``'s creation (``agentjob <job> created``: applied by hand, a lost span).

    The trigger records it itself where it can, with its own clock (the job API); else
    it is written when the root job ends, from the job, at its creation."""
    end = created_ns if end_ns is None else end_ns
    values: dict[str, Any] = {"agentchain.job.name": job}
    if retry_of is not None:
        values |= {"agentchain.command": "retry", "agentchain.command.retry_of": retry_of}
        return root_span(chain_id, RETRY_ROOT, created_ns, end, attributes_of(values))
    if origin == "api":
        values |= {"http.request.method": "POST", "http.route": "/api/jobs"}
        values |= {"agentchain.caller": caller}
        return root_span(chain_id, API_JOBS_ROOT, created_ns, end, attributes_of(values))
    if origin == "schedule":
        values |= {"agentchain.schedule": schedule, "agentchain.scheduled_at": scheduled_at}
        return root_span(chain_id, f"schedule {job}", created_ns, end, attributes_of(values))
    return root_span(chain_id, f"agentjob {job} created", created_ns, end, attributes_of(values))


def attributes_of(values: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """``values`` with only what a span attribute may hold (None and others dropped)."""
    return {k: v for k, v in values.items() if isinstance(v, str | int | float | bool)}


def trace_url(template: str, chain_id: str) -> str | None:
    """The chain's trace in the viewer ``template`` names (``{traceId}``); None if none."""
    if not template or not chain_id:
        return None
    return template.replace("{traceId}", f"{trace_id(chain_id):032x}")


def exemplar(chain_id: str) -> dict[str, str]:
    """A metric sample's exemplar pointing at chain ``chain_id``'s trace (OpenMetrics)."""
    return {"trace_id": f"{trace_id(chain_id):032x}"}
