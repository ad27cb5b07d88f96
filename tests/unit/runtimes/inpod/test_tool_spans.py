"""``agentchain mcp``'s tool calls as spans (``runtimes/inpod/toolspans.py``).

Aspects covered:
- with the job's ``TRACEPARENT``, a tool call is one CLIENT span ``execute_tool <tool>``
  under the job's span, in the chain's trace, with the tool, job and chain as attributes
  (the SDK's in-memory exporter);
- a refused call's span is an error, and the refusal still reaches the caller;
- without ``TRACEPARENT`` or without an OTLP endpoint, nothing is built: the tracer is the
  no-op one; a malformed ``TRACEPARENT`` is ignored the same way;
- a tool call does not wait for a collector that hangs, and what was queued is sent when
  the server shuts down;
- the real server over the MCP SDK's stdio client, exporting over OTLP/HTTP to a receiver
  in the test: the span of a real tool call arrives under the job's span when the client
  closes, and when the server is sent SIGTERM instead (at once, stdin still open: the
  server then ends);
- the agent's MCP configuration passes the trace variables on to ``agentchain mcp``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from e2e import mcpclient
from e2e.mcpclient import ok
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, SpanKind, StatusCode

from agentchain.core.runtime import Runtime
from agentchain.runtimes.inpod import toolcalls
from agentchain.runtimes.inpod.toolspans import ToolTracing
from agentchain.runtimes.rules import runtimecontainers
from agentchain.traces.rules import spans
from tests.unit.web.conftest import Client as HttpClient

NAMESPACE, JOB, CHAIN = "team-a", "ai-coder-1", "chain-1"
TRACE, JOB_SPAN = spans.trace_id(CHAIN), spans.job_span_id(NAMESPACE, JOB)
POD = {
    "AGENT_NAMESPACE": NAMESPACE,
    "AGENT_JOB": JOB,
    "AGENT_CHAIN_ID": CHAIN,
    "TRACEPARENT": spans.traceparent(TRACE, JOB_SPAN),
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
}


async def _answer() -> dict[str, str]:
    return {"value": "v"}


async def _refuse() -> dict[str, str]:
    raise toolcalls.Refused("entry not found (HTTP 404)", 404)


async def test_a_tool_call_is_a_client_span_under_the_jobs_span() -> None:
    memory = InMemorySpanExporter()
    tracing = ToolTracing(POD, processor=lambda: SimpleSpanProcessor(memory))
    assert tracing.enabled
    assert await tracing.call("store_get", _answer) == {"value": "v"}
    (span,) = memory.get_finished_spans()
    assert span.name == "execute_tool store_get" and span.kind is SpanKind.CLIENT
    assert span.context is not None and span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (TRACE, JOB_SPAN)
    assert span.parent.is_remote
    assert span.attributes is not None
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "store_get",
        "agentchain.job.name": JOB,
        "agentchain.job.namespace": NAMESPACE,
        "agentchain.chain.id": CHAIN,
    }
    assert span.status.status_code is StatusCode.UNSET


async def test_a_refused_call_is_a_failed_span() -> None:
    memory = InMemorySpanExporter()
    tracing = ToolTracing(POD, processor=lambda: SimpleSpanProcessor(memory))
    with pytest.raises(toolcalls.Refused):
        await tracing.call("store_get", _refuse)
    (span,) = memory.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "entry not found (HTTP 404)"
    assert span.attributes is not None and span.attributes["error.type"] == "Refused"


@pytest.mark.parametrize(
    "drop, extra",
    [
        ("TRACEPARENT", {}),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", {}),
        ("", {"OTEL_SDK_DISABLED": "true"}),
        ("", {"TRACEPARENT": "00-not-a-traceparent-01"}),
        ("", {"TRACEPARENT": spans.traceparent(TRACE, JOB_SPAN).replace("00-", "ff-", 1)}),
    ],
)
async def test_without_a_trace_context_or_endpoint_nothing_is_built(
    drop: str, extra: dict[str, str]
) -> None:
    env = {k: v for k, v in POD.items() if k != drop} | extra
    tracing = ToolTracing(env)
    assert not tracing.enabled and isinstance(tracing.tracer, NoOpTracer)
    assert await tracing.call("store_get", _answer) == {"value": "v"}
    tracing.shutdown()


def test_a_traceparent_is_read_as_w3c_writes_it() -> None:
    assert spans.parse_traceparent(spans.traceparent(TRACE, JOB_SPAN)) == (TRACE, JOB_SPAN)
    assert spans.parse_traceparent(f"00-{'0' * 32}-{JOB_SPAN:016x}-01") is None
    assert spans.parse_traceparent(f"00-{TRACE:032x}-{JOB_SPAN:016x}-01-more") is None
    assert spans.parse_traceparent(f"00-{TRACE:032x}-{'g' * 16}-01") is None


class Hanging(InMemorySpanExporter):
    """A collector that takes its time: every export waits a second."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        time.sleep(1.0)
        return super().export(spans)


