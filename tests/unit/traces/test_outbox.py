"""The outbox and its export (``traces/outbox``, ``traces/exporting``), on a real Redis.

Aspects covered:
- a span is recorded once: a replay that records it again adds nothing;
- spans leave the outbox only once the exporter accepted them, oldest first; a failed
  export keeps them;
- the outbox is bounded: past its bound the oldest go;
- two exporters at once (an old leader running on during a failover) send every span
  once and lose none: one holds the lease, the other sends nothing;
- a batch taken by an exporter that died before the collector accepted it is sent by the
  next one, once the dead one's lease lapsed, before any newer span; one that lost its
  lease while sending leaves the new holder's batch alone; a clean stop hands the lease
  over at once;
- with the ``OTEL_*`` variables naming no endpoint (or saying none), tracing is off:
  nothing is recorded and a pod gets no trace variables;
- a span reaches an exporter as the SDK's span with the ids, parent, times, status
  and attributes it was recorded with (the SDK's own in-memory exporter).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from redis.asyncio import Redis

from agentchain.store import keys
from agentchain.traces import exporting
from agentchain.traces.outbox import Outbox
from agentchain.traces.recording import Traces
from agentchain.traces.rules import spans, steps

pytestmark = pytest.mark.redis
RESOURCE = Resource.create({"service.name": "agentchain"})


def _span(n: int, chain: str = "c1") -> spans.Span:
    return spans.root_span(chain, f"span {n}", n, n + 1)


def _job_span() -> spans.Span:
    facts = spans.JobFacts(
        namespace="ns",
        name="dev-1",
        chain_id="c1",
        depth=1,
        agent="developer",
        parent_job="triage-1",
        created="2026-11-27T10:00:00Z",
        completed="2026-11-27T10:00:01Z",
        phase="Failed",
        reason="ContainerFailed",
        exit_code=3,
    )
    return spans.job_span(facts, now_ns=0)


class Refusing(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.FAILURE


async def test_a_span_is_recorded_once(redis: Redis) -> None:
    outbox = Outbox(redis)
    assert await outbox.record(_job_span()) is True
    assert await outbox.record(_job_span()) is False  # A replay of the same hop.
    assert await outbox.waiting() == 1


async def test_spans_leave_only_once_exported(redis: Redis) -> None:
    outbox = Outbox(redis)
    for n in range(3):
        await outbox.record(_span(n, chain=f"c{n}"))
    assert not await exporting.export_some(outbox, Refusing(), RESOURCE)
    assert await outbox.waiting() == 3
    memory = InMemorySpanExporter()
    assert await exporting.export_some(outbox, memory, RESOURCE)
    assert [s.name for s in memory.get_finished_spans()] == ["span 0", "span 1", "span 2"]
    assert await outbox.waiting() == 0
    assert not await exporting.export_some(outbox, memory, RESOURCE)


async def test_the_outbox_is_bounded(redis: Redis) -> None:
    outbox = Outbox(redis, max_spans=2)
    for n in range(4):
        await outbox.record(_span(n, chain=f"c{n}"))
    assert [s.name for s in await outbox.head(10)] == ["span 2", "span 3"]


async def test_tracing_is_off_without_an_endpoint(redis: Redis) -> None:
    assert not exporting.configured({})
    assert not exporting.configured({"OTEL_EXPORTER_OTLP_ENDPOINT": ""})
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert exporting.configured(on)
    assert exporting.configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert not exporting.configured(on | {"OTEL_TRACES_EXPORTER": "none"})
    assert not exporting.configured(on | {"OTEL_SDK_DISABLED": "true"})
    off = Traces(redis, enabled=False)
    await off.record(_job_span())
    assert await redis.exists(keys.TRACE_OUTBOX) == 0
    assert off.agent_env("c1", "ns", "dev-1") == {}
    assert off.exemplar("c1") is None  # No trace to point a metric sample at.
    on_ = Traces(redis, enabled=True)
    assert on_.exemplar("c1") == {"trace_id": f"{spans.trace_id('c1'):032x}"}
    assert on_.exemplar(None) is None


async def test_an_exported_span_is_the_one_recorded(redis: Redis) -> None:
    outbox = Outbox(redis)
    recorded = _job_span()
    await outbox.record(recorded)
    memory = InMemorySpanExporter()
    await exporting.export_some(outbox, memory, RESOURCE)
    (sent,) = memory.get_finished_spans()
    assert sent.context is not None and sent.parent is not None
    assert sent.context.trace_id == recorded.trace == spans.trace_id("c1")
    assert sent.context.span_id == spans.job_span_id("ns", "dev-1")
    assert sent.parent.span_id == spans.job_span_id("ns", "triage-1")
    assert (sent.start_time, sent.end_time) == (recorded.start_ns, recorded.end_ns)
    assert sent.status.status_code is StatusCode.ERROR
    assert sent.status.description == "ContainerFailed"
    assert sent.attributes is not None and sent.attributes["agentchain.job.exit_code"] == 3


async def test_an_attempts_pod_moments_are_exported_as_its_events(redis: Redis) -> None:
    outbox = Outbox(redis)
    moments = steps.PodMoments("2026-11-27T10:00:01Z", None, "2026-11-27T10:00:02Z", None)
    facts = steps.AttemptFacts(1, "dev-1-x", 0, "Succeeded", False, moments)
    job = steps.JobRef("ns", "dev-1", "c1", "developer")
    await outbox.record(steps.attempt_span(job, facts, observed_ns=3_000_000_000_000_000_000))
    memory = InMemorySpanExporter()
    await exporting.export_some(outbox, memory, RESOURCE)
    (sent,) = memory.get_finished_spans()
    assert [(e.name, e.timestamp) for e in sent.events] == [
        ("pod.running", spans.nanos("2026-11-27T10:00:02Z", 0))
    ]


class Slow(InMemorySpanExporter):
    """Holds each export until a second one began, or a moment passed: so two exporters
    that both send are both inside ``export`` at once."""

    def __init__(self, inside: threading.Semaphore) -> None:
        super().__init__()
        self._inside = inside

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._inside.release()
        self._inside.acquire(timeout=0.5)
        return super().export(spans)


async def test_two_exporters_at_once_send_each_span_once(redis: Redis) -> None:
    old, new = Outbox(redis), Outbox(redis)
    for n in range(5):
        await old.record(_span(n, chain=f"c{n}"))
    inside = threading.Semaphore(0)
    exporters = [Slow(inside), Slow(inside)]
    await asyncio.gather(
        exporting.export_some(old, exporters[0], RESOURCE),
        exporting.export_some(new, exporters[1], RESOURCE),
    )
    while await exporting.export_some(old, exporters[0], RESOURCE):
        pass
    sent = [s.name for e in exporters for s in e.get_finished_spans()]
    assert sorted(sent) == [f"span {n}" for n in range(5)]
    assert await old.waiting() == 0


async def test_a_dead_exporters_batch_is_sent_next(redis: Redis) -> None:
    dead, heir = Outbox(redis, lease_ms=300), Outbox(redis)
    for n in range(2):
        await dead.record(_span(n, chain=f"c{n}"))
    assert [s.name for s in await dead.claim(10) or []] == ["span 0", "span 1"]
    await dead.record(_span(2, chain="c2"))  # Recorded after; goes out after.
    memory = InMemorySpanExporter()
    assert not await exporting.export_some(heir, memory, RESOURCE)  # Held: not yet.
    await asyncio.sleep(0.4)
    while await exporting.export_some(heir, memory, RESOURCE):
        pass
    assert [s.name for s in memory.get_finished_spans()] == ["span 0", "span 1", "span 2"]
    assert await dead.sent() is False  # Woken: its batch is no longer its to remove.
    assert await heir.waiting() == 0


async def test_a_lost_lease_leaves_the_new_holders_batch(redis: Redis) -> None:
    old, new = Outbox(redis, lease_ms=200), Outbox(redis)
    await old.record(_span(0))
    assert await old.claim(10)
    await asyncio.sleep(0.3)
    claimed = await new.claim(10)
    assert claimed is not None and [s.name for s in claimed] == ["span 0"]
    assert await old.claim(10) is None and await old.sent() is False
    assert await new.waiting() == 1  # Still the new holder's to send.
    assert await new.sent() is True and await new.waiting() == 0


async def test_a_clean_stop_hands_the_lease_over(redis: Redis) -> None:
    first, second = Outbox(redis), Outbox(redis)
    await first.record(_span(0))
    failing = exporting.export_some(first, Refusing(), RESOURCE)
    assert not await failing
    assert await second.claim(10) is None
    await first.release()
    claimed = await second.claim(10)
    assert claimed is not None and [s.name for s in claimed] == ["span 0"]
