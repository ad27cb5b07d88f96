"""Stops in Redis: a job's stop decided through its one ending record, and chain stops.

A job's attempt ends once.  Its natural end is recorded by the capture write
(``store/outputs.py``: the ``capture`` field of the output hash, written before the
engine acts on the ending); a stop writes the *same* record, in one Lua step that
writes only when no ending of that attempt (or a later one) is there yet.  So a stop
racing the container's exit resolves to exactly one outcome: whichever record is
there first is the ending, and the loser reads it back (:meth:`StopStore.claim`
answers the record that won).  Every later reader (a replay after a crash, the
resync) decides from that record, never from what is left of the pod.

A chain stop is a small record per chain: jobs of that chain that would start after
it (a child spawned by a job that ended just before the stop) are cancelled instead.
"""

from __future__ import annotations

import json

from redis.asyncio import Redis

from agentchain.store import keys
from agentchain.store.outputs import Capture, OutputRecord, fields, parse_capture

# KEYS[1] the job's output hash; ARGV[1] the attempt, ARGV[2] the TTL, then field/value
# pairs. Answers the ending already recorded for this attempt or a later one, else
# writes the record (replacing an earlier attempt's) and answers nil.
_CLAIM = """
local raw = redis.call('HGET', KEYS[1], 'capture')
if raw then
  local ok, found = pcall(cjson.decode, raw)
  if ok and tonumber(found['attempt']) and tonumber(found['attempt']) >= tonumber(ARGV[1]) then
    return raw
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return false
"""


_DELETED = "stopDeletedJob"
"""The field of the output hash that says a stop deleted the attempt's batch Job: a
second look at the stop (another event, the resync) deletes nothing more."""


class StopStore:
    """Job stop claims (on the output record) and chain stop records."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._claim = redis.register_script(_CLAIM)

    async def claim(
        self, tenant: str, job_name: str, uid: str, record: OutputRecord
    ) -> Capture | None:
        """Record ``record`` (whose capture carries the stop) as the attempt's ending
        unless one is recorded already: None when the stop won, else the ending that did
        (a natural end, or an earlier stop of the same attempt)."""
        assert record.capture is not None and record.capture.stop is not None
        pairs: list[bytes | float | int | str] = []
        for name, value in fields(record).items():
            pairs.extend((name, value))
        won = await self._claim(
            keys=[keys.output(tenant, job_name, uid)],
            args=[record.capture.attempt, keys.OUTPUT_TTL_SECONDS, *pairs],
        )
        return parse_capture(won) if won else None

    async def deleted_job(self, tenant: str, job_name: str, uid: str, attempt: int) -> None:
        """Record, beside the claim, that the stopped attempt's batch Job was deleted."""
        key = keys.output(tenant, job_name, uid)
        await self._redis.hset(key, _DELETED, str(attempt))  # type: ignore[misc]

    async def job_deleted(self, tenant: str, job_name: str, uid: str, attempt: int) -> bool:
        """Whether a stop deleted the batch Job of ``attempt`` (or a later one)."""
        raw = await self._redis.hget(keys.output(tenant, job_name, uid), _DELETED)  # type: ignore[misc]
        return raw is not None and int(raw) >= attempt

    async def stop_chain(
        self, tenant: str, chain_id: str, by: str, reason: str, successor: str | None = None
    ) -> bool:
        """Record the chain's stop; True for the first stop, False when already stopped."""
        value = json.dumps({"by": by, "reason": reason, "successor": successor})
        key = keys.chain_stop(tenant, chain_id)
        first = await self._redis.set(key, value, nx=True, ex=keys.CHAIN_TTL_SECONDS)
        return bool(first)

    async def chain_stopped(self, tenant: str, chain_id: str) -> dict[str, str | None] | None:
        """The chain's stop ({by, reason, successor}), or None."""
        raw = await self._redis.get(keys.chain_stop(tenant, chain_id))
        if raw is None:
            return None
        data = json.loads(raw)
        successor = data.get("successor")
        return {
            "by": str(data.get("by") or ""),
            "reason": str(data.get("reason") or ""),
            "successor": str(successor) if successor else None,
        }