async def test_a_call_never_waits_for_the_collector_and_stopping_sends_the_rest() -> None:
    hanging = Hanging()
    tracing = ToolTracing(
        POD, processor=lambda: BatchSpanProcessor(hanging, schedule_delay_millis=1)
    )
    started = time.monotonic()
    for _ in range(3):
        await tracing.call("store_get", _answer)
        await asyncio.sleep(0.05)  # The worker is inside the hanging export by now.
    assert time.monotonic() - started < 0.6
    assert len(hanging.get_finished_spans()) < 3
    await asyncio.to_thread(tracing.shutdown)
    assert len(hanging.get_finished_spans()) == 3


class Receiver:
    """An OTLP/HTTP traces endpoint: keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, bytes, bytes, int]] = []
        received = self.spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        received.extend(
                            (s.name, s.trace_id, s.parent_span_id, s.kind) for s in scope.spans
                        )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()
                self.wfile.write(b"")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.server.shutdown()


@pytest.fixture
async def token(runtime: Runtime) -> str:
    return await runtime.tokens.issue(NAMESPACE, JOB, "uid-1", CHAIN, 600)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (not gone, nor a zombie waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _servers_of(parent: int) -> list[int]:
    """The ``agentchain mcp`` processes ``parent`` started."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == parent and b"agentchain\0mcp" in cmdline:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.redis
@pytest.mark.parametrize("stop", ["close", "sigterm"])
async def test_the_real_servers_tool_call_reaches_the_collector(
    client: HttpClient, token: str, receiver: Receiver, stop: str
) -> None:
    api = str(client.make_url("")).rstrip("/")
    env = mcpclient.pod_env(api, token, NAMESPACE, JOB, CHAIN) | {
        "TRACEPARENT": POD["TRACEPARENT"],
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        # Long: only the stop can send the span in time.
        "OTEL_BSP_SCHEDULE_DELAY": "600000",
    }
    async with mcpclient.server(env) as tools:
        await ok(tools, "store_set_and_extend", namespace="n", key="k", value="v")
        assert receiver.spans == []
        if stop == "sigterm":
            (pid,) = _servers_of(os.getpid())
            os.kill(pid, signal.SIGTERM)
            # On the signal alone, while the client still holds stdin open: the span is
            # sent and the server ends.
            deadline = time.monotonic() + 10
            while (not receiver.spans or _alive(pid)) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert receiver.spans and not _alive(pid), "SIGTERM did not send and end"
    deadline = time.monotonic() + 20
    while not receiver.spans and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert receiver.spans == [
        (
            "execute_tool store_set_and_extend",
            TRACE.to_bytes(16, "big"),
            JOB_SPAN.to_bytes(8, "big"),
            3,  # SPAN_KIND_CLIENT
        )
    ]


def test_the_agents_mcp_configuration_passes_the_trace_on() -> None:
    assert set(spans.AGENT_ENV_NAMES) <= set(runtimecontainers.MCP_JOB_ENV)
    pod = spans.agent_env(CHAIN, NAMESPACE, JOB, "http://collector:4318")
    assert set(pod) <= set(runtimecontainers.MCP_JOB_ENV)
