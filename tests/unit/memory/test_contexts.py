"""The shared context store against a real Redis (SPEC §4, seed 000).

Aspects covered:
- upsert and point read: round trip, ``created`` kept, ``updated`` and writer replaced;
- expiry: an upsert sets the new TTL or removes the old one (never a stale TTL); expired
  entries are never read, listed or counted as recent, and their index rows are cleaned;
- recent: newest first, bounded by ``n``, skipping expired entries;
- list_prefix: literal prefixes (property-based, pattern characters included), key order;
- touch / write_and_extend / get_and_extend: extend, never shorten (nor give a persistent
  entry an expiry), never rewrite;
- get_json and its clear error; delete; writers and values with any content;
- size and shape limits with sizes and limits in the message;
- tenant isolation, including component values that contain the key separator;
- 100 concurrent writers on one key: no lost update, one index row.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from agentchain.memory import contexts, entries
from agentchain.memory.contexts import ContextStore
from agentchain.store import keys
from agentchain.store.storeerrors import InvalidKeyError, NotJSONError, ValueTooLargeError

pytestmark = pytest.mark.redis

T = "team-a"
NS = "codebase"


@pytest.fixture
def store(redis: Redis) -> ContextStore:
    return ContextStore(redis)


async def test_upsert_then_get_round_trips(store: ContextStore) -> None:
    written = await store.upsert(
        T, NS, "auth", "MVC in moduli/auth", writer="coder", ttl_seconds=60
    )
    read = await store.get(T, NS, "auth")
    assert read == written
    assert read.value == "MVC in moduli/auth" and read.writer == "coder"
    assert read.expires_at is not None
    assert 59 < read.expires_at - read.updated <= 60.01


async def test_update_keeps_created_and_replaces_the_rest(store: ContextStore) -> None:
    first = await store.upsert(T, NS, "k", "one", writer="a", ttl_seconds=None)
    await asyncio.sleep(0.01)
    second = await store.upsert(T, NS, "k", "two", writer="b", ttl_seconds=None)
    assert second.created == first.created
    assert second.updated > first.updated
    assert await store.get(T, NS, "k") == second
    assert second.writer == "b" and second.value == "two"


async def test_get_of_missing_key_is_none(store: ContextStore) -> None:
    assert await store.get(T, NS, "nope") is None


async def test_update_without_ttl_removes_the_old_expiry(store: ContextStore, redis: Redis) -> None:
    await store.upsert(T, NS, "k", "v", writer="a", ttl_seconds=60)
    entry = await store.upsert(T, NS, "k", "v2", writer="a", ttl_seconds=None)
    assert entry.expires_at is None
    assert (await store.get(T, NS, "k")) == entry
    assert await redis.pttl(keys.context_entry(T, NS, "k")) == -1


async def test_update_with_ttl_replaces_the_old_expiry(store: ContextStore, redis: Redis) -> None:
    await store.upsert(T, NS, "k", "v", writer="a", ttl_seconds=1000)
    entry = await store.upsert(T, NS, "k", "v2", writer="a", ttl_seconds=5)
    assert entry.expires_at is not None
    assert 0 < await redis.pttl(keys.context_entry(T, NS, "k")) <= 5000


async def test_expired_entries_are_never_returned(store: ContextStore) -> None:
    await store.upsert(T, NS, "short", "v", writer="a", ttl_seconds=0.3)
    await store.upsert(T, NS, "long", "v", writer="a", ttl_seconds=60)
    await asyncio.sleep(0.5)
    assert await store.get(T, NS, "short") is None
    assert [e.key for e in await store.recent(T, NS, 10)] == ["long"]
    assert [e.key for e in await store.list_prefix(T, NS, "")] == ["long"]


async def test_an_expired_entry_rewritten_gets_a_fresh_created(store: ContextStore) -> None:
    first = await store.upsert(T, NS, "k", "v", writer="a", ttl_seconds=0.2)
    await asyncio.sleep(0.4)
    second = await store.upsert(T, NS, "k", "v", writer="a", ttl_seconds=None)
    assert second.created > first.created


async def test_cleanup_removes_index_rows_of_expired_entries(
    store: ContextStore, redis: Redis
) -> None:
    for i in range(5):
        await store.upsert(T, NS, f"gone{i}", "v", writer="a", ttl_seconds=0.2)
    await store.upsert(T, NS, "kept", "v", writer="a", ttl_seconds=60)
    await asyncio.sleep(0.4)
    assert await store.cleanup_expired(T, NS) == 5
    assert await redis.zcard(keys.context_recent(T, NS)) == 1
    assert await redis.zcard(keys.context_lex(T, NS)) == 1
    assert await redis.zcard(keys.context_expiry(T, NS)) == 1
    assert await store.cleanup_expired(T, NS) == 0


async def test_recent_prunes_expired_rows_it_meets(store: ContextStore, redis: Redis) -> None:
    await store.upsert(T, NS, "old", "v", writer="a", ttl_seconds=None)
    for i in range(3):
        await store.upsert(T, NS, f"new{i}", "v", writer="a", ttl_seconds=0.2)
    await asyncio.sleep(0.4)
    assert [e.key for e in await store.recent(T, NS, 2)] == ["old"]
    assert await redis.zcard(keys.context_recent(T, NS)) == 1


async def test_recent_is_newest_first_and_bounded(store: ContextStore) -> None:
    for i in range(6):
        await store.upsert(T, NS, f"k{i}", str(i), writer="a", ttl_seconds=None)
    await store.upsert(T, NS, "k1", "again", writer="a", ttl_seconds=None)
    assert [e.key for e in await store.recent(T, NS, 3)] == ["k1", "k5", "k4"]
    assert len(await store.recent(T, NS, 100)) == 6
    assert await store.recent(T, NS, 0) == []


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("module:", ["module:auth", "module:payroll"]),
        ("mod", ["mod%ule", "mod_ule", "module:auth", "module:payroll"]),
        ("mod_", ["mod_ule"]),
        ("mod%", ["mod%ule"]),
        ("*", ["*star"]),
        ("[", ["[bracket"]),
        ("\\", ["\\slash"]),
        ("?", []),
    ],
)
async def test_list_prefix_is_literal(
    store: ContextStore, prefix: str, expected: list[str]
) -> None:
    names = ["module:auth", "module:payroll", "mod_ule", "mod%ule", "*star", "[bracket"]
    for name in [*names, "\\slash", "other"]:
        await store.upsert(T, NS, name, "v", writer="a", ttl_seconds=None)
    assert [e.key for e in await store.list_prefix(T, NS, prefix)] == expected


async def test_list_prefix_respects_the_limit(store: ContextStore) -> None:
    for i in range(10):
        await store.upsert(T, NS, f"p{i}", "v", writer="a", ttl_seconds=None)
    assert [e.key for e in await store.list_prefix(T, NS, "p", limit=3)] == ["p0", "p1", "p2"]


_PATTERNY = st.text(alphabet="ab%_*?[]\\^-!:é", min_size=0, max_size=4)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(names=st.sets(_PATTERNY.filter(bool), min_size=1, max_size=12), prefix=_PATTERNY)
def test_list_prefix_matches_str_startswith(redis_url: str, names: set[str], prefix: str) -> None:
    async def scenario() -> list[str]:
        client: Redis = Redis.from_url(redis_url)
        try:
            await client.flushdb()
            store = ContextStore(client)
            for name in names:
                await store.upsert(T, NS, name, "v", writer="a", ttl_seconds=None)
            return [e.key for e in await store.list_prefix(T, NS, prefix, limit=1000)]
        finally:
            await client.aclose()  # type: ignore[attr-defined,unused-ignore]

    listed = asyncio.run(scenario())
    expected = sorted((n for n in names if n.startswith(prefix)), key=lambda n: n.encode())
    assert listed == expected


async def test_touch_extends_without_rewriting(store: ContextStore) -> None:
    written = await store.upsert(T, NS, "k", "v", writer="a", ttl_seconds=10)
    assert await store.touch(T, NS, "k", 1000)
    read = await store.get(T, NS, "k")
    assert read is not None and read.expires_at is not None and written.expires_at is not None
    assert read.expires_at > written.expires_at + 900
    assert (read.value, read.updated, read.writer) == (written.value, written.updated, "a")


async def test_touch_never_shortens_nor_adds_an_expiry(store: ContextStore) -> None:
    long = await store.upsert(T, NS, "long", "v", writer="a", ttl_seconds=1000)
    await store.upsert(T, NS, "forever", "v", writer="a", ttl_seconds=None)
    assert await store.touch(T, NS, "long", 1)
    assert await store.touch(T, NS, "forever", 1)
    assert (await store.get(T, NS, "long")) == long
    forever = await store.get(T, NS, "forever")
    assert forever is not None and forever.expires_at is None


async def test_touch_of_missing_or_expired_key_is_false(store: ContextStore) -> None:
    assert not await store.touch(T, NS, "nope", 10)
    await store.upsert(T, NS, "k", "v", writer="a", ttl_seconds=0.2)
    await asyncio.sleep(0.4)
    assert not await store.touch(T, NS, "k", 10)


async def test_write_and_extend_defaults_to_ninety_days(store: ContextStore) -> None:
    entry = await store.write_and_extend(T, NS, "k", "v", writer="a")
    assert entry.expires_at is not None
    assert abs(entry.expires_at - entry.updated - keys.DEFAULT_CONTEXT_TTL_SECONDS) < 1


async def test_write_and_extend_never_shortens_nor_adds_an_expiry(
    store: ContextStore, redis: Redis
) -> None:
    # A plain write over a persistent entry keeps it persistent, in the entry, in Redis's
    # own TTL and in the tenant's tally; over a later expiry it keeps that one.
    await store.upsert(T, NS, "forever", "v1", writer="a", ttl_seconds=None)
    await store.upsert(T, NS, "long", "v1", writer="a", ttl_seconds=10_000_000)
    long = await store.get(T, NS, "long")
    forever = await store.write_and_extend(T, NS, "forever", "v2", writer="b", ttl_seconds=60)
    longer = await store.write_and_extend(T, NS, "long", "v2", writer="b", ttl_seconds=60)
    assert forever.expires_at is None and forever.value == "v2"
    assert await store.get(T, NS, "forever") == forever
    assert await redis.pttl(keys.context_entry(T, NS, "forever")) == -1
    tally = await redis.zscore(keys.context_tally(T), keys.context_entry(T, NS, "forever"))
    assert tally == entries.NEVER
    assert long is not None and longer.expires_at == long.expires_at
    assert await store.get(T, NS, "long") == longer
    # An explicit TTL still replaces the expiry (an update never keeps a stale one).
    replaced = await store.upsert(T, NS, "forever", "v3", writer="b", ttl_seconds=60)
    assert replaced.expires_at is not None


async def test_every_read_through_get_and_extend_extends(store: ContextStore) -> None:
    # 1.6 s of reads outlive a 1 s TTL only if each read pushed the expiry forward.
    await store.write_and_extend(T, NS, "k", "v", writer="a", ttl_seconds=1)
    for _ in range(4):
        await asyncio.sleep(0.4)
        assert await store.get_and_extend(T, NS, "k", ttl_seconds=1) is not None
    assert await store.get_and_extend(T, NS, "missing") is None


async def test_get_json_parses_and_names_bad_values(store: ContextStore) -> None:
    await store.upsert(T, NS, "ok", json.dumps({"a": [1, 2]}), writer="a", ttl_seconds=None)
    await store.upsert(T, NS, "bad", "not json{", writer="a", ttl_seconds=None)
    assert await store.get_json(T, NS, "ok") == {"a": [1, 2]}
    assert await store.get_json(T, NS, "missing") is None
    with pytest.raises(NotJSONError, match="'codebase'/'bad' is not valid JSON"):
        await store.get_json(T, NS, "bad")


async def test_delete_removes_entry_and_index_rows(store: ContextStore, redis: Redis) -> None:
    await store.upsert(T, NS, "k", "v", writer="a", ttl_seconds=60)
    assert await store.delete(T, NS, "k")
    assert not await store.delete(T, NS, "k")
    assert await store.get(T, NS, "k") is None
    for index in (keys.context_recent, keys.context_lex, keys.context_expiry):
        assert await redis.zcard(index(T, NS)) == 0


async def test_oversize_value_names_size_and_limit(store: ContextStore) -> None:
    value = "é" * (contexts.MAX_VALUE_BYTES // 2 + 1)
    with pytest.raises(ValueTooLargeError, match=r"262146 bytes.*limit of 262144") as info:
        await store.upsert(T, NS, "k", value, writer="a", ttl_seconds=None)
    assert (info.value.size, info.value.limit) == (262146, contexts.MAX_VALUE_BYTES)
    await store.upsert(T, NS, "k", "x" * contexts.MAX_VALUE_BYTES, writer="a", ttl_seconds=None)


@pytest.mark.parametrize(
    ("namespace", "key", "message"),
    [
        (NS, "k" * 513, "key is 513 bytes, over the limit of 512"),
        (NS, "", "key must not be empty"),
        ("n" * 129, "k", "namespace is 129 bytes, over the limit of 128"),
        ("", "k", "namespace must not be empty"),
    ],
)
async def test_invalid_keys_are_refused(
    store: ContextStore, namespace: str, key: str, message: str
) -> None:
    with pytest.raises(InvalidKeyError, match=message):
        await store.upsert(T, namespace, key, "v", writer="a", ttl_seconds=None)
    with pytest.raises(InvalidKeyError, match=message):
        await store.get(T, namespace, key)


async def test_non_positive_ttl_is_refused(store: ContextStore) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        await store.upsert(T, NS, "k", "v", writer="a", ttl_seconds=0)


async def test_tenants_never_see_each_other(store: ContextStore) -> None:
    await store.upsert("team-a", NS, "k", "a's", writer="a", ttl_seconds=None)
    await store.upsert("team-b", NS, "k", "b's", writer="b", ttl_seconds=None)
    a = await store.get("team-a", NS, "k")
    assert a is not None and a.value == "a's"
    assert [e.value for e in await store.recent("team-b", NS, 10)] == ["b's"]
    assert [e.value for e in await store.list_prefix("team-c", NS, "")] == []
    assert await store.delete("team-b", NS, "k")
    assert await store.get("team-a", NS, "k") is not None


async def test_separator_in_components_cannot_collide(store: ContextStore) -> None:
    await store.upsert("a:b", "c", "d", "first", writer="x", ttl_seconds=None)
    await store.upsert("a", "b:c", "d", "second", writer="x", ttl_seconds=None)
    await store.upsert("a", "b", "c:d", "third", writer="x", ttl_seconds=None)
    await store.upsert("a%3Ab", "c", "d", "fourth", writer="x", ttl_seconds=None)
    values = [
        await store.get("a:b", "c", "d"),
        await store.get("a", "b:c", "d"),
        await store.get("a", "b", "c:d"),
        await store.get("a%3Ab", "c", "d"),
    ]
    assert [v.value if v else None for v in values] == ["first", "second", "third", "fourth"]


async def test_hundred_concurrent_writers_lose_no_update(store: ContextStore, redis: Redis) -> None:
    written = await asyncio.gather(
        *(store.upsert(T, NS, "hot", f"v{i}", writer=f"w{i}", ttl_seconds=60) for i in range(100))
    )
    final = await store.get(T, NS, "hot")
    last = max(written, key=lambda e: e.updated)
    assert final == last
    assert len({e.created for e in written}) == 1
    assert len({e.updated for e in written}) == 100
    for index in (keys.context_recent, keys.context_lex, keys.context_expiry):
        assert await redis.zcard(index(T, NS)) == 1


async def test_hundred_concurrent_writers_on_distinct_keys_all_land(store: ContextStore) -> None:
    await asyncio.gather(
        *(store.upsert(T, NS, f"k{i}", "v", writer="w", ttl_seconds=None) for i in range(100))
    )
    assert len(await store.recent(T, NS, 1000)) == 100


async def test_get_and_extend_returns_the_extended_entry(store: ContextStore) -> None:
    written = await store.upsert(T, NS, "k", "v", writer="a", ttl_seconds=10)
    extended = await store.get_and_extend(T, NS, "k", ttl_seconds=1000)
    assert extended is not None and extended.expires_at is not None
    assert written.expires_at is not None and extended.expires_at > written.expires_at + 900
    assert await store.get(T, NS, "k") == extended


@pytest.mark.parametrize(
    ("writer", "value"),
    [("a\nb 12\n", "line\n\nline"), ("é" * 100, ""), ("w", "0000 1\n" * 50), ("x", "😀")],
)
async def test_writer_and_value_survive_any_content(
    store: ContextStore, writer: str, value: str
) -> None:
    await store.upsert(T, NS, "k", value, writer=writer, ttl_seconds=60)
    assert await store.touch(T, NS, "k", 1000)
    entry = await store.get(T, NS, "k")
    assert entry is not None and (entry.writer, entry.value) == (writer, value)
    assert [e.value for e in await store.recent(T, NS, 1)] == [value]
