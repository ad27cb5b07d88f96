"""The two listeners, their headers, and the dashboard's pages rendered (issue 14, 15).

Aspects covered:
* the public listener (what GitHub can reach) serves the webhook, the job API and
  ``/healthz``, and not ``/metrics``, ``/readyz`` or the dashboard (404 JSON);
* ``/metrics`` speaks OpenMetrics to a scraper that asks, with a sample's trace id as
  its exemplar, and Prometheus' text otherwise;
* the internal listener serves ``/metrics``, ``/healthz``, ``/readyz`` and, when on,
  the dashboard, and not the webhook or the API;
* every answer, JSON or HTML, carries the security headers: a CSP with
  ``default-src 'self'`` and ``frame-ancestors 'none'``, ``nosniff``, a referrer policy;
  the dashboard's style is a file, so the CSP needs no ``unsafe-inline``;
* neither listener decompresses a request body (aiohttp's ``auto_decompress`` is off),
  and one port for both is refused at start.
(The dashboard's login and pages: ``test_sessions.py``, ``test_chainview.py``.)
"""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from agentchain import metrics
from agentchain.core.runtime import Runtime
from agentchain.settings import Settings
from agentchain.traces.rules import spans
from agentchain.web.app import build_app, build_internal_app, serve
from tests.unit.web.conftest import Client, serving


@pytest.fixture
async def with_dashboard(runtime: Runtime) -> AsyncIterator[Client]:
    async with serving(build_internal_app(runtime, dashboard_enabled=True)) as c:
        yield c


def assert_secure(headers: Any) -> None:
    policy = headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"


@pytest.mark.parametrize(
    "path", ["/metrics", "/readyz", "/", "/ui/", "/ui/static/app.css", "/ui/api/jobs"]
)
async def test_the_public_listener_serves_no_metrics_probes_or_dashboard(
    client: Client, path: str
) -> None:
    response = await client.get(path)
    assert response.status == 404 and response.content_type == "application/json"
    assert_secure(response.headers)


async def test_the_public_listener_serves_liveness_and_the_api_document(client: Client) -> None:
    assert (await client.get("/healthz")).status == 200
    response = await client.get("/api/openapi.json")
    assert response.status == 200
    assert_secure(response.headers)


async def test_the_internal_listener_serves_metrics_and_probes_only(internal: Client) -> None:
    metrics = await internal.get("/metrics")
    assert metrics.status == 200 and "agentchain_webhook_deliveries_total" in await metrics.text()
    assert_secure(metrics.headers)
    assert (await internal.get("/healthz")).status == 200
    for path in ("/webhooks/github", "/api/jobs"):
        assert (await internal.post(path, data=b"{}")).status in (404, 405)
    assert (await internal.get("/api/openapi.json")).status == 404
    assert (await internal.get("/")).status == 404  # The dashboard is off here.
    assert (await internal.get("/ui/")).status == 404


async def test_openmetrics_scrapes_get_a_samples_trace_as_its_exemplar(internal: Client) -> None:
    trace = spans.exemplar("c0ffee")
    metrics.CHAIN_OUTCOMES.labels("exemplars", "succeeded").inc(exemplar=trace)
    accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
    scraped = await internal.get("/metrics", headers=accept)
    assert scraped.headers["Content-Type"].startswith("application/openmetrics-text")
    text = await scraped.text()
    line = next(x for x in text.splitlines() if 'namespace="exemplars"' in x and "_total" in x)
    assert f'# {{trace_id="{trace["trace_id"]}"}} 1.0' in line
    plain = await (await internal.get("/metrics")).text()  # Prometheus' text: no exemplars.
    assert trace["trace_id"] not in plain and 'namespace="exemplars"' in plain


async def test_dashboard_style_is_a_file_under_the_policy(with_dashboard: Client) -> None:
    response = await with_dashboard.get("/ui/static/app.css")
    assert response.status == 200 and response.content_type == "text/css"
    assert "font-family" in await response.text()
    assert_secure(response.headers)


@pytest.mark.parametrize("which", ["public", "internal"])
async def test_neither_listener_decompresses_a_body(runtime: Runtime, which: str) -> None:
    """Below the 415s: aiohttp's parser itself hands over the bytes as sent."""

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    app = build_app(runtime) if which == "public" else build_internal_app(runtime)
    app.router.add_post("/echo", echo)
    zipped = gzip.compress(b'{"a": 1}' * 100)
    async with serving(app) as c:
        response = await c.post("/echo", data=zipped, headers={"Content-Encoding": "gzip"})
        assert response.status == 200
        assert await response.read() == zipped


async def test_one_port_for_both_listeners_is_refused(
    runtime: Runtime, with_settings: Callable[..., Settings]
) -> None:
    rt = Runtime.from_client(with_settings(listen_port=18080, internal_port=18080), runtime.redis)
    with pytest.raises(ValueError, match="needs a port of its own"):
        await serve(rt)
