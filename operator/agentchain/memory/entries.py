"""How one context-store entry is laid out in Redis, and the scripts that change it.

An entry is a single Redis *string*, not a hash: a point read is then one ``GET`` with
one bulk reply, which redis-py parses several times faster than the ten replies of an
``HGETALL`` (bench/bench_store.py measures the difference against raw ``GET``). The
string is a fixed-width ASCII header followed by the writer and the value::

    CCCCCCCCCCCCCCCC UUUUUUUUUUUUUUUU EEEEEEEEEEEEE <len(writer)>\\n<writer><value>

``<writer>`` is the writer's name, then, for an entry written since entries carry one,
:data:`TRUST_SEPARATOR` and the writer's trust mark (``prompts/rules/storetrust.py``: whose
word the entry is, which decides the prompts it may reach); the API shows the name.
``C``/``U`` are created/updated in µs since the epoch (16 digits), ``E`` the expiry in ms
(13 digits, all zeros = never). Fixed widths (good until the year 2286) let a script
rewrite the expiry in place with ``SETRANGE`` (touch extends without rewriting the
value), and let a reader slice instead of parse. The string carries a real Redis TTL
equal to ``E``, so Redis is the authority on expiry and an expired entry is never read.

All times come from Redis's ``TIME`` inside the scripts, so writers on several operator
replicas agree with the clock that also drives expiry.

Quota: per tenant (Kubernetes namespace), across all its store namespaces, a tally of
its entries (a sorted set: entry key → expiry ms, :data:`NEVER` for persistent ones)
and of their sizes (a hash: entry key → bytes, plus ``#total``). Every script that
writes, extends or removes an entry keeps the tally in step, in the same atomic step.
Expired entries leave the tally at the next write (each once, so the work is linear in
the writes), so an upsert sees the live count and size and refuses, before writing
anything, one that would pass the tenant's limits. An entry's size is the bytes of its
key, writer and value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentchain.store.storeerrors import NotJSONError

_CREATED = slice(0, 16)
_UPDATED = slice(17, 33)
_EXPIRES = slice(34, 47)
_WRITER_LEN_AT = 48
TRUST_SEPARATOR = "\x1f"
"""Between the writer's name and its trust mark: no Kubernetes name, GitHub login or
author association holds it."""

# The tally score of an entry without expiry (year 9999, in ms).
NEVER = 253402300799000
QUOTA_REFUSED = b"quota"

# KEYS = entry, recent, lex, expiry, tenant tally, tenant sizes; ARGV = member,
# writer .. value, len(writer), ttl ms ('' = none), most entries, most bytes (0 = no
# limit), '1' to extend. SET without PXAT drops any old TTL, so an update never keeps a
# stale expiry; the body is APPENDed so Lua never builds (and hashes) a copy of the
# value. Extending (a plain write) keeps a later expiry, or none, that a live entry
# already has: write-and-extend never makes an entry die sooner. Over a limit it
# answers {'quota', what, in use, limit} and writes nothing.
UPSERT = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. now_ms)) do
  local size = tonumber(redis.call('HGET', KEYS[6], gone)) or 0
  redis.call('HDEL', KEYS[6], gone)
  redis.call('HINCRBY', KEYS[6], '#total', -size)
  redis.call('ZREM', KEYS[5], gone)
end
local size = #ARGV[1] + #ARGV[2]
local got = redis.call('HMGET', KEYS[6], KEYS[1], '#total')
local old = tonumber(got[1]) or 0
local count = redis.call('ZCARD', KEYS[5]) + (got[1] and 0 or 1)
local total = (tonumber(got[2]) or 0) - old + size
if tonumber(ARGV[5]) > 0 and count > tonumber(ARGV[5]) then
  return {'quota', 'entries', count - 1, ARGV[5]}
end
if tonumber(ARGV[6]) > 0 and total > tonumber(ARGV[6]) then
  return {'quota', 'bytes', total - size, ARGV[6]}
end
local updated = string.format('%016.0f', now_us)
local created = redis.call('GETRANGE', KEYS[1], 0, 15)
local existed = created ~= ''
if not existed then created = updated end
local expires = 0
if ARGV[4] ~= '' then expires = math.floor(now_us / 1000) + tonumber(ARGV[4]) end
if existed and ARGV[7] == '1' then
  local had = tonumber(redis.call('GETRANGE', KEYS[1], 34, 46))
  if had == 0 or had > expires then expires = had end
end
local e = string.format('%013.0f', expires)
local header = created .. ' ' .. updated .. ' ' .. e .. ' ' .. ARGV[3] .. '\\n'
if expires > 0 then
  redis.call('SET', KEYS[1], header, 'PXAT', string.format('%.0f', expires))
  redis.call('ZADD', KEYS[4], string.format('%.0f', expires), ARGV[1])
else
  redis.call('SET', KEYS[1], header)
  if existed then redis.call('ZREM', KEYS[4], ARGV[1]) end
end
redis.call('APPEND', KEYS[1], ARGV[2])
local never = '253402300799000'  -- NEVER
redis.call('ZADD', KEYS[5], expires > 0 and string.format('%.0f', expires) or never, KEYS[1])
if size ~= old then
  redis.call('HSET', KEYS[6], KEYS[1], size, '#total', total)
end
redis.call('ZADD', KEYS[2], updated, ARGV[1])
-- A live entry always has its lex row (only PRUNE removes rows, and only of dead entries).
if not existed then redis.call('ZADD', KEYS[3], 0, ARGV[1]) end
return {created, updated, e}
"""

