"""The spans recorded and not yet exported: a Redis list, claimed once per span.

A span is recorded at the moment what it describes has ended, by code that a crash may
replay (a hop, a delivery).  :meth:`Outbox.record` claims the span's ids and appends it
in one Lua step, so a replay records nothing twice; the list is durable, so a SIGKILL
between a hop and the export loses nothing.  The list is bounded
(``store.keys.TRACE_OUTBOX_MAX``): with no collector for long, the oldest spans go first.

One exporter at a time drains it (``traces/exporting``).  The leader alone runs one,
but during a failover an old leader, frozen and woken, runs a moment longer next to the
new one; two exporters reading the same head would each send it and each trim it, one
batch twice and the next one never.  So an exporter holds a lease in Redis
(``keys.TRACE_EXPORTER``) and takes its batch out of the outbox into the ``sending``
list in the same Lua step that checks and renews the lease; it removes the batch once
the collector accepted it, and only while still holding the lease.  A batch an exporter
could not send (its collector down, or its process gone) stays in ``sending`` and is the
next batch whoever holds the lease sends, so nothing is lost.  A batch goes out twice
only when its exporter died, was stopped, or froze past its lease after the collector
accepted it and before it removed it.
"""

from __future__ import annotations

import uuid

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

# The lease is checked and renewed in the step that takes the batch: no other exporter
# can take it between the two.  A batch left in ``sending`` is sent again before any new.
_CLAIM = """
local owner = redis.call('GET', KEYS[1])
if owner and owner ~= ARGV[1] then
  return false
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if redis.call('LLEN', KEYS[3]) == 0 then
  local items = redis.call('LRANGE', KEYS[2], 0, tonumber(ARGV[3]) - 1)
  if #items == 0 then
    return {}
  end
  redis.call('RPUSH', KEYS[3], unpack(items))
  redis.call('LTRIM', KEYS[2], #items, -1)
end
return redis.call('LRANGE', KEYS[3], 0, -1)
"""

_SENT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class Outbox:
    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        max_spans: int = keys.TRACE_OUTBOX_MAX,
        lease_ms: int = keys.TRACE_EXPORTER_LEASE_MS,
    ) -> None:
        self._redis = redis
        self._max = max_spans
        self._lease_ms = lease_ms
        # This process's name in the exporter lease: a restarted process is a new one.
        self.owner = uuid.uuid4().hex
        self._record = redis.register_script(_RECORD)
        self._claim = redis.register_script(_CLAIM)
        self._sent = redis.register_script(_SENT)
        self._release = redis.register_script(_RELEASE)

    async def record(self, span: Span) -> bool:
        """Put ``span`` in the outbox unless it was recorded before; True if it was put."""
        claim = keys.trace_span(*span.ids())
        args: list[str | int] = [span.to_json(), keys.TRACE_SPAN_TTL_SECONDS, self._max]
        return bool(await self._record(keys=[claim, keys.TRACE_OUTBOX], args=args))

    async def claim(self, count: int) -> list[Span] | None:
        """The batch to send, oldest first (at most ``count`` new spans, or the batch left
        unsent before); None while another exporter holds the lease."""
        names = [keys.TRACE_EXPORTER, keys.TRACE_OUTBOX, keys.TRACE_SENDING]
        raw = await self._claim(keys=names, args=[self.owner, self._lease_ms, count])
        if raw is None:
            return None
        return [Span.from_json(item) for item in raw]

    async def sent(self) -> bool:
        """Forget the claimed batch: it was exported.  False if the lease was lost
        meanwhile (the batch is then the new holder's to send)."""
        names = [keys.TRACE_EXPORTER, keys.TRACE_SENDING]
        return bool(await self._sent(keys=names, args=[self.owner]))

    async def release(self) -> None:
        """Give the lease up (a clean stop), so the next exporter need not wait for it
        to lapse; an unsent batch stays for it."""
        await self._release(keys=[keys.TRACE_EXPORTER], args=[self.owner])

    async def head(self, count: int) -> list[Span]:
        """The oldest ``count`` spans waiting in the outbox, oldest first (left in place)."""
        raw = await self._redis.lrange(keys.TRACE_OUTBOX, 0, count - 1)  # type: ignore[misc]
        return [Span.from_json(item) for item in raw]

    async def waiting(self) -> int:
        """Spans not yet exported: in the outbox and in the batch being sent."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.llen(keys.TRACE_OUTBOX)
        pipe.llen(keys.TRACE_SENDING)
        return sum(int(n) for n in await pipe.execute())
