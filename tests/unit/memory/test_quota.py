"""The per-namespace store quota and a full Redis, against a real Redis (issue 14).

Aspects covered:
* entries: a tenant's writes over all its store namespaces count; one past the limit is
  refused with the count and limit, and writes nothing; replacing an entry is not a new
  one; other tenants are unaffected; deleting, expiring and pruning free the quota;
* bytes: key, writer and value count; a replacement counts only its new size;
* extending an entry keeps it counted past its first expiry;
* a Redis at ``maxmemory`` (noeviction) refuses the write with StoreFullError, and
  evicts nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentchain.memory import entries
from agentchain.memory.contexts import ContextStore
from agentchain.store import keys
from agentchain.store.storeerrors import QuotaExceededError, StoreFullError

pytestmark = pytest.mark.redis


async def put(
    store: ContextStore, tenant: str, ns: str, key: str, value: str = "v", **kw: float
) -> None:
    await store.upsert(tenant, ns, key, value, writer="w", ttl_seconds=kw.get("ttl"))


async def test_an_entry_past_the_count_is_refused_and_not_written(redis: Redis) -> None:
    store = ContextStore(redis, max_entries=3)
    await put(store, "team-a", "notes", "a")
    await put(store, "team-a", "notes", "b")
    await put(store, "team-a", "memory:coder", "c")
    await put(store, "team-a", "notes", "a", "replaced")  # Not a new entry.
    with pytest.raises(QuotaExceededError) as refused:
        await put(store, "team-a", "other", "d")
    assert (refused.value.what, refused.value.used, refused.value.limit) == ("entries", 3, 3)
    assert "'team-a'" in str(refused.value) and "3 of 3 entries" in str(refused.value)
    assert await store.get("team-a", "other", "d") is None
    await put(store, "team-b", "notes", "x")  # Another tenant has its own quota.
    assert await store.delete("team-a", "notes", "b")
    await put(store, "team-a", "other", "d")


async def test_bytes_count_key_writer_and_value(redis: Redis) -> None:
    store = ContextStore(redis, max_bytes=100)
    await put(store, "t", "ns", "k1", "x" * 50)  # 2 + 1 + 50 = 53 bytes.
    for _ in range(5):
        await put(store, "t", "ns", "k1", "y" * 50)  # A replacement: still 53.
    with pytest.raises(QuotaExceededError) as refused:
        await put(store, "t", "ns", "k2", "z" * 50)
    assert (refused.value.what, refused.value.used, refused.value.limit) == ("bytes", 53, 100)
    await put(store, "t", "ns", "k2", "z" * 44)  # Exactly 100.
    sizes = await redis.hget(keys.context_sizes("t"), "#total")  # type: ignore[misc]
    assert sizes == b"100"


async def test_expired_entries_free_the_quota(redis: Redis) -> None:
    store = ContextStore(redis, max_entries=2, max_bytes=1000)
    await put(store, "t", "ns", "old", ttl=0.2)
    await put(store, "t", "ns", "kept", ttl=0.2)
    await store.touch("t", "ns", "kept", 60)  # Extended: still counts after 0.2 s.
    await asyncio.sleep(0.35)
    await put(store, "t", "ns", "new")
    with pytest.raises(QuotaExceededError):
        await put(store, "t", "ns", "one-too-many")
    assert await redis.zcard(keys.context_tally("t")) == 2


async def test_pruning_and_persistent_entries_keep_the_tally_exact(redis: Redis) -> None:
    store = ContextStore(redis, max_entries=10)
    await put(store, "t", "ns", "forever")
    await put(store, "t", "ns", "brief", ttl=0.1)
    assert (
        await redis.zscore(keys.context_tally("t"), keys.context_entry("t", "ns", "forever"))
        == entries.NEVER
    )
    await asyncio.sleep(0.2)
    assert await store.cleanup_expired("t", "ns") == 1
    assert await redis.zcard(keys.context_tally("t")) == 1
    assert await redis.hget(keys.context_sizes("t"), "#total") == b"9"  # type: ignore[misc]


@pytest.fixture
async def full_redis(redis: Redis) -> AsyncIterator[Redis]:
    used = int((await redis.info("memory"))["used_memory"])
    await redis.config_set("maxmemory", str(used + 2 * 1024 * 1024))
    try:
        yield redis
    finally:
        await redis.config_set("maxmemory", "0")


async def test_a_full_redis_refuses_writes_and_evicts_nothing(full_redis: Redis) -> None:
    store = ContextStore(full_redis)
    await put(store, "t", "ns", "first", "x" * 1000, ttl=600)
    with pytest.raises(StoreFullError, match="evicts nothing"):
        for n in range(64):
            await put(store, "t", "ns", f"k{n}", "x" * 100_000, ttl=600)
    assert await store.get("t", "ns", "first") is not None
