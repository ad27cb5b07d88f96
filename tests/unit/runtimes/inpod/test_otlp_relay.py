"""The runner's OTLP traces relay (``runtimes/inpod/otlprelay.py``), over real sockets.

Aspects covered:
- an export request (plain or gzip; protobuf, or OTLP's JSON as Gemini CLI sends it,
  forwarded as protobuf) is forwarded, its spans adopted into the job's trace
  with its roots under the job's span, to the pod's traces endpoint with the pod's OTLP
  headers; the CLI gets the collector's status;
- a collector that cannot be reached is a 502; an unreadable body a 400, another content
  type a 415, an oversized one a 413, another path a 404, none of them forwarded; logs
  and metrics (Gemini CLI sends them to the same endpoint) are answered 200 and sent
  nowhere;
- the GenAI content attributes are removed from what is forwarded unless the agent
  opted in;
- the relay needs the job's ``TRACEPARENT``; stopped, it no longer listens;
- the runner starts one for codex and Gemini CLI only, and a relay that cannot start (a
  missing CA file) is a warning, not a failed run.
"""

from __future__ import annotations

import gzip
import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentchain.runtimes.inpod import otlprelay, runner
from agentchain.traces.rules import spans

TRACE, JOB_SPAN = spans.trace_id("chain-1"), spans.job_span_id("team-a", "coder-1")


class Upstream:
    """A collector's OTLP/HTTP receiver, as far as the relay sees one: what it received."""

    def __init__(self, status: int = 200) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                upstream.received.append((self.path, headers, body))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    running = Upstream()
    yield running
    running.server.shutdown()
    running.server.server_close()


def _pod(endpoint: str, **more: str) -> dict[str, str]:
    return {
        "TRACEPARENT": spans.traceparent(TRACE, JOB_SPAN),
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        **more,
    }


@pytest.fixture
def relay(upstream: Upstream) -> Iterator[otlprelay.Relay]:
    headers = "x-api-key=s%3Dcret, tenant = a"
    running = otlprelay.Relay(_pod(upstream.endpoint, OTEL_EXPORTER_OTLP_HEADERS=headers))
    yield running
    running.stop()