# KEYS = entry, expiry, tenant tally; ARGV = member, ttl ms, '1' to return the entry.
# Pushes the expiry to now + ttl, never shortening it and never giving a persistent
# entry an expiry it did not have. Returns false when the entry does not exist.
EXTEND = """
local blob = redis.call('GET', KEYS[1])
if not blob then return false end
local e = tonumber(string.sub(blob, 35, 47))
if e > 0 then
  local t = redis.call('TIME')
  local want = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
  if want > e then
    local padded = string.format('%013.0f', want)
    redis.call('SETRANGE', KEYS[1], 34, padded)
    redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', want))
    redis.call('ZADD', KEYS[2], string.format('%.0f', want), ARGV[1])
    redis.call('ZADD', KEYS[3], 'XX', string.format('%.0f', want), KEYS[1])
    blob = string.sub(blob, 1, 34) .. padded .. string.sub(blob, 48)
  end
end
if ARGV[3] == '1' then return blob end
return 1
"""

# Takes entry key KEYS[i] out of the tenant tally KEYS[t] and sizes KEYS[t + 1].
_UNTALLY = """
local function untally(entry, t)
  local size = tonumber(redis.call('HGET', KEYS[t + 1], entry)) or 0
  if redis.call('ZREM', KEYS[t], entry) + redis.call('HDEL', KEYS[t + 1], entry) > 0 then
    redis.call('HINCRBY', KEYS[t + 1], '#total', -size)
  end
end
"""

# KEYS = entry, recent, lex, expiry, tenant tally, tenant sizes; ARGV = member.
DELETE = (
    _UNTALLY
    + """
local n = redis.call('DEL', KEYS[1])
for i = 2, 4 do redis.call('ZREM', KEYS[i], ARGV[1]) end
untally(KEYS[1], 5)
return n
"""
)

# KEYS = recent, lex, expiry, tenant tally, tenant sizes, entry_1..entry_n;
# ARGV = member_1..member_n. Re-checks existence inside the script so it cannot undo a
# concurrent upsert's index rows.
PRUNE = (
    _UNTALLY
    + """
local removed = 0
for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[5 + i]) == 0 then
    for j = 1, 3 do redis.call('ZREM', KEYS[j], ARGV[i]) end
    untally(KEYS[5 + i], 4)
    removed = removed + 1
  end
end
return removed
"""
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored value; times are float epoch seconds, ``expires_at`` None = never."""

    namespace: str
    key: str
    value: str
    writer: str
    created: float
    updated: float
    expires_at: float | None
    trust: str | None = None
    """The writer's trust mark; None for an entry written before entries carried one."""

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "key": self.key,
            "value": self.value,
            "writer": self.writer,
            "created": self.created,
            "updated": self.updated,
            "expiresAt": self.expires_at,
        }

    def json_value(self) -> Any:
        """The value parsed as JSON; :class:`NotJSONError` names the entry otherwise."""
        try:
            return json.loads(self.value)
        except json.JSONDecodeError as exc:
            raise NotJSONError(
                f"value of {self.namespace!r}/{self.key!r} is not valid JSON: {exc}"
            ) from exc


def expires_from_ms(raw: bytes | str) -> float | None:
    millis = int(raw)
    return millis / 1e3 if millis else None


def stored_writer(writer: str, trust: str | None) -> bytes:
    """The writer as stored: its name, then its trust mark if it has one."""
    return (writer if trust is None else f"{writer}{TRUST_SEPARATOR}{trust}").encode("utf-8")


def decode(namespace: str, key: str, blob: bytes) -> Entry:
    """Parse a stored string (see the module docstring for the layout)."""
    newline = blob.index(b"\n", _WRITER_LEN_AT)
    writer_end = newline + 1 + int(blob[_WRITER_LEN_AT:newline])
    writer, separated, trust = (
        blob[newline + 1 : writer_end].decode("utf-8").partition(TRUST_SEPARATOR)
    )
    return Entry(
        namespace=namespace,
        key=key,
        value=blob[writer_end:].decode("utf-8"),
        writer=writer,
        created=int(blob[_CREATED]) / 1e6,
        updated=int(blob[_UPDATED]) / 1e6,
        expires_at=expires_from_ms(blob[_EXPIRES]),
        trust=trust if separated else None,
    )
