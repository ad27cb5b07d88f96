"""The cost of tracing a chain: an OTLP sink, and a traced operator beside an untraced one.

``bench_hop_latency.py --trace-hops N`` runs a phase of its own: the untraced operator of
the main phase serves its namespace, a second operator, with ``OTEL_EXPORTER_OTLP_ENDPOINT``
pointing at :class:`Sink`, serves a namespace of its own, and chains alternate between the
two, so load from other work falls on both alike.  The traced operator records every span
(a Redis step per span at each job's end) and, as the leader, exports them while the
chains run: its hop p50 over the untraced one's is what tracing costs a hop.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Sink:
    """An OTLP/HTTP endpoint that accepts every batch and counts its spans."""

    def __init__(self) -> None:
        self.spans = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                sink.spans += sum(
                    len(scope.spans)
                    for resource in request.resource_spans
                    for scope in resource.scope_spans
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="otlp").start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
