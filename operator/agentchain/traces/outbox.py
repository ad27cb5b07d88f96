"""The spans recorded and not yet exported: a Redis list, claimed once per span.

A span is recorded at the moment what it describes has ended, by code that a crash may
replay (a hop, a delivery).  :meth:`Outbox.record` claims the span's ids and appends it
in one Lua step, so a replay records nothing twice; the list is durable, so a SIGKILL
between a hop and the export loses nothing.  One exporter (the leader's,
``traces/exporting``) takes spans from the head and trims them once they are sent.  The
list is bounded (``store.keys.TRACE_OUTBOX_MAX``): with no collector for long, the oldest
spans go first.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from agentchain.store import keys
from agentchain.traces.rules.spans import Span

_RECORD = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
  return 1
end
return 0
"""


class Outbox:
    def __init__(self, redis: aioredis.Redis, *, max_spans: int = keys.TRACE_OUTBOX_MAX) -> None:
        self._redis = redis
        self._max = max_spans
        self._record = redis.register_script(_RECORD)

    async def record(self, span: Span) -> bool:
        """Put ``span`` in the outbox unless it was recorded before; True if it was put."""
        claim = keys.trace_span(*span.ids())
        args: list[str | int] = [span.to_json(), keys.TRACE_SPAN_TTL_SECONDS, self._max]
        return bool(await self._record(keys=[claim, keys.TRACE_OUTBOX], args=args))

    async def head(self, count: int) -> list[Span]:
        """The oldest ``count`` spans waiting, oldest first (left in place)."""
        raw = await self._redis.lrange(keys.TRACE_OUTBOX, 0, count - 1)  # type: ignore[misc]
        return [Span.from_json(item) for item in raw]

    async def sent(self, count: int) -> None:
        """Forget the oldest ``count`` spans: they were exported."""
        await self._redis.ltrim(keys.TRACE_OUTBOX, count, -1)  # type: ignore[misc]

    async def waiting(self) -> int:
        return int(await self._redis.llen(keys.TRACE_OUTBOX))  # type: ignore[misc]
