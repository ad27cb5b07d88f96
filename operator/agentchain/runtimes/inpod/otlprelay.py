"""A local OTLP/HTTP traces relay: a CLI's spans, adopted into its job's trace, forwarded.

Some CLIs start part of their spans in traces of their own instead of under
``TRACEPARENT`` (``runtimes/rules/clitelemetry``: codex, Gemini CLI).  The runner then points the
CLI's trace export at this relay, on 127.0.0.1 and a free port, for the CLI's run only.
Each ``POST /v1/traces`` (OTLP protobuf or JSON, gzip or not) is parsed with OpenTelemetry's own
protocol types, every span is moved into the job's trace with its roots under the job's
span (``clitelemetry.adopt``), the GenAI content attributes are removed unless the agent
opted in (``clitelemetry.redact``), and the request is forwarded to the pod's OTLP traces
endpoint with the pod's OTLP headers; the CLI gets the collector's answer.  Logs and
metrics posted here (Gemini CLI sends every signal to one endpoint) are read, answered
200 and sent nowhere.

A request is forwarded before it is answered, so everything the CLI exported before it
ended has left the pod when the runner stops the relay.  A body over ``MAX_BODY_BYTES``,
another content type or an unreadable message is refused (413, 415, 400) and goes no
further; a collector that cannot be reached is a 502 to the CLI, whose exporter logs it.
Nothing is kept: the relay holds one request at a time, per connection.
"""

from __future__ import annotations

import gzip
import http.server
import io
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentchain.runtimes.rules import clitelemetry
from agentchain.traces.rules import spans

MAX_BODY_BYTES = 16 * 1024 * 1024
FORWARD_TIMEOUT_SECONDS = 10.0
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
DROPPED_PATHS = frozenset({"/v1/logs", "/v1/metrics"})
"""What a CLI that exports every signal to one endpoint (Gemini CLI) also sends here:
answered, and dropped (``clitelemetry``: only traces are turned on)."""


def otlp_headers(env: Mapping[str, str]) -> dict[str, str]:
    """The headers the OTLP exporters send (``OTEL_EXPORTER_OTLP_HEADERS``, then the
    traces ones): ``key=value`` pairs, comma-separated, values percent-decoded."""
    headers: dict[str, str] = {}
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        for pair in env.get(name, "").split(","):
            key, sep, value = pair.partition("=")
            if sep and key.strip():
                headers[key.strip()] = urllib.parse.unquote(value.strip())
    return headers


class Relay:
    """The relay for one CLI run: ``url`` to export to, ``stop()`` at the run's end."""

    def __init__(self, env: Mapping[str, str]) -> None:
        parent = spans.parse_traceparent(env.get(spans.TRACEPARENT_ENV, ""))
        if parent is None:
            raise ValueError("the relay needs the job's TRACEPARENT")
        self.trace, self.job_span = parent
        self.upstream = clitelemetry.traces_endpoint(env)
        self.headers = {**otlp_headers(env), "Content-Type": PROTOBUF}
        certificate = (
            env.get("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
            or env.get("OTEL_EXPORTER_OTLP_CERTIFICATE")
            or None
        )
        self.tls = ssl.create_default_context(cafile=certificate)
        self.redacting = not clitelemetry.content_opted_in(env)
        self.adopted = 0
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def forward(self, body: bytes, as_json: bool = False) -> tuple[int, bytes]:
        """Adopt and forward one export request (protobuf, or OTLP's JSON): the
        collector's status and answer (sent on as protobuf either way)."""
        if as_json:
            request = clitelemetry.from_json(body)
        else:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
        self.adopted += clitelemetry.adopt(request, self.trace, self.job_span)
        if self.redacting:
            clitelemetry.redact(request)
        sent = urllib.request.Request(
            self.upstream, data=request.SerializeToString(), headers=self.headers, method="POST"
        )
        try:
            with urllib.request.urlopen(
                sent, timeout=FORWARD_TIMEOUT_SECONDS, context=self.tls
            ) as answer:
                return answer.status, answer.read(MAX_BODY_BYTES)
        except urllib.error.HTTPError as error:
            return error.code, error.read(MAX_BODY_BYTES)
        except OSError:
            return 502, b""

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _content_type(request: http.server.BaseHTTPRequestHandler) -> str:
    return request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()


def _body(request: http.server.BaseHTTPRequestHandler) -> bytes | int:
    """``request``'s body, or the status refusing it (before reading an oversized one)."""
    if _content_type(request) not in (PROTOBUF, JSON):
        return 415
    if request.headers.get("Transfer-Encoding", "").strip().lower() == "chunked":
        return _chunked(request)  # Node's exporters (Gemini CLI) send no length.
    try:
        length = int(request.headers.get("Content-Length", ""))
    except ValueError:
        return 411
    if not 0 <= length <= MAX_BODY_BYTES:
        return 413
    return request.rfile.read(length)


def _chunked(request: http.server.BaseHTTPRequestHandler) -> bytes | int:
    """A chunked body, read up to ``MAX_BODY_BYTES`` (413 past it, 400 if malformed)."""
    body = bytearray()
    while True:
        line = request.rfile.readline(64)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            return 400
        if size < 0 or len(body) + size > MAX_BODY_BYTES:
            return 413
        if size == 0:
            break
        body += request.rfile.read(size)
        request.rfile.readline(64)  # The chunk's CRLF.
    while request.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
        pass  # Trailers: none are used.
    return bytes(body)


def _handler(relay: Relay) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            if path != "/v1/traces" and path not in DROPPED_PATHS:
                return self._answer(404)
            body = _body(self)
            if isinstance(body, int):
                return self._answer(body)
            if path in DROPPED_PATHS:
                return self._answer(200)  # Read, and sent nowhere: only traces go on.
            try:
                if self.headers.get("Content-Encoding", "").strip().lower() == "gzip":
                    body = _gunzip(body)
                as_json = _content_type(self) == JSON
                status, answer = relay.forward(body, as_json)
            except (OSError, EOFError, DecodeError, ValueError):
                return self._answer(400)
            # A JSON client reads a JSON answer: the collector's protobuf one is not that.
            self._answer(status, b"{}" if as_json and status == 200 else answer, as_json)

        def _answer(self, status: int, body: bytes = b"", as_json: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", JSON if as_json else PROTOBUF)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # The CLI's exporter reports failures; the pod's log stays the agent's.

    return Handler


def _gunzip(body: bytes) -> bytes:
    """``body`` decompressed, refused (ValueError) past ``MAX_BODY_BYTES``."""
    with gzip.GzipFile(fileobj=io.BytesIO(body)) as unzipped:
        data = unzipped.read(MAX_BODY_BYTES + 1)
    if len(data) > MAX_BODY_BYTES:
        raise ValueError("the decompressed body is too large")
    return data
