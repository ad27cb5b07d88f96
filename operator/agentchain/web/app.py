"""The operator's HTTP side: two listeners, one facing GitHub and one facing the cluster.

``build_app`` is the **public** listener (``AGENTCHAIN_LISTEN_PORT``, 8080): the
webhook (authenticated by its signature), the job API (Bearer tokens), its OpenAPI
document and ``/healthz``.  ``build_internal_app`` is the **internal** listener
(``AGENTCHAIN_INTERNAL_PORT``, 8081): ``/metrics``, ``/healthz``, ``/readyz`` and
the dashboard under ``/ui/`` (on by default, behind its own login with the admin
tokens: ``logins.py``); the chart routes only the public port to the Service that
an ingress exposes, so what GitHub can reach never includes them.  Both apps are
built here and nothing else is, so tests serve exactly what production serves.
Middlewares run outermost first: security headers on every answer, the error
middleware turning every refusal into the one JSON error shape, then the auth
middleware resolving the caller of ``/api/`` (the dashboard's session middleware
on the internal listener).

Fail closed, but let the caller keep the rest up: without a webhook secret
``build_app``/``serve`` raise :class:`WebhookNotConfigured` (the caller logs it);
called again with ``webhook=False`` the webhook is not served
(``POST /webhooks/github`` answers 503 so GitHub shows the failure) while the
job API, health and metrics still work, since running jobs need the API to
delegate and to write anchors.

Health: ``/healthz`` is liveness (the event loop answers); ``/readyz`` checks
that Redis answers PING and the Kubernetes API answers ``/version``, because
without either nothing the endpoint accepts could be acted on.  Every replica
serves both listeners whether or not it leads (``replica.py``), so leadership is
no readiness criterion: ``/readyz`` only reports it (``role``: leader or follower),
except ``stopping``: a replica draining after SIGTERM answers 503 so that traffic moves
elsewhere while it still serves what arrives.
It also says where the leader's restart backlog stands (``backlog``: ``listing`` the
initial lists, ``working`` through the events they brought, ``pending`` objects, then
``done``; a follower, which runs no watches, stays at ``listing``) without making the
pod unready for it: the webhook and the job API work meanwhile.

The webhook's dispatcher (``dispatch.py``) runs as a task of the public app:
started when it starts serving, stopped on cleanup.  It runs even when the
webhook is not served, so jobs a previous run accepted are still created.
Both listeners run through ``server.Runner`` (JSON for parser errors, no request
decompression).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics

from agentchain.core.runtime import Runtime
from agentchain.kube import clients
from agentchain.store.deliveries import JobQueue
from agentchain.web import auth, openapi, server
from agentchain.web.dashboard import logins, pages
from agentchain.web.hooks import webhook as webhooks
from agentchain.web.hooks.jobqueue import Dispatcher
from agentchain.web.hooks.webhook import WebhookNotConfigured
from agentchain.web.jobapi import (
    reads,
    reviewroute,
    stoproutes,
    storeapi,
    submitting,
    tokenroute,
)
from agentchain.web.responses import (
    error_middleware,
    error_response,
    json_response,
    security_headers,
)

__all__ = ["Listeners", "WebhookNotConfigured", "build_app", "build_internal_app", "serve"]

log = logging.getLogger(__name__)
READY_TIMEOUT_SECONDS = 3.0
# Request bodies of the job API (store values are at most 256 KiB); the webhook streams
# its own body under Settings.webhook_max_bytes and is not bound by this.
API_MAX_BODY_BYTES = 1024 * 1024
# What /readyz reports as this replica's role (leader/follower); absent: not reported.
ROLE_KEY: web.AppKey[Callable[[], str]] = web.AppKey("agentchain.role")


async def healthz(request: web.Request) -> web.Response:
    return json_response({"ok": True})


async def _kube_reachable() -> None:
    await clients.request("GET", "/version")


async def readyz(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    checks: dict[str, str] = {}
    for name, probe in (("redis", rt.redis.ping()), ("kubernetes", _kube_reachable())):
        try:
            await asyncio.wait_for(probe, READY_TIMEOUT_SECONDS)
            checks[name] = "ok"
        except Exception as exc:  # Any failure means not ready; say which, not why in full.
            checks[name] = f"failed: {type(exc).__name__}"
    ready = all(v == "ok" for v in checks.values())
    backlog = rt.unsettled.backlog  # Informative: a restart's backlog never makes it unready.
    body: dict[str, object] = {"ready": ready, "checks": checks, "backlog": backlog.state()}
    body["pending"] = backlog.pending
    role = request.app.get(ROLE_KEY)
    if role is not None:
        body["role"] = role()
        if body["role"] == "stopping":  # Draining after SIGTERM: route elsewhere.
            body["ready"] = ready = False
    return json_response(body, status=200 if ready else 503)


async def metrics_page(request: web.Request) -> web.Response:
    """Prometheus' text format, or OpenMetrics when the scraper asks for it: only
    OpenMetrics carries exemplars (a sample's trace id, when the operator traces)."""
    if "application/openmetrics-text" in request.headers.get("Accept", ""):
        body = openmetrics.generate_latest(REGISTRY)  # type: ignore[no-untyped-call]
        return web.Response(body=body, headers={"Content-Type": openmetrics.CONTENT_TYPE_LATEST})
    body = generate_latest(REGISTRY)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _webhook_not_configured(request: web.Request) -> web.Response:
    return error_response(
        503, "webhook not configured", "No webhook secret is configured on the operator."
    )


def build_app(rt: Runtime, *, webhook: bool = True, dispatch: bool = True) -> web.Application:
    """The public listener: webhook, job API; raises :class:`WebhookNotConfigured` unless
    ``webhook=False``.

    ``dispatch=False`` leaves the webhook's queue undrained (tests of a crashed dispatcher).
    """
    app = web.Application(
        middlewares=[security_headers, error_middleware, auth.auth_middleware(rt)],
        client_max_size=API_MAX_BODY_BYTES,
        handler_args=server.HANDLER_ARGS,
    )
    app[reads.RUNTIME_KEY] = rt
    app.router.add_get("/healthz", healthz)
    dispatcher = (
        Dispatcher(JobQueue(rt.redis, rt.settings.namespaces), rt.operator_keys)
        if dispatch
        else None
    )
    if dispatcher is not None:
        app.cleanup_ctx.append(dispatcher.lifespan)
    if webhook:
        webhooks.add_routes(app, rt, dispatcher)
    else:
        app.router.add_post(webhooks.PATH, _webhook_not_configured)
    openapi.add_routes(app)
    reads.add_routes(app)
    submitting.add_routes(app)
    storeapi.add_routes(app)
    stoproutes.add_routes(app)
    tokenroute.add_routes(app)
    reviewroute.add_routes(app)
    return app


def build_internal_app(
    rt: Runtime,
    *,
    dashboard_enabled: bool | None = None,
    role: Callable[[], str] | None = None,
) -> web.Application:
    """The internal listener: metrics, probes and the dashboard (with its login), never
    GitHub's."""
    enabled = rt.settings.dashboard if dashboard_enabled is None else dashboard_enabled
    middlewares: list[Middleware] = [security_headers, error_middleware]
    if enabled:
        middlewares.append(logins.session_middleware(rt, pages.shell))
    app = web.Application(
        middlewares=middlewares,
        client_max_size=API_MAX_BODY_BYTES,
        handler_args=server.HANDLER_ARGS,
    )
    app[reads.RUNTIME_KEY] = rt
    if role is not None:
        app[ROLE_KEY] = role
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
    if enabled:
        pages.add_routes(app)
    return app


async def _start(app: web.Application, host: str, port: int) -> web.AppRunner:
    runner = server.Runner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


@dataclass
class Listeners:
    """Both listeners of one operator; ``cleanup`` stops them."""

    public: web.AppRunner
    internal: web.AppRunner

    async def cleanup(self) -> None:
        await self.public.cleanup()
        await self.internal.cleanup()


async def serve(
    rt: Runtime, *, webhook: bool = True, role: Callable[[], str] | None = None
) -> Listeners:
    """Start both listeners; the caller keeps the result and calls ``await .cleanup()``.

    Raises :class:`WebhookNotConfigured` (before binding) when ``webhook`` is asked
    for without a secret; call again with ``webhook=False`` to serve the rest.
    """
    settings = rt.settings
    if settings.internal_port == settings.listen_port != 0:
        # One port for both would put metrics and the dashboard where GitHub connects.
        raise ValueError(
            f"AGENTCHAIN_INTERNAL_PORT and AGENTCHAIN_LISTEN_PORT are both {settings.listen_port}:"
            " the internal listener needs a port of its own"
        )
    public_app = build_app(rt, webhook=webhook)
    host = settings.listen_host
    public = await _start(public_app, host, settings.listen_port)
    try:
        internal = await _start(build_internal_app(rt, role=role), host, settings.internal_port)
    except BaseException:
        await public.cleanup()
        raise
    log.info(
        "serving the webhook and job API on %s:%d, metrics and probes on %s:%d",
        host,
        settings.listen_port,
        host,
        settings.internal_port,
    )
    return Listeners(public, internal)
