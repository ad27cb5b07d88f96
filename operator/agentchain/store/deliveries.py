"""Webhook delivery dedup and the durable queue of AgentJobs it accepted (SPEC §7).

GitHub redelivers on timeouts and on request from the UI, and several operator replicas
(or one restarted operator) may see the same delivery. Each (hook id, ``X-GitHub-Delivery``)
acts once: the first caller claims the delivery, and later callers receive the job names
the winner recorded, which the webhook returns as its 202 body again.

:meth:`DeliveryLog.accept` is the webhook's one Redis step: a Lua script that, atomically,
either claims the delivery (record for :data:`~agentchain.store.keys.DELIVERY_TTL_SECONDS`,
72 h) and queues the planned AgentJob bodies, or, when the delivery is already recorded,
queues again only the recorded jobs and answers the record. So a 202 is never answered
for a delivery whose jobs are not durably queued, and no number of concurrent or repeated
deliveries queues a job the first one did not decide on. Queueing is idempotent: one
entry per job name, whatever the number of redeliveries. Concurrent calls are sent
together, one pipeline per event-loop turn or per :data:`BATCH_MAX` calls (each script
still atomic on its own): under a burst of deliveries that is one round trip per batch
instead of one per delivery, and Redis works on a batch while the next is prepared.

:class:`JobQueue` is the dispatcher's side: per namespace, a sorted set (job name → the
time it is next due) and a hash (job name → body). :meth:`JobQueue.take` leases due
entries by pushing their score ahead, so in-flight entries are not taken again and an
entry whose dispatcher died comes back when the lease runs out; :meth:`JobQueue.reclaim`
makes every entry due at once (a starting dispatcher: whoever held those leases is
gone); an entry is removed (:meth:`JobQueue.done`) only after its create succeeded or
failed for good. Queue keys are per namespace, like every tenant's key, so operators (or
tests) serving different namespaces on one Redis never drain each other's entries; a
cluster-wide dispatcher finds the namespaces in ``keys.WEBHOOK_QUEUE_NAMESPACES``.

The delivery record is not tenant-scoped (unlike every other key): one delivery can start
agents in several namespaces, so it holds ``namespace/name`` strings. It survives operator
restarts because it lives in Redis. :meth:`DeliveryLog.release` exists for the one case
where the winner created nothing and wants a redelivery to be able to try again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from agentchain.store import keys

# KEYS[1] delivery record, KEYS[2] namespace index, then per job: its queue, its body hash.
# ARGV[1] record, ARGV[2] record TTL, ARGV[3] now, ARGV[4] queue TTL, then per job:
# namespace, name, body. Answers the previous record (nil when this call claimed it).
_ACCEPT = """
local previous = redis.call('GET', KEYS[1])
local recorded = nil
if previous then
  recorded = {}
  for _, key in ipairs(cjson.decode(previous)) do recorded[key] = true end
