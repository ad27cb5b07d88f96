"""The shared context store (SPEC §4, seed 000): namespace + key → value, in Redis.

Per (tenant, namespace), all names from :mod:`agentchain.store.keys`:

* one string per entry, laid out as :mod:`agentchain.memory.entries` describes, with a
  real Redis TTL, so Redis itself guarantees an expired entry is never read back;
* a "recent" sorted set (score = updated) for the N most recent entries;
* a "lex" sorted set (all scores 0) for prefix listing with ``ZRANGEBYLEX``, which compares
  bytes: ``%``, ``_``, ``*``, ``?``, ``[`` and ``\\`` are just bytes there, so a prefix is
  literal by construction instead of by escaping a glob for ``SCAN MATCH``;
* an "expiry" sorted set (score = expiry ms) so cleanup finds stale index rows without
  walking the whole namespace.

Every write is one Lua script, so the entry, its TTL and the three indexes change
together; concurrent writers are serialized by Redis and none is lost. Index rows of
expired entries are removed lazily by the reads that meet them and eagerly by
:meth:`ContextStore.cleanup_expired`. Validation happens here, before any I/O, so the
API can turn size errors into 413/422 answers without touching Redis.

Each tenant has a quota (most entries, most bytes, over all its store namespaces; see
``entries.py`` for the tally): an upsert past it raises :class:`QuotaExceededError`
and writes nothing. Redis runs with ``noeviction``, so when it is full a write raises
:class:`StoreFullError` rather than anything being evicted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import OutOfMemoryError

from agentchain.memory import entries
from agentchain.memory.entries import Entry
from agentchain.store import keys
from agentchain.store.storeerrors import (
    InvalidKeyError,
    QuotaExceededError,
    StoreFullError,
    ValueTooLargeError,
)

__all__ = ["MAX_KEY_BYTES", "MAX_NAMESPACE_BYTES", "MAX_VALUE_BYTES", "ContextStore", "Entry"]

MAX_KEY_BYTES = 512
MAX_VALUE_BYTES = 256 * 1024
MAX_NAMESPACE_BYTES = 128
MAX_TENANT_BYTES = 253
MAX_WRITER_BYTES = 253
MAX_TRUST_BYTES = 128  # A GitHub login (39) and an association (22), with their labels.
# Upper bound for one recent()/list_prefix() answer; the API paginates beyond it.
MAX_LIST = 1000


def _check_size(what: str, text: str, limit: int, *, empty_ok: bool = False) -> bytes:
    raw = text.encode("utf-8")
    if not raw and not empty_ok:
        raise InvalidKeyError(f"{what} must not be empty")
    if len(raw) > limit:
        raise InvalidKeyError(f"{what} is {len(raw)} bytes, over the limit of {limit} bytes")
    return raw


def _check_scope(tenant: str, namespace: str) -> None:
    _check_size("tenant", tenant, MAX_TENANT_BYTES)
    _check_size("namespace", namespace, MAX_NAMESPACE_BYTES)


def _check_value(value: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > MAX_VALUE_BYTES:
        raise ValueTooLargeError("value", len(raw), MAX_VALUE_BYTES)
    return raw


def _ttl_ms(ttl_seconds: float) -> int:
    if ttl_seconds <= 0:
        raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
    return max(1, round(ttl_seconds * 1000))


class ContextStore:
    """Async access to the shared context store; every call is scoped by tenant."""

    def __init__(self, redis: Redis, *, max_entries: int = 0, max_bytes: int = 0) -> None:
        """``max_entries``/``max_bytes``: the per-tenant quota (0: no limit)."""
        self._redis = redis
        self._quota = (max_entries, max_bytes)
        self._upsert = redis.register_script(entries.UPSERT)
        self._extend = redis.register_script(entries.EXTEND)
        self._delete = redis.register_script(entries.DELETE)
        self._prune = redis.register_script(entries.PRUNE)

    @staticmethod
    def _index_keys(tenant: str, namespace: str) -> list[str]:
        """The namespace's three indexes, then the tenant's quota tally and sizes."""
        return [
            keys.context_recent(tenant, namespace),
            keys.context_lex(tenant, namespace),
            keys.context_expiry(tenant, namespace),
            keys.context_tally(tenant),
            keys.context_sizes(tenant),
        ]

    @staticmethod
    def _entry_key(tenant: str, namespace: str, key: str) -> str:
        _check_scope(tenant, namespace)
        _check_size("key", key, MAX_KEY_BYTES)
        return keys.context_entry(tenant, namespace, key)

    async def upsert(
        self,
        tenant: str,
        namespace: str,
        key: str,
        value: str,
        *,
        writer: str,
        ttl_seconds: float | None,
        trust: str | None = None,
        extend: bool = False,
    ) -> Entry:
        """Create or replace; keeps ``created``, sets the new expiry or removes the old.

        ``trust`` is the writer's trust mark (``prompts/rules/storetrust.py``), stored with the
        writer's name. ``extend``: keep the entry's own expiry when it is later than the
        new one, and keep an entry without one (``persistent``) without one.
        """
        entry_key = self._entry_key(tenant, namespace, key)
        _check_size("writer", writer, MAX_WRITER_BYTES)
        if trust is not None:
            _check_size("trust mark", trust, MAX_TRUST_BYTES)
        raw_writer = entries.stored_writer(writer, trust)
        body = raw_writer + _check_value(value)
        ttl = "" if ttl_seconds is None else str(_ttl_ms(ttl_seconds))
        try:
            answer = await self._upsert(
                keys=[entry_key, *self._index_keys(tenant, namespace)],
                args=[key, body, len(raw_writer), ttl, *self._quota, "1" if extend else "0"],
            )
        except OutOfMemoryError as exc:
            raise StoreFullError(
                "the store is full (Redis is at its memory limit and evicts nothing); "
                "retry after entries expire or are deleted"
            ) from exc
        if answer[0] == entries.QUOTA_REFUSED:
            what, used, limit = answer[1].decode(), int(answer[2]), int(answer[3])
            raise QuotaExceededError(tenant, what, used, limit)
        created, updated, expires = answer
        return Entry(
            namespace=namespace,
            key=key,
            value=value,
            writer=writer,
            created=int(created) / 1e6,
            updated=int(updated) / 1e6,
            expires_at=entries.expires_from_ms(expires),
            trust=trust,
        )

    async def write_and_extend(
        self,
        tenant: str,
        namespace: str,
        key: str,
        value: str,
        *,
        writer: str,
        ttl_seconds: float = keys.DEFAULT_CONTEXT_TTL_SECONDS,
        trust: str | None = None,
    ) -> Entry:
        """Seed 000's ``setWithExtension``: write and push the expiry forward, never
        shortening it and never giving a persistent entry one."""
        return await self.upsert(
            tenant,
            namespace,
            key,
            value,
            writer=writer,
            ttl_seconds=ttl_seconds,
            trust=trust,
            extend=True,
        )

    async def get(self, tenant: str, namespace: str, key: str) -> Entry | None:
        blob = await self._redis.get(self._entry_key(tenant, namespace, key))
        return None if blob is None else entries.decode(namespace, key, blob)

    async def get_and_extend(
        self,
        tenant: str,
        namespace: str,
        key: str,
        ttl_seconds: float = keys.DEFAULT_CONTEXT_TTL_SECONDS,
    ) -> Entry | None:
        """Read and extend in one step: knowledge that is used keeps living."""
        blob = await self._run_extend(tenant, namespace, key, ttl_seconds, want_entry=True)
        return entries.decode(namespace, key, blob) if isinstance(blob, bytes) else None

    async def touch(self, tenant: str, namespace: str, key: str, ttl_seconds: float) -> bool:
        """Extend the expiry without rewriting; False when the entry does not exist.

        Like :meth:`get_and_extend` it never shortens an expiry and never gives an entry
        without one an expiry: "extend" must not make anything die sooner.
        """
        return bool(await self._run_extend(tenant, namespace, key, ttl_seconds, want_entry=False))

    async def _run_extend(
        self, tenant: str, namespace: str, key: str, ttl_seconds: float, *, want_entry: bool
    ) -> Any:
        entry_key = self._entry_key(tenant, namespace, key)
        return await self._extend(
            keys=[entry_key, keys.context_expiry(tenant, namespace), keys.context_tally(tenant)],
            args=[key, _ttl_ms(ttl_seconds), "1" if want_entry else "0"],
        )

    async def get_json(self, tenant: str, namespace: str, key: str) -> Any:
        """The value parsed as JSON; None when absent, :class:`NotJSONError` when not JSON."""
        entry = await self.get(tenant, namespace, key)
        return None if entry is None else entry.json_value()

    async def delete(self, tenant: str, namespace: str, key: str) -> bool:
        entry_key = self._entry_key(tenant, namespace, key)
        removed = await self._delete(
            keys=[entry_key, *self._index_keys(tenant, namespace)], args=[key]
        )
        return bool(removed)

    async def recent(self, tenant: str, namespace: str, n: int) -> list[Entry]:
        """The ``n`` most recently updated live entries, newest first."""
        _check_scope(tenant, namespace)
        n = min(max(n, 0), MAX_LIST)
        found: list[Entry] = []
        start = 0
        while len(found) < n:
            stop = start + (n - len(found)) - 1
            members = await self._redis.zrevrange(
                keys.context_recent(tenant, namespace), start, stop
            )
            if not members:
                break
            live, stale = await self._load(tenant, namespace, members)
            found.extend(live)
            # Pruned rows shift later ranks down, so the next page starts that much earlier.
            start += len(members) - await self._prune_members(tenant, namespace, stale)
        return found

    async def list_prefix(
        self, tenant: str, namespace: str, prefix: str, limit: int = 100
    ) -> list[Entry]:
        """Live entries whose key starts with ``prefix`` as literal text, in key order."""
        _check_scope(tenant, namespace)
        raw = _check_size("prefix", prefix, MAX_KEY_BYTES, empty_ok=True)
        limit = min(max(limit, 0), MAX_LIST)
        # No valid UTF-8 contains 0xff, so every key starting with the prefix sorts below it.
        low, high = b"[" + raw, b"(" + raw + b"\xff"
        found: list[Entry] = []
        while len(found) < limit:
            members = await self._redis.zrangebylex(
                keys.context_lex(tenant, namespace), low, high, start=0, num=limit - len(found)
            )
            if not members:
                break
            live, stale = await self._load(tenant, namespace, members)
            found.extend(live)
            await self._prune_members(tenant, namespace, stale)
            low = b"(" + members[-1]
        return found

    async def cleanup_expired(self, tenant: str, namespace: str) -> int:
        """Remove index rows of expired entries; returns how many entries were pruned."""
        _check_scope(tenant, namespace)
        seconds, micros = await self._redis.time()
        now_ms = seconds * 1000 + micros // 1000
        removed = 0
        while True:
            members = await self._redis.zrangebyscore(
                keys.context_expiry(tenant, namespace), "-inf", now_ms, start=0, num=500
            )
            pruned = await self._prune_members(tenant, namespace, members)
            removed += pruned
            # Nothing due, or only entries Redis has not reaped yet: the next run gets those.
            if pruned == 0:
                return removed

    async def _load(
        self, tenant: str, namespace: str, members: Sequence[bytes]
    ) -> tuple[list[Entry], list[bytes]]:
        names = [m.decode("utf-8") for m in members]
        blobs = await self._redis.mget([keys.context_entry(tenant, namespace, n) for n in names])
        live: list[Entry] = []
        stale: list[bytes] = []
        for member, name, blob in zip(members, names, blobs, strict=True):
            if blob is None:
                stale.append(member)
            else:
                live.append(entries.decode(namespace, name, blob))
        return live, stale

    async def _prune_members(self, tenant: str, namespace: str, members: Sequence[bytes]) -> int:
        if not members:
            return 0
        entry_keys = [keys.context_entry(tenant, namespace, m.decode("utf-8")) for m in members]
        removed = await self._prune(
            keys=[*self._index_keys(tenant, namespace), *entry_keys], args=list(members)
        )
        return int(removed)