def _export() -> bytes:
    """What codex sends: a root of a trace of its own with a child."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    scope.spans.add(trace_id=b"\x01" * 16, span_id=b"r" * 8, name="session_loop")
    scope.spans.add(trace_id=b"\x01" * 16, span_id=b"c" * 8, parent_span_id=b"r" * 8)
    data: bytes = request.SerializeToString()
    return data


def _post(
    url: str, body: bytes, content_type: str = "application/x-protobuf", **headers: str
) -> int:
    sent = urllib.request.Request(
        f"{url}/v1/traces", body, {"Content-Type": content_type, **headers}, method="POST"
    )
    try:
        with urllib.request.urlopen(sent, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.parametrize("zipped", [False, True])
def test_spans_are_adopted_and_forwarded_with_the_pods_headers(
    upstream: Upstream, relay: otlprelay.Relay, zipped: bool
) -> None:
    body = gzip.compress(_export()) if zipped else _export()
    encoding = {"Content-Encoding": "gzip"} if zipped else {}
    assert _post(relay.url, body, **encoding) == 200
    [(path, headers, forwarded)] = upstream.received
    assert path == "/v1/traces"
    assert headers["x-api-key"] == "s=cret" and headers["tenant"] == "a"
    request = ExportTraceServiceRequest()
    request.ParseFromString(forwarded)
    got = [(s.trace_id, s.parent_span_id) for s in request.resource_spans[0].scope_spans[0].spans]
    trace = TRACE.to_bytes(16, "big")
    assert got == [(trace, JOB_SPAN.to_bytes(8, "big")), (trace, b"r" * 8)]
    assert relay.adopted == 2


def test_refusals_go_no_further(upstream: Upstream, relay: otlprelay.Relay) -> None:
    assert _post(relay.url, b"\xff\xff not protobuf") == 400
    assert _post(relay.url, b"{}", "text/plain") == 415
    assert _post(relay.url, b'{"resourceSpans": 3}', "application/json") == 400
    assert (
        _post(
            relay.url,
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "zz"}]}]}]}',
            "application/json",
        )
        == 400
    )
    assert _post(relay.url, gzip.compress(b"x"), **{"Content-Encoding": "gzip"}) == 400
    # Refused on its announced length, before a byte of it is read.
    port = int(relay.url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.putrequest("POST", "/v1/traces")
    connection.putheader("Content-Type", "application/x-protobuf")
    connection.putheader("Content-Length", str(otlprelay.MAX_BODY_BYTES + 1))
    connection.endheaders()
    assert connection.getresponse().status == 413
    connection.close()
    elsewhere = urllib.request.Request(f"{relay.url}/v1/profiles", b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(elsewhere, timeout=10)
    assert refused.value.code == 404
    assert upstream.received == []


def test_otlp_json_is_adopted_and_forwarded_as_protobuf(
    upstream: Upstream, relay: otlprelay.Relay
) -> None:
    # As Gemini CLI sends it: OTLP's JSON, ids in hex, a root of a trace of its own.
    span = {"traceId": "01" * 16, "spanId": "72" * 8, "name": "llm_call", "kind": 1}
    span["attributes"] = [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "3"}}]
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    sent = urllib.request.Request(
        f"{relay.url}/v1/traces", body, {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(sent, timeout=10) as answer:
        assert (answer.status, json.loads(answer.read())) == (200, {})
    [(path, headers, forwarded)] = upstream.received
    assert (path, headers["content-type"]) == ("/v1/traces", "application/x-protobuf")
    request = ExportTraceServiceRequest()
    request.ParseFromString(forwarded)
    (got,) = request.resource_spans[0].scope_spans[0].spans
    assert (got.trace_id, got.span_id) == (TRACE.to_bytes(16, "big"), b"r" * 8)
    assert got.parent_span_id == JOB_SPAN.to_bytes(8, "big") and got.name == "llm_call"
    assert got.attributes[0].value.int_value == 3


def _chunked_post(url: str, chunks: list[bytes]) -> int:
    """POST ``chunks`` with no length, as Node's exporters do; the answer's status."""
    port = int(url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("POST", "/v1/traces")
        connection.putheader("Content-Type", "application/x-protobuf")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders()
        for chunk in chunks:
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        connection.send(b"0\r\n\r\n")
        return connection.getresponse().status
    except (ConnectionError, http.client.HTTPException):
        return 0  # Answered and closed before the rest was sent.
    finally:
        connection.close()


def test_a_chunked_body_is_read_whole_and_bounded(
    upstream: Upstream, relay: otlprelay.Relay
) -> None:
    body = _export()
    assert _chunked_post(relay.url, [body[:7], body[7:]]) == 200
    [(_, _, forwarded)] = upstream.received
    request = ExportTraceServiceRequest()
    request.ParseFromString(forwarded)
    assert len(request.resource_spans[0].scope_spans[0].spans) == 2
    too_big = [b"x" * (otlprelay.MAX_BODY_BYTES // 2 + 1)] * 2
    assert _chunked_post(relay.url, too_big) in (413, 0)
    assert len(upstream.received) == 1  # The oversized one went no further.


def test_logs_and_metrics_are_answered_and_sent_nowhere(
    upstream: Upstream, relay: otlprelay.Relay
) -> None:
    for signal in ("logs", "metrics"):
        sent = urllib.request.Request(
            f"{relay.url}/v1/{signal}",
            b"\x0a\x00",
            {"Content-Type": "application/x-protobuf"},
            method="POST",
        )
        with urllib.request.urlopen(sent, timeout=10) as answer:
            assert answer.status == 200
    assert upstream.received == []


def test_the_content_attributes_are_removed_unless_the_agent_opted_in(upstream: Upstream) -> None:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(span_id=b"s" * 8)
    span.attributes.add(key="gen_ai.system_instructions").value.string_value = "GEMINI.md"
    span.attributes.add(key="gen_ai.usage.input_tokens").value.int_value = 3
    for opted, kept in (
        ({}, ["gen_ai.usage.input_tokens"]),
        ({"OTEL_LOG_USER_PROMPTS": "1"}, None),
    ):
        running = otlprelay.Relay(_pod(upstream.endpoint, **opted))
        try:
            assert _post(running.url, request.SerializeToString()) == 200
        finally:
            running.stop()
        forwarded = ExportTraceServiceRequest()
        forwarded.ParseFromString(upstream.received.pop()[2])
        keys = [a.key for a in forwarded.resource_spans[0].scope_spans[0].spans[0].attributes]
        assert keys == (kept or ["gen_ai.system_instructions", "gen_ai.usage.input_tokens"])


def test_an_unreachable_collector_is_a_502_and_a_collector_error_its_own() -> None:
    gone = otlprelay.Relay(_pod("http://127.0.0.1:9"))
    try:
        assert _post(gone.url, _export()) == 502
    finally:
        gone.stop()
    failing = Upstream(status=503)
    relay = otlprelay.Relay(_pod(failing.endpoint))
    try:
        assert _post(relay.url, _export()) == 503
    finally:
        relay.stop()
        failing.server.shutdown()


def test_the_relay_needs_the_jobs_traceparent_and_stops() -> None:
    with pytest.raises(ValueError, match="TRACEPARENT"):
        otlprelay.Relay({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    relay = otlprelay.Relay(_pod("http://127.0.0.1:9"))
    relay.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{relay.url}/v1/traces", b"", timeout=2)


def test_a_relay_that_cannot_start_leaves_the_run_alone(capsys: pytest.CaptureFixture[str]) -> None:
    pod = _pod("http://127.0.0.1:9", OTEL_EXPORTER_OTLP_CERTIFICATE="/nonexistent/ca.pem")
    assert runner._relay("codex", pod) is None
    assert "[runner] warning: no trace relay" in capsys.readouterr().err
    assert runner._relay("claude-code", _pod("http://127.0.0.1:9")) is None  # Not relayed.
    assert runner._relay("opencode", _pod("http://127.0.0.1:9")) is None
    relay = runner._relay("codex", _pod("http://127.0.0.1:9"))
    assert relay is not None
    relay.stop()
