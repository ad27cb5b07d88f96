"""A proxy in front of the real API server that answers some requests itself.

The operator is pointed at it by a kubeconfig whose server is the proxy (plain HTTP
on 127.0.0.1, so it sees every request); everything else is forwarded over TLS to the
session's API server, trusting the cluster's CA, with the caller's own credentials,
and streamed back (watches and logs included).  A :class:`Fault` answers the n-th
request that matches it (method and path) with a scripted error instead, once, and
counts what it did, so a test can prove the operator met the failure and got past it;
with a ``window`` it goes on answering so for that many seconds (a short outage of
that path, which no second watch event of the same change can slip through).
"""

from __future__ import annotations

import base64
import re
import ssl
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from e2e.controlplane.cluster import ClusterInfo
from e2e.github.threaded import ThreadedSite

FORWARDED = ("Authorization", "Content-Type", "Accept", "Accept-Encoding", "User-Agent")
RETURNED = ("Content-Type", "Retry-After", "Audit-Id", "Warning")


@dataclass
class Fault:
    """Answer the ``nth`` (1-based) request matching ``method`` and ``path`` (a regex),
    and every one matching in the ``window`` seconds after it."""

    method: str
    path: str
    status: int
    reason: str
    nth: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    window: float = 0.0
    seen: int = 0
    fired: int = 0
    first: float | None = None

    def take(self, method: str, path: str) -> bool:
        if method != self.method or not re.fullmatch(self.path, path):
            return False
        self.seen += 1
        now = time.monotonic()
        if self.first is None and self.seen == self.nth:
            self.first = now
        elif self.first is None or now - self.first > self.window:
            return False
        self.fired += 1
        return True

    def response(self) -> web.Response:
        body: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
        body |= {"code": self.status, "reason": self.reason, "message": "injected by the test"}
        return web.json_response(body, status=self.status, headers=self.headers)


class FaultProxy:
    def __init__(self, info: ClusterInfo, faults: list[Fault]) -> None:
        cluster = yaml.safe_load(info.kubeconfig.read_text())["clusters"][0]["cluster"]
        self.upstream = str(cluster["server"]).rstrip("/")
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self._ssl = ssl.create_default_context(cadata=ca)
        self.faults = faults
        self._lock = threading.Lock()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.cleanup_ctx.append(self._client)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._site = ThreadedSite(app, "fault-proxy")
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._site.port}"

    def start(self) -> None:
        self._site.start()

    def stop(self) -> None:
        self._site.stop()

    def kubeconfig(self, token_kubeconfig: Path, path: Path) -> Path:
        """``token_kubeconfig`` (the operator's) pointed at this proxy."""
        config: dict[str, Any] = yaml.safe_load(token_kubeconfig.read_text())
        config["clusters"][0]["cluster"] = {"server": self.url}
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    async def _client(self, app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(ssl=self._ssl, limit=0)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, auto_decompress=False
        ) as session:
            self._session = session
            yield

    def _fault(self, request: web.Request) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.take(request.method, request.path):
                    return fault
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self._fault(request)
        if fault is not None:
            await request.read()
            return fault.response()
        assert self._session is not None
        headers = {k: request.headers[k] for k in FORWARDED if k in request.headers}
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=await request.read() if request.body_exists else None,
        ) as upstream:
            returned = {k: upstream.headers[k] for k in RETURNED if k in upstream.headers}
            if "Content-Encoding" in upstream.headers:
                returned["Content-Encoding"] = upstream.headers["Content-Encoding"]
            response = web.StreamResponse(status=upstream.status, headers=returned)
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response
