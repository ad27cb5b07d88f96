"""Fixtures shared by every test: a real Redis server, never a fake.

Aspects covered: one ``redis-server`` per test session (started from Debian's binary by
:class:`e2e.controlplane.redisserver.RedisServer`, killed with the session, with
authentication on as in production), and a fresh ``redis.asyncio.Redis`` per test on a
flushed database. Tests connect as the server's admin user, so they may inspect and
flush; the operator's restricted user is what the e2e suite runs the operator with. The client uses
``decode_responses=False`` like the operator does, so tests exercise the same decoding
paths as production. Per-test clients fit pytest-asyncio's function-scoped event loops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from e2e.controlplane.redisserver import RedisServer
from redis.asyncio import Redis


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir: Path = tmp_path_factory.mktemp("redis")
    with RedisServer(workdir) as server:
        yield server.admin_url


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client: Redis = Redis.from_url(redis_url, decode_responses=False)
    await client.flushdb()
    try:
        yield client
    finally:
        # types-redis describes redis-py 4.x; aclose() is the 5.x+ name (close() warns).
        await client.aclose()  # type: ignore[attr-defined,unused-ignore]
