"""The operator's HTTP side in one aiohttp application: webhook, job API, metrics.

``build_app`` wires the pieces and nothing else, so tests serve exactly what
production serves.  Middlewares run outermost first: the error middleware turns
every refusal into the one JSON error shape, then the auth middleware resolves
the caller of ``/api/`` paths.

Fail closed, but let the caller keep the rest up: without a webhook secret
``build_app``/``serve`` raise :class:`WebhookNotConfigured` (the caller logs it);
called again with ``webhook=False`` the webhook is not served
(``POST /webhooks/github`` answers 503 so GitHub shows the failure) while the
job API, health and metrics still work, since running jobs need the API to
delegate and to write anchors.

Health: ``/healthz`` is liveness (the event loop answers); ``/readyz`` checks
that Redis answers PING and the Kubernetes API answers ``/version``, because
without either nothing the endpoint accepts could be acted on.

The webhook's dispatcher (``dispatch.py``) runs as a task of this app: started when
it starts serving, stopped on cleanup.  It runs even when the webhook is not served,
so jobs a previous run accepted are still created.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from agentchain.engine.runtime import Runtime
from agentchain.kube import clients
from agentchain.store.deliveries import JobQueue
from agentchain.web import api, auth, dashboard, openapi, storeapi, submitting
from agentchain.web import webhook as webhooks
from agentchain.web.dispatch import Dispatcher
from agentchain.web.responses import error_middleware, error_response, json_response
from agentchain.web.webhook import WebhookNotConfigured

__all__ = ["WebhookNotConfigured", "build_app", "serve"]

log = logging.getLogger(__name__)
READY_TIMEOUT_SECONDS = 3.0
# Request bodies of the job API (store values are at most 256 KiB); the webhook streams
# its own body under Settings.webhook_max_bytes and is not bound by this.
API_MAX_BODY_BYTES = 1024 * 1024


async def healthz(request: web.Request) -> web.Response:
    return json_response({"ok": True})


async def _kube_reachable() -> None:
    await clients.request("GET", "/version")


async def readyz(request: web.Request) -> web.Response:
    rt = request.app[api.RUNTIME_KEY]
    checks: dict[str, str] = {}
    for name, probe in (("redis", rt.redis.ping()), ("kubernetes", _kube_reachable())):
        try:
            await asyncio.wait_for(probe, READY_TIMEOUT_SECONDS)
            checks[name] = "ok"
        except Exception as exc:  # Any failure means not ready; say which, not why in full.
            checks[name] = f"failed: {type(exc).__name__}"
    ready = all(v == "ok" for v in checks.values())
    return json_response({"ready": ready, "checks": checks}, status=200 if ready else 503)


async def metrics_page(request: web.Request) -> web.Response:
    body = generate_latest(REGISTRY)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _webhook_not_configured(request: web.Request) -> web.Response:
    return error_response(
        503, "webhook not configured", "No webhook secret is configured on the operator."
    )


def build_app(
    rt: Runtime,
    *,
    webhook: bool = True,
    dashboard_enabled: bool | None = None,
    dispatch: bool = True,
) -> web.Application:
    """The whole HTTP surface; raises :class:`WebhookNotConfigured` unless ``webhook=False``.

    ``dispatch=False`` leaves the webhook's queue undrained (tests of a crashed dispatcher).
    """
    app = web.Application(
        middlewares=[error_middleware, auth.auth_middleware(rt)],
        client_max_size=API_MAX_BODY_BYTES,
    )
    app[api.RUNTIME_KEY] = rt
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
    dispatcher = Dispatcher(JobQueue(rt.redis, rt.settings.namespaces)) if dispatch else None
    if dispatcher is not None:
        app.cleanup_ctx.append(dispatcher.lifespan)
    if webhook:
        webhooks.add_routes(app, rt, dispatcher)
    else:
        app.router.add_post(webhooks.PATH, _webhook_not_configured)
    openapi.add_routes(app)
    api.add_routes(app)
    submitting.add_routes(app)
    storeapi.add_routes(app)
    if rt.settings.dashboard if dashboard_enabled is None else dashboard_enabled:
        dashboard.add_routes(app)
    return app


async def serve(rt: Runtime, host: str, port: int, *, webhook: bool = True) -> web.AppRunner:
    """Start serving; the caller keeps the runner and calls ``await runner.cleanup()``.

    Raises :class:`WebhookNotConfigured` (before binding) when ``webhook`` is asked
    for without a secret; call again with ``webhook=False`` to serve the rest.
    """
    runner = web.AppRunner(build_app(rt, webhook=webhook), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    log.info("serving the webhook and job API on %s:%d", host, port)
    return runner
