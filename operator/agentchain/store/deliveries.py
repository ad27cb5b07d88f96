"""Webhook delivery dedup and the durable queue of AgentJobs it accepted (SPEC §7).

GitHub redelivers on timeouts and on request from the UI, and several operator replicas
(or one restarted operator) may see the same delivery. A delivery acts once, and its
content is fixed by the first accepted copy. Two facts identify it, claimed together:

* its ``X-GitHub-Delivery`` id, which GitHub keeps when it redelivers; and
* the sha256 of its signed body: the headers are not signed, so the same signed body
  re-sent under another delivery id or ``X-GitHub-Hook-ID`` is the same delivery.

``X-GitHub-Hook-ID`` is not part of either, so two hooks (say an organisation's and a
repository's) that deliver the identical body, or the same delivery id, start one chain:
the first copy to arrive starts it and the other is answered as its duplicate.

:meth:`DeliveryLog.accept` is the webhook's one Redis step: a Lua script that,
atomically, either claims both (one record ``{jobs, sha256}`` under each, for
:data:`~agentchain.store.keys.DELIVERY_TTL_SECONDS`, 72 h) and queues the planned
AgentJob bodies, or, when either is already recorded, answers the record. A redelivery
of the recorded body under the recorded id also queues again the recorded jobs (only
those, and never replacing a body still queued), which completes a delivery whose
dispatch failed; any other duplicate queues nothing. So a 202 is never answered for a
delivery whose jobs are not durably queued, and no number of concurrent or repeated
deliveries queues a job, or a body, the first one did not decide on. Concurrent calls
are sent together, one pipeline per event-loop turn or per :data:`BATCH_MAX` calls
(each script still atomic on its own): under a burst of deliveries that is one round
trip per batch instead of one per delivery.

Queued bodies are sealed: an HMAC under the operator key (``signing.py``) over
namespace, name and body. Redis never sees the key, so whoever can write to Redis still
cannot queue an AgentJob: the dispatcher opens each entry (:meth:`LeasedJob.open`) and
drops one whose seal does not match.

:class:`JobQueue` is the dispatcher's side: per namespace, a sorted set (job name → the
time it is next due) and a hash (job name → sealed body). :meth:`JobQueue.take` leases
due entries by pushing their score ahead, so in-flight entries are not taken again and
an entry whose dispatcher died comes back when the lease runs out;
:meth:`JobQueue.reclaim` makes every entry due at once (a starting dispatcher: whoever
held those leases is gone); an entry is removed (:meth:`JobQueue.done`) only after its
create succeeded or failed for good. Queue keys are per namespace, like every tenant's
key, so operators (or tests) serving different namespaces on one Redis never drain each
other's entries; a cluster-wide dispatcher finds the namespaces in
``keys.WEBHOOK_QUEUE_NAMESPACES``.

The delivery record is not tenant-scoped (unlike every other key): one delivery can
start agents in several namespaces, so it holds ``namespace/name`` strings.
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

from agentchain.store import keys, signing
from agentchain.store.signing import OperatorKeys

# KEYS[1] record by delivery id, KEYS[2] record by body digest, KEYS[3] namespace index,
# then per job: its queue, its body hash. ARGV[1] record, ARGV[2] record TTL, ARGV[3] now,
# ARGV[4] queue TTL, ARGV[5] body digest, then per job: namespace, name, sealed body.
# Answers the previous record (nil when this call claimed both).
_ACCEPT = """
local previous = redis.call('GET', KEYS[1])
local requeue = nil
if previous then
  local record = cjson.decode(previous)
  if record.sha256 == ARGV[5] then
    requeue = {}
    for _, key in ipairs(record.jobs) do requeue[key] = true end
  end
else
  previous = redis.call('GET', KEYS[2])
  if not previous then
    redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
    redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
  end
