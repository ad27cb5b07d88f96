"""``agentchain mcp``'s tool calls as spans under the job's span.

The operator gives an agent's pod its job's ``TRACEPARENT`` and, when it exports traces,
the OTLP endpoint (``traces/rules/spans.agent_env``); the CLI passes both on to this
server.  With both, every tool call is a CLIENT span (``execute_tool <tool>``, the GenAI
semantic conventions' name) under the job's span, exported by OpenTelemetry's SDK from
this process.  With either missing, the tracer is the API's no-op one: nothing is built,
nothing is sent.

A tool call never waits for the collector: the batch processor only queues a finished
span, and a background thread exports.  What is queued is sent when the server stops,
whether its client closed stdin or it was sent SIGTERM (``mcpserving.serve``); only a
SIGKILL loses the last few spans.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from agentchain.traces.rules import spans

SERVICE = "agentchain-mcp"
SCOPE = "agentchain.mcp"


class ToolTracing:
    """A tracer for the tool calls, and how to flush it when the server stops."""

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        processor: Callable[[], SpanProcessor] | None = None,
    ) -> None:
        parent = spans.parse_traceparent(environ.get(spans.TRACEPARENT_ENV, ""))
        self._provider: TracerProvider | None = None
        self._parent: Context | None = None
        self.attributes: dict[str, str] = {
            "agentchain.job.name": environ.get("AGENT_JOB", ""),
            "agentchain.job.namespace": environ.get("AGENT_NAMESPACE", ""),
            "agentchain.chain.id": environ.get("AGENT_CHAIN_ID", ""),
        }
        if parent is None or (processor is None and not spans.configured(environ)):
            self.tracer: trace.Tracer = trace.NoOpTracer()
            return
        name = environ.get("OTEL_SERVICE_NAME", "").strip() or SERVICE
        self._provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
        self._provider.add_span_processor((processor or _batch)())
        self.tracer = self._provider.get_tracer(SCOPE)
        job = SpanContext(*parent, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        self._parent = trace.set_span_in_context(NonRecordingSpan(job))

    @property
    def enabled(self) -> bool:
        return self._provider is not None

    async def call(self, tool: str, run: Callable[[], Awaitable[Any]]) -> Any:
        """Run one tool call in its span; an exception (a refusal) marks it failed."""
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            **self.attributes,
        }
        with self.tracer.start_as_current_span(
            f"execute_tool {tool}",
            context=self._parent,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return await run()
            except Exception as exc:
                # A refusal's text is the job API's answer, as the model reads it.
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                span.set_attribute("error.type", type(exc).__name__)
                raise

    def shutdown(self) -> None:
        """Send what is queued and stop (bounded by the exporter's own timeout)."""
        if self._provider is not None:
            self._provider.shutdown()


def _batch() -> SpanProcessor:
    # Imported here: the HTTP exporter (and requests) load only when tracing is on.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter: SpanExporter = OTLPSpanExporter()
    return BatchSpanProcessor(exporter)
