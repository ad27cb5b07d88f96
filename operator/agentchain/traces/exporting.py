"""Export: the leader drains the outbox to the OTLP endpoint the ``OTEL_*`` variables name.

Configured by OpenTelemetry's own variables, read by its SDK's OTLP/HTTP exporter
(``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, headers,
timeout, certificates; ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` for the
resource).  With neither endpoint set, or ``OTEL_TRACES_EXPORTER=none`` or
``OTEL_SDK_DISABLED=true``, tracing is off: nothing is recorded and no exporter is built,
so the operator opens no connection for it.

The SDK's exporter is synchronous and retries with backoff up to its timeout, so it runs
in a worker thread, off the event loop; a hop only appends to the outbox.  Spans leave
the outbox only once the collector accepted them: a collector that is down delays them,
it does not lose them (up to the outbox's bound).  One exporter sends at a time, by a
lease in Redis (``traces/outbox``): an old leader that runs on a moment during a
failover sends nothing the new one sends.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from redis.exceptions import RedisError

from agentchain.traces.outbox import Outbox
from agentchain.traces.rules import spans
from agentchain.traces.rules.spans import Span

log = logging.getLogger(__name__)

BATCH = 256
IDLE_SECONDS = 1.0
SCOPE = InstrumentationScope("agentchain")


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces to be exported."""
    return spans.configured(os.environ if environ is None else environ)


def agent_endpoint(environ: Mapping[str, str] | None = None) -> str:
    """The OTLP endpoint an agent's pod is given: the operator's own base endpoint
    (an agent's CLI appends its signal's path to it)."""
    env = os.environ if environ is None else environ
    return env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() if configured(env) else ""


def readable(span: Span, resource: Resource) -> ReadableSpan:
    """``span`` as the SDK's exporters take it, with the ids and times it records."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    parent = None
    if span.parent is not None:
        parent = SpanContext(span.trace, span.parent, is_remote=False, trace_flags=flags)
    status = Status(StatusCode.ERROR, span.error) if span.error else Status(StatusCode.UNSET)
    return ReadableSpan(
        name=span.name,
        context=SpanContext(span.trace, span.span, is_remote=False, trace_flags=flags),
        parent=parent,
        resource=resource,
        attributes=dict(span.attributes),
        kind=SpanKind.SERVER if span.kind == "server" else SpanKind.INTERNAL,
        status=status,
        start_time=span.start_ns,
        end_time=span.end_ns,
        events=[Event(name, timestamp=at) for name, at in span.events],
        instrumentation_scope=SCOPE,
    )


def _exporter() -> SpanExporter:
    # Imported here: the HTTP exporter (and requests) load only when tracing is on.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _resource() -> Resource:
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES itself.
    return Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME", spans.SERVICE_NAME)})


async def keep_exporting(outbox: Outbox, exporter: SpanExporter | None = None) -> None:
    """Export the outbox's spans, oldest first, until cancelled."""
    exporter = exporter or _exporter()
    resource = _resource()
    try:
        while True:
            try:
                more = await export_some(outbox, exporter, resource)
            except RedisError as exc:  # Redis away a moment must not end the exporter.
                log.warning("trace outbox unavailable: %s", exc)
                more = False
            if not more:
                await asyncio.sleep(IDLE_SECONDS)
    finally:
        await _stop(outbox, exporter)


async def _stop(outbox: Outbox, exporter: SpanExporter) -> None:
    try:
        await outbox.release()  # The next leader's exporter starts at once, not in 20 s.
    except RedisError as exc:
        log.warning("trace exporter lease not released: %s", exc)
    await asyncio.to_thread(exporter.shutdown)


async def export_some(outbox: Outbox, exporter: SpanExporter, resource: Resource) -> bool:
    """Send one batch; True if one was sent (more may wait).  Nothing while another
    exporter holds the lease (``traces/outbox``)."""
    batch = await outbox.claim(BATCH)
    if not batch:
        return False
    result = await asyncio.to_thread(_export, exporter, [readable(s, resource) for s in batch])
    if result is not SpanExportResult.SUCCESS:
        log.warning("trace export failed; %d span(s) wait", await outbox.waiting())
        return False
    if not await outbox.sent():
        log.warning("trace exporter lease lost while sending; the next holder resends")
        return False
    return True


def _export(exporter: SpanExporter, batch: Sequence[ReadableSpan]) -> SpanExportResult:
    try:
        return exporter.export(batch)
    except Exception:  # The SDK's exporters log and return FAILURE; a bug must not end us.
        log.exception("trace exporter raised")
        return SpanExportResult.FAILURE
