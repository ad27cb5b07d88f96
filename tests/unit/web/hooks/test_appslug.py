"""The App's slug for mention and assignment triggers (``agentchain.web.hooks.appslug``).

Aspects covered:
* the configured slug is used as it is, with or without an App, and GitHub is not asked;
* no slug and no App: unknown (the filters refuse), nothing asked;
* an App whose ``GET /app`` names it: the slug, asked once and kept;
* an App whose ``GET /app`` fails (an error, or an answer that is no App): unknown,
  and not asked again within the retry period, so a GitHub outage does not slow every
  delivery down;
* an answer slower than a delivery's wait: unknown for that delivery, but the ask goes
  on, and the next delivery gets the slug from it (GitHub asked once, not refused for
  the retry period).

GitHub is a small aiohttp server here (the e2e suite asks the GitHub stand-in).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.github import appruntime
from agentchain.settings import Settings
from agentchain.web.hooks import appslug
from agentchain.web.hooks.appslug import AppSlug


@functools.cache
def _pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


APP = {
    "id": 1,
    "slug": "acme-agents",
    "node_id": "A_1",
    "client_id": "Iv1.1",
    "owner": {
        "login": "acme",
        "id": 2,
        "node_id": "O_2",
        "avatar_url": "https://example.com/a",
        "gravatar_id": "",
        "type": "Organization",
        "site_admin": False,
        **{
            f"{k}_url": f"https://api.github.com/users/acme/{k}"
            for k in (
                "followers following gists starred subscriptions organizations repos "
                "events received_events"
            ).split()
        },
        "url": "https://api.github.com/users/acme",
        "html_url": "https://github.com/acme",
    },
    "name": "Acme Agents",
    "description": None,
    "external_url": "https://example.com",
    "html_url": "https://github.com/apps/acme-agents",
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
    "permissions": {"issues": "write"},
    "events": ["issues"],
}


class FakeGitHub:
    """Answers ``GET /app`` with ``slug``, or 500 when ``failing``; counts the requests."""

    def __init__(self) -> None:
        self.asked = 0
        self.failing = False
        self.malformed = False
        self.delay = 0.0

    async def app(self, request: web.Request) -> web.Response:
        self.asked += 1
        await asyncio.sleep(self.delay)
        if self.failing:
            return web.json_response({"message": "boom"}, status=500)
        if self.malformed:
            return web.json_response({"id": 1, "slug": "acme-agents"})
        return web.json_response(APP)


@pytest.fixture
async def github() -> AsyncIterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub()
    app = web.Application()
    app.router.add_get("/app", fake.app)
    async with TestServer(app) as server:
        yield fake, str(server.make_url("/"))


def _runtime(redis: Redis, **settings: object) -> Runtime:
    return Runtime.from_client(Settings(operator_key=("k",), **settings), redis)  # type: ignore[arg-type]


@pytest.mark.redis
async def test_a_configured_slug_is_used_as_it_is(
    redis: Redis, github: tuple[FakeGitHub, str]
) -> None:
    fake, url = github
    assert await AppSlug(_runtime(redis, github_app_slug="mine")).get() == "mine"
    rt = _runtime(
        redis,
        github_app_slug="mine",
        github_app_id=1,
        github_private_key=_pem(),
        github_api_url=url,
    )
    assert await AppSlug(rt).get() == "mine"
    assert fake.asked == 0
    await appruntime.close(rt)


@pytest.mark.redis
async def test_without_an_app_or_a_setting_the_slug_is_unknown(redis: Redis) -> None:
    assert await AppSlug(_runtime(redis)).get() is None


@pytest.mark.redis
async def test_an_app_asks_github_once(redis: Redis, github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    rt = _runtime(redis, github_app_id=1, github_private_key=_pem(), github_api_url=url)
    slug = AppSlug(rt)
    assert await slug.get() == "acme-agents"
    assert await slug.get() == "acme-agents"
    assert fake.asked == 1
    await appruntime.close(rt)


@pytest.mark.redis
async def test_a_failed_ask_is_not_repeated_within_the_retry_period(
    redis: Redis, github: tuple[FakeGitHub, str]
) -> None:
    fake, url = github
    fake.failing = True
    rt = _runtime(redis, github_app_id=1, github_private_key=_pem(), github_api_url=url)
    slug = AppSlug(rt)
    assert await slug.get() is None
    fake.failing = False
    assert await slug.get() is None  # Within the retry period: GitHub is not asked.
    assert fake.asked == 1
    await appruntime.close(rt)


@pytest.mark.redis
async def test_a_malformed_answer_is_unknown_not_an_error(
    redis: Redis, github: tuple[FakeGitHub, str]
) -> None:
    fake, url = github
    fake.malformed = True
    rt = _runtime(redis, github_app_id=1, github_private_key=_pem(), github_api_url=url)
    assert await AppSlug(rt).get() is None
    await appruntime.close(rt)


@pytest.mark.redis
async def test_a_slow_answer_is_kept_for_the_next_delivery(
    redis: Redis, github: tuple[FakeGitHub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = github
    monkeypatch.setattr(appslug, "ASK_TIMEOUT_SECONDS", 0.2)
    fake.delay = 0.6
    rt = _runtime(redis, github_app_id=1, github_private_key=_pem(), github_api_url=url)
    slug = AppSlug(rt)
    assert await slug.get() is None  # This delivery stopped waiting; the ask goes on.
    await asyncio.sleep(fake.delay)
    assert await slug.get() == "acme-agents"
    assert fake.asked == 1
    await appruntime.close(rt)
