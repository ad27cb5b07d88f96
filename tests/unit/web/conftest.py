"""Fixtures for the web layer's HTTP tests: the real app, served in-process, on real Redis.

Aspects covered: a ``Runtime`` built on the per-test Redis client (flushed database)
with test settings, and aiohttp ``TestClient``s around ``build_app`` (the public
listener) and ``build_internal_app`` (metrics, probes, dashboard off) — the same
applications production serves, through the same runner (``server.Runner``: JSON for
HTTP parse errors), over a real socket.  No Kubernetes: these tests exercise only
paths that answer before the API server would be called.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.settings import Settings
from agentchain.web import server
from agentchain.web.app import build_app, build_internal_app

WEBHOOK_SECRET = "It's a Secret to Everybody"
ADMIN_TOKEN = "admin-token-for-tests-0123456789"
SMALL_CAP = 1024 * 1024

Client = TestClient[web.Request, web.Application]


def make_runtime(redis: Redis, settings: Settings) -> Runtime:
    return Runtime.from_client(settings, redis)


@pytest.fixture
def settings() -> Settings:
    return Settings(
        webhook_secrets=(WEBHOOK_SECRET,),
        admin_tokens=(ADMIN_TOKEN,),
        webhook_max_bytes=SMALL_CAP,
    )


@pytest.fixture
def runtime(redis: Redis, settings: Settings) -> Runtime:
    return make_runtime(redis, settings)


class OperatorTestServer(TestServer):
    """aiohttp's test server, running the app through the operator's own runner.

    As in production, a client hanging up does not cancel its handler (aiohttp's test
    server would); the handler sees the connection error instead.
    """

    async def _make_runner(self, **kwargs: Any) -> web.BaseRunner:
        return server.Runner(self.app, **{**kwargs, "handler_cancellation": False})


def serving(app: web.Application) -> Client:
    return TestClient(OperatorTestServer(app))


@pytest.fixture
async def client(runtime: Runtime) -> AsyncIterator[Client]:
    async with serving(build_app(runtime)) as c:
        yield c


@pytest.fixture
async def internal(runtime: Runtime) -> AsyncIterator[Client]:
    async with serving(build_internal_app(runtime, dashboard_enabled=False)) as c:
        yield c


@pytest.fixture
def with_settings(settings: Settings) -> Callable[..., Settings]:
    def change(**fields: object) -> Settings:
        return settings.model_copy(update=fields)

    return change