end
if previous and not requeue then return previous end
for i = 0, (#KEYS - 3) / 2 - 1 do
  local namespace, name = ARGV[6 + 3 * i], ARGV[7 + 3 * i]
  if not previous or requeue[namespace .. '/' .. name] then
    local queue, bodies = KEYS[4 + 2 * i], KEYS[5 + 2 * i]
    redis.call('ZADD', queue, 'NX', ARGV[3], name)
    redis.call('HSETNX', bodies, name, ARGV[8 + 3 * i])
    redis.call('SADD', KEYS[3], namespace)
    redis.call('EXPIRE', queue, ARGV[4])
    redis.call('EXPIRE', bodies, ARGV[4])
    redis.call('EXPIRE', KEYS[3], ARGV[4])
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


# Script arguments are str or bytes (sealed bodies); redis-py sends both as they are.
_Call = tuple[list[str], list[Any], "asyncio.Future[Any]"]
# Accepts sent in one pipeline at most; a fuller batch goes at once, not at the loop turn.
BATCH_MAX = 256


def _decode(raw: bytes) -> list[str]:
    record = json.loads(raw)
    names = record["jobs"] if isinstance(record, dict) else record
    return [str(name) for name in names]


def _score(when: float) -> str:
    return f"{when:.3f}"


_SEAL_CHARS = 64  # Hex HMAC-SHA256 in front of the JSON body.


def seal(subkey: bytes, namespace: str, name: str, body: bytes) -> bytes:
    """A queued body as stored: its HMAC over (namespace, name, body), then the body."""
    mac = signing.mac(subkey, namespace.encode("utf-8"), name.encode("utf-8"), body)
    return mac.encode("ascii") + body


@dataclass(frozen=True)
class QueuedJob:
    """An AgentJob to create: where, under which deterministic name, and its body."""

    namespace: str
    name: str
    body: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class LeasedJob:
    """A queue entry as taken: still sealed, to be opened by the dispatcher.

    ``raw_name`` is the member as stored (what :meth:`JobQueue.done` removes): a forged
    entry's name need not even be UTF-8.
    """

    namespace: str
    raw_name: bytes
    sealed: bytes

    @property
    def name(self) -> str:
        return self.raw_name.decode("utf-8", "replace")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def open(self, operator_keys: OperatorKeys) -> QueuedJob | None:
        """The job, or None when the seal is not the operator's (forged or altered)."""
        mac, body = self.sealed[:_SEAL_CHARS], self.sealed[_SEAL_CHARS:]
        parts = (self.namespace.encode("utf-8"), self.raw_name, body)
        try:
            expected = mac.decode("ascii")
        except UnicodeDecodeError:
            return None
        if not signing.verify(operator_keys.subkeys(signing.QUEUE_PURPOSE), expected, *parts):
            return None
        return QueuedJob(self.namespace, self.raw_name.decode("utf-8"), json.loads(body))


class NotReplicated(Exception):
    """The delivery's jobs are queued on the primary, but fewer replicas than asked
    confirmed them in time: a failover now could lose them."""

    def __init__(self, acked: int, wanted: int) -> None:
        super().__init__(f"{acked} of {wanted} Redis replica(s) confirmed the queued jobs")
        self.acked = acked
        self.wanted = wanted


class DeliveryLog:
    """First-caller-wins claims of webhook deliveries, and queueing their jobs.

    With ``min_replicas``, each batch's pipeline ends with ``WAIT``: Redis counts the
    replicas that have every write made on that connection, so it has to be the
    batch's own connection, not a later command's.  A first claim that fewer replicas
    confirmed raises :class:`NotReplicated` (the webhook answers 503); its record stays
    on the primary, so a redelivery is recognised.
    """

    def __init__(
        self,
        redis: Redis,
        operator_keys: OperatorKeys,
        *,
        min_replicas: int = 0,
        replica_timeout_ms: int = 1000,
    ) -> None:
        self._redis = redis
        self._min_replicas = min_replicas
        self._replica_timeout_ms = replica_timeout_ms
        self._subkey = operator_keys.subkeys(signing.QUEUE_PURPOSE)[0]
        self._accept = redis.register_script(_ACCEPT)
        self._pending: list[_Call] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def accept(
        self,
        delivery_id: str,
        body_sha256: str,
        jobs: Sequence[QueuedJob],
        *,
        now: float | None = None,
    ) -> tuple[bool, list[str]]:
        """Claim the delivery and queue ``jobs``, or answer the first copy's record.

        ``(True, [job keys])`` for the first caller; ``(False, keys recorded)`` after that,
        when only a redelivery of the recorded body under the recorded id queued again
        the ``jobs`` whose ``namespace/name`` is recorded.
        """
        names = [job.key for job in jobs]
        job_keys: list[str] = [
            keys.delivery(delivery_id),
            keys.delivery_body(body_sha256),
            keys.WEBHOOK_QUEUE_NAMESPACES,
        ]
        args: list[Any] = [
            json.dumps({"jobs": names, "sha256": body_sha256}),
            str(keys.DELIVERY_TTL_SECONDS),
            _score(time.time() if now is None else now),
            str(keys.WEBHOOK_QUEUE_TTL_SECONDS),
            body_sha256,
        ]
        for job in jobs:
            job_keys += [keys.webhook_queue(job.namespace), keys.webhook_queue_body(job.namespace)]
            body = json.dumps(job.body, separators=(",", ":")).encode("utf-8")
            args += [job.namespace, job.name, seal(self._subkey, job.namespace, job.name, body)]
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((job_keys, args, future))
        if len(self._pending) >= BATCH_MAX:
            self._flush()  # Redis starts on these while later deliveries are still parsed.
        elif len(self._pending) == 1:
            # On the next loop turn: every accept made in this one joins the batch.
            asyncio.get_running_loop().call_soon(self._flush)
        previous, acked = await future
        if isinstance(previous, bytes):
            return False, _decode(previous)
        if acked < self._min_replicas:
            raise NotReplicated(acked, self._min_replicas)
        return True, names

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.create_task(self._send(batch))
            self._sending.add(task)  # Keep a reference until it is done.
            task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[_Call]) -> None:
        try:
            answers, acked = await self._execute(batch)
            results: list[Any] = [(answer, acked) for answer in answers]
        except Exception as exc:  # Redis down: every caller of the batch learns it.
            results = [exc] * len(batch)
        except BaseException:
            for _, _, future in batch:
                future.cancel()
            raise
        for (_, _, future), result in zip(batch, results, strict=True):
            if future.done():  # Its caller gave up (timeout, disconnect).
                continue
            answer = result if isinstance(result, Exception) else result[0]
            if isinstance(answer, Exception):
                future.set_exception(answer)
            else:
                future.set_result(result)

    async def _execute(self, batch: list[_Call]) -> tuple[list[Any], int]:
        """Each call's answer, and how many replicas confirmed them (the fewest of the
        passes; without ``min_replicas`` nobody asks: 0)."""
        results: list[Any] = [None] * len(batch)
        acked: int | None = None
        todo = list(range(len(batch)))
        for _ in range(2):  # A second pass only if Redis forgot the script (restart, flush).
            async with self._redis.pipeline(transaction=False) as pipe:
                for i in todo:
                    script_keys, args, _ = batch[i]
                    pipe.evalsha(self._accept.sha, len(script_keys), *script_keys, *args)
                if self._min_replicas:
                    pipe.wait(self._min_replicas, self._replica_timeout_ms)
                answers = await pipe.execute(raise_on_error=False)
            if self._min_replicas:
                waited = answers.pop()
                count = waited if isinstance(waited, int) else 0
                acked = count if acked is None else min(acked, count)
            for i, answer in zip(todo, answers, strict=True):
                results[i] = answer
            todo = [i for i in todo if isinstance(results[i], NoScriptError)]
            if not todo:
                break
            await self._redis.script_load(_ACCEPT)
        return results, acked or 0

    async def get(self, delivery_id: str) -> list[str] | None:
        """The job keys recorded for a delivery id, None when it is not (or no longer) known."""
        raw = await self._redis.get(keys.delivery(delivery_id))
        return None if raw is None else _decode(raw)


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
        # Anyone able to write to Redis could add members: decoding must not fail.
        return sorted(m.decode("utf-8", "replace") for m in members)

    async def take(
        self, limit: int, lease_seconds: float, *, now: float | None = None
    ) -> tuple[list[LeasedJob], float | None]:
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
            LeasedJob(namespaces[int(taken[i]) - 1], bytes(taken[i + 1]), bytes(taken[i + 2]))
            for i in range(0, len(taken), 3)
        ]
        return jobs, None if earliest is None else float(earliest)

    async def done(self, namespace: str, name: str | bytes) -> None:
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
