"""Fixtures for the web layer's HTTP tests: the real app, served in-process, on real Redis.

Aspects covered: a ``Runtime`` built on the per-test Redis client (flushed database)
with test settings, and an aiohttp ``TestClient`` around ``build_app`` — the same
application production serves, dashboard off.  No Kubernetes: these tests exercise
only paths that answer before the API server would be called.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from agentchain.engine.runtime import Runtime
from agentchain.settings import Settings
from agentchain.web.app import build_app

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


@pytest.fixture
async def client(runtime: Runtime) -> AsyncIterator[Client]:
    async with TestClient(TestServer(build_app(runtime, dashboard_enabled=False))) as c:
        yield c


@pytest.fixture
def with_settings(settings: Settings) -> Callable[..., Settings]:
    def change(**fields: object) -> Settings:
        return settings.model_copy(update=fields)

    return change
