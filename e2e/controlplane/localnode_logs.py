"""The kubelet log endpoint of the local node, served over HTTPS.

The kube-apiserver answers `pods/log` (and therefore `kubectl logs`) by proxying to
`https://<node InternalIP>:<kubeletEndpoint.Port>/containerLogs/{ns}/{pod}/{container}`,
so this endpoint is what makes logs flow through the real API server instead of tests
reading files. Only the query parameters kubectl sends are honoured: `tailLines` first,
then `limitBytes` on what remains, and `follow` streams until the container has ended.

Where a log lives is decided by the node (`LogSource`); this module only slices files and
streams them, which keeps the slicing pure and unit-tested (`tail_start`, `limit`).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

POLL_SECONDS = 0.1
CHUNK = 64 * 1024


@dataclass(frozen=True)
class LogTarget:
    """Where a container's log is, and whether it may still grow."""

    path: Path
    running: Callable[[], bool]


LogSource = Callable[[str, str, str], LogTarget | None]
"""(namespace, pod, container) -> the log, or None when the node never ran it."""


def tail_start(data: bytes, lines: int | None) -> int:
    """Offset where the last `lines` lines of `data` begin (a final partial line counts)."""
    if lines is None:
        return 0
    if lines <= 0:
        return len(data)
    kept = data.splitlines(keepends=True)[-lines:]
    return len(data) - sum(len(line) for line in kept)


def limit(data: bytes, remaining: int | None) -> bytes:
    """At most `remaining` bytes of `data`; None means unlimited."""
    return data if remaining is None else data[: max(remaining, 0)]


def _int_param(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise web.HTTPBadRequest(text=f"invalid {name}: {raw!r}") from exc


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("true", "1")


async def _stream(
    response: web.StreamResponse, target: LogTarget, offset: int, budget: int | None, follow: bool
) -> None:
    """Send the file from `offset`; when following, poll until the container has ended."""
    with target.path.open("rb") as handle:
        handle.seek(offset)
        while budget is None or budget > 0:
            # Read the "running" flag before reading, so output written just before the
            # container ended is still sent on the final pass.
            alive = follow and target.running()
            chunk = limit(handle.read(CHUNK), budget)
            if chunk:
                await response.write(chunk)
                budget = None if budget is None else budget - len(chunk)
                continue
            if not alive:
                return
            await asyncio.sleep(POLL_SECONDS)


def make_app(source: LogSource) -> web.Application:
    """The aiohttp application: `/containerLogs/...` and `/healthz`."""

    async def container_logs(request: web.Request) -> web.StreamResponse:
        ns, pod, name = (request.match_info[k] for k in ("namespace", "pod", "container"))
        target = source(ns, pod, name)
        if target is None or not target.path.exists():
            raise web.HTTPNotFound(
                text=f'container "{name}" in pod "{pod}" is waiting to start or unknown'
            )
        tail, budget = _int_param(request, "tailLines"), _int_param(request, "limitBytes")
        offset = tail_start(target.path.read_bytes(), tail) if tail is not None else 0
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await _stream(response, target, offset, budget, _flag(request, "follow"))
        await response.write_eof()
        return response

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", container_logs)
    app.router.add_get("/healthz", healthz)
    return app


def tls_context(cert: str, key: str, client_ca: str | None) -> ssl.SSLContext:
    """Serving TLS; with a client CA, only the API server's kubelet-client cert gets in."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca:
        context.load_verify_locations(cafile=client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    else:
        context.verify_mode = ssl.CERT_NONE
    return context


async def serve(
    source: LogSource, port: int, context: ssl.SSLContext, host: str = "127.0.0.1"
) -> web.AppRunner:
    """Start serving; the caller owns the runner and calls `cleanup()` on shutdown."""
    runner = web.AppRunner(make_app(source), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=context).start()
    return runner