else
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
end
for i = 0, (#KEYS - 2) / 2 - 1 do
  local namespace, name = ARGV[5 + 3 * i], ARGV[6 + 3 * i]
  if not recorded or recorded[namespace .. '/' .. name] then
    local queue, bodies = KEYS[3 + 2 * i], KEYS[4 + 2 * i]
    redis.call('ZADD', queue, 'NX', ARGV[3], name)
    redis.call('HSET', bodies, name, ARGV[7 + 3 * i])
    redis.call('SADD', KEYS[2], namespace)
    redis.call('EXPIRE', queue, ARGV[4])
    redis.call('EXPIRE', bodies, ARGV[4])
    redis.call('EXPIRE', KEYS[2], ARGV[4])
  end
end
return previous
"""

# KEYS: per namespace its queue and body hash. ARGV[1] now, ARGV[2] lease end,
# ARGV[3] most entries per namespace. Answers {{index, name, body, ...}, earliest score}.
_TAKE = """
local taken = {}
local earliest = nil
for i = 1, #KEYS, 2 do
  local due = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
  for _, name in ipairs(due) do
    local body = redis.call('HGET', KEYS[i + 1], name)
    if body then
      redis.call('ZADD', KEYS[i], 'XX', ARGV[2], name)
      table.insert(taken, (i + 1) / 2)
      table.insert(taken, name)
      table.insert(taken, body)
    else
      redis.call('ZREM', KEYS[i], name)
    end
  end
  local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if first[2] and (earliest == nil or tonumber(first[2]) < earliest) then
    earliest = tonumber(first[2])
  end
end
return {taken, earliest and string.format('%.3f', earliest) or false}
"""

# KEYS[1] queue, KEYS[2] body hash, KEYS[3] namespace index; ARGV[1] name, ARGV[2] namespace.
_DONE = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], ARGV[2]) end
"""

# KEYS: queues. ARGV[1] now. Every entry leased or waiting to be retried becomes due now.
_RECLAIM = """
local moved = 0
for i = 1, #KEYS do
  for _, name in ipairs(redis.call('ZRANGEBYSCORE', KEYS[i], '(' .. ARGV[1], '+inf')) do
    redis.call('ZADD', KEYS[i], 'XX', ARGV[1], name)
    moved = moved + 1
  end
end
return moved
"""


_Call = tuple[list[str], list[str], "asyncio.Future[Any]"]
# Accepts sent in one pipeline at most; a fuller batch goes at once, not at the loop turn.
BATCH_MAX = 256


def _decode(raw: bytes) -> list[str]:
    names = json.loads(raw)
    return [str(name) for name in names]


def _score(when: float) -> str:
    return f"{when:.3f}"


@dataclass(frozen=True)
class QueuedJob:
    """An AgentJob to create: where, under which deterministic name, and its body."""

    namespace: str
    name: str
    body: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class DeliveryLog:
    """First-caller-wins claims of webhook deliveries, and queueing their jobs."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._accept = redis.register_script(_ACCEPT)
        self._pending: list[_Call] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def accept(
        self, hook_id: str, delivery_id: str, jobs: Sequence[QueuedJob], *, now: float | None = None
    ) -> tuple[bool, list[str]]:
        """Claim the delivery and queue ``jobs``, or queue again the recorded ones, atomically.

        ``(True, [job keys])`` for the first caller; ``(False, keys recorded)`` after that,
        and then only the ``jobs`` whose ``namespace/name`` is recorded were queued.
        """
        names = [job.key for job in jobs]
        job_keys: list[str] = [keys.delivery(hook_id, delivery_id), keys.WEBHOOK_QUEUE_NAMESPACES]
        args = [
            json.dumps(names),
            str(keys.DELIVERY_TTL_SECONDS),
            _score(time.time() if now is None else now),
            str(keys.WEBHOOK_QUEUE_TTL_SECONDS),
        ]
        for job in jobs:
            job_keys += [keys.webhook_queue(job.namespace), keys.webhook_queue_body(job.namespace)]
            args += [job.namespace, job.name, json.dumps(job.body, separators=(",", ":"))]
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((job_keys, args, future))
        if len(self._pending) >= BATCH_MAX:
            self._flush()  # Redis starts on these while later deliveries are still parsed.
        elif len(self._pending) == 1:
            # On the next loop turn: every accept made in this one joins the batch.
            asyncio.get_running_loop().call_soon(self._flush)
        previous = await future
        if isinstance(previous, bytes):
            return False, _decode(previous)
        return True, names

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.create_task(self._send(batch))
            self._sending.add(task)  # Keep a reference until it is done.
            task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[_Call]) -> None:
        try:
            results = await self._execute(batch)
        except Exception as exc:  # Redis down: every caller of the batch learns it.
            results = [exc] * len(batch)
        except BaseException:
            for _, _, future in batch:
                future.cancel()
            raise
        for (_, _, future), result in zip(batch, results, strict=True):
            if future.done():  # Its caller gave up (timeout, disconnect).
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def _execute(self, batch: list[_Call]) -> list[Any]:
        results: list[Any] = [None] * len(batch)
        todo = list(range(len(batch)))
        for _ in range(2):  # A second pass only if Redis forgot the script (restart, flush).
            async with self._redis.pipeline(transaction=False) as pipe:
                for i in todo:
                    script_keys, args, _ = batch[i]
                    pipe.evalsha(self._accept.sha, len(script_keys), *script_keys, *args)
                answers = await pipe.execute(raise_on_error=False)
            for i, answer in zip(todo, answers, strict=True):
                results[i] = answer
            todo = [i for i in todo if isinstance(results[i], NoScriptError)]
            if not todo:
                break
            await self._redis.script_load(_ACCEPT)
        return results

    async def claim(
        self, hook_id: str, delivery_id: str, job_names: list[str]
    ) -> tuple[bool, list[str]]:
        """``(True, job_names)`` for the first caller, else ``(False, names recorded)``."""
        previous = await self._redis.set(
            keys.delivery(hook_id, delivery_id),
            json.dumps(job_names),
            nx=True,
            get=True,
            ex=keys.DELIVERY_TTL_SECONDS,
        )
        # With GET, Redis answers the old value when NX refused, and nil when we set it.
        if isinstance(previous, bytes):
            return False, _decode(previous)
        return True, list(job_names)

    async def record(self, hook_id: str, delivery_id: str, job_names: list[str]) -> None:
        """Replace the recorded job names (e.g. once the jobs exist), keeping the claim."""
        await self._redis.set(
            keys.delivery(hook_id, delivery_id),
            json.dumps(job_names),
            xx=True,
            keepttl=True,
        )

    async def get(self, hook_id: str, delivery_id: str) -> list[str] | None:
        raw = await self._redis.get(keys.delivery(hook_id, delivery_id))
        return None if raw is None else _decode(raw)

    async def release(self, hook_id: str, delivery_id: str) -> bool:
        """Forget a claim so a redelivery can act; only for claims that created nothing."""
        return bool(await self._redis.delete(keys.delivery(hook_id, delivery_id)))


class JobQueue:
    """The dispatcher's view of the queued AgentJobs of ``namespaces`` (empty: all)."""

    def __init__(self, redis: Redis, namespaces: Sequence[str] = ()) -> None:
        self._redis = redis
        self._namespaces = tuple(namespaces)
        self._take = redis.register_script(_TAKE)
        self._done = redis.register_script(_DONE)
        self._reclaim = redis.register_script(_RECLAIM)

    async def namespaces(self) -> list[str]:
        """The served namespaces, or (cluster-wide) those that may have queued entries."""
        if self._namespaces:
            return list(self._namespaces)
        members = await self._redis.smembers(keys.WEBHOOK_QUEUE_NAMESPACES)  # type: ignore[misc]
        return sorted(m.decode("utf-8") for m in members)

    async def take(
        self, limit: int, lease_seconds: float, *, now: float | None = None
    ) -> tuple[list[QueuedJob], float | None]:
        """Lease up to ``limit`` due entries; also the earliest score left (None: empty)."""
        namespaces = await self.namespaces()
        if not namespaces:
            return [], None
        now = time.time() if now is None else now
        per_namespace = max(1, -(-limit // len(namespaces)))  # Fair share, rounded up.
        queue_keys: list[str] = []
        for namespace in namespaces:
            queue_keys += [keys.webhook_queue(namespace), keys.webhook_queue_body(namespace)]
        taken, earliest = await self._take(
            keys=queue_keys, args=[_score(now), _score(now + lease_seconds), per_namespace]
        )
        jobs = [
            QueuedJob(
                namespaces[int(taken[i]) - 1],
                taken[i + 1].decode("utf-8"),
                json.loads(taken[i + 2]),
            )
            for i in range(0, len(taken), 3)
        ]
        return jobs, None if earliest is None else float(earliest)

    async def done(self, namespace: str, name: str) -> None:
        """Remove an entry: its create succeeded, or failed in a way retrying cannot fix."""
        await self._done(
            keys=[
                keys.webhook_queue(namespace),
                keys.webhook_queue_body(namespace),
                keys.WEBHOOK_QUEUE_NAMESPACES,
            ],
            args=[name, namespace],
        )

    async def retry_at(self, namespace: str, name: str, when: float) -> None:
        """Keep an entry but not due before ``when`` (a back-off after a transient failure)."""
        await self._redis.zadd(keys.webhook_queue(namespace), {name: when}, xx=True)

    async def reclaim(self, *, now: float | None = None) -> int:
        """Make every entry due now, whatever its lease or back-off; how many moved."""
        namespaces = await self.namespaces()
        if not namespaces:
            return 0
        now = time.time() if now is None else now
        queues = [keys.webhook_queue(namespace) for namespace in namespaces]
        return int(await self._reclaim(keys=queues, args=[_score(now)]))

    async def pending(self, namespace: str) -> int:
        """Entries of ``namespace`` not yet removed (queued, leased or backing off)."""
        return int(await self._redis.zcard(keys.webhook_queue(namespace)))
