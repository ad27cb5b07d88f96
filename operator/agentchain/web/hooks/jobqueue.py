"""The webhook's dispatcher: turns the durable queue of accepted jobs into AgentJobs.

The webhook answers 202 once a delivery's jobs are queued in Redis
(:class:`~agentchain.store.deliveries.DeliveryLog`); this task, started and stopped with
the web app in the operator process, creates them.  It leases due entries in batches
and creates at most :data:`CONCURRENCY` at once (they share the process's API
connections with the engine).  An entry is removed only after its create answered:
created, or ``AlreadyExists`` (the name is deterministic, so that is the same job), or
a refusal retrying cannot fix (:data:`PERMANENT`: the object is invalid, or the
namespace is gone), which is logged and counted, never retried.  Anything else (API
server down, timeout, throttling) keeps the entry and pushes its due time back
exponentially, so a broken API server costs a few calls a minute, not a spin.

On start the dispatcher first makes every entry due (:meth:`JobQueue.reclaim`): leases
held by a killed process would otherwise wait out :data:`LEASE_SECONDS`.  Several
replicas may drain one queue: two leasing the same entry is harmless (the second create
is ``AlreadyExists``).  The webhook :meth:`Dispatcher.notify`\\ s it after each enqueue;
entries queued by another process are found by a sweep every :data:`SWEEP_SECONDS`.

Every entry is opened with the operator key before anything else
(:meth:`~agentchain.store.deliveries.LeasedJob.open`): one the webhook did not seal
(written to Redis by someone else, or altered there) is removed with one log line and
counted as ``forged``, never created.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator

from aiohttp import web

from agentchain.cancelling import stop_tasks
from agentchain.kube import apierrors, resources
from agentchain.metrics import WEBHOOK_JOBS
from agentchain.store.deliveries import JobQueue, LeasedJob, QueuedJob
from agentchain.store.signing import OperatorKeys

log = logging.getLogger(__name__)

CONCURRENCY = 8
# Entries leased per take: enough to keep every slot busy until the next take.
BATCH = 2 * CONCURRENCY
# A leased entry is taken again (by anyone) after this; a create times out well before.
LEASE_SECONDS = 30.0
CREATE_TIMEOUT_SECONDS = 10.0
# Finds entries queued by another replica (in-process enqueues wake the dispatcher).
SWEEP_SECONDS = 5.0
# Woken from idle, wait until deliveries stop arriving for QUIET (at most DEFER): a burst
# is answered first and its creates start after, instead of competing with its 202s.
QUIET_SECONDS = 0.05
DEFER_MAX_SECONDS = 0.5
RETRY_MIN_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
MAX_TRACKED_RETRIES = 10_000
# On stop, in-flight creates get this long to finish and remove their entries.
STOP_GRACE_SECONDS = 5.0
# Refusals a retry cannot fix: invalid object, unknown namespace or resource.
PERMANENT = frozenset({400, 404, 422})


def _backoff(attempts: int) -> float:
    delay = min(RETRY_MAX_SECONDS, RETRY_MIN_SECONDS * 2.0 ** (attempts - 1))
    return delay * random.uniform(0.8, 1.2)  # Jitter: replicas do not retry in lockstep.


async def _create(job: QueuedJob) -> str:
    """``created`` or ``existed``; raises what the API server answered otherwise."""
    try:
        await resources.create_only(
            job.namespace, resources.AGENTJOBS, job.body, timeout=CREATE_TIMEOUT_SECONDS
        )
    except apierrors.AlreadyExists:
        return "existed"
    return "created"


class Dispatcher:
    """One background task draining a :class:`JobQueue` into AgentJobs."""

    def __init__(
        self, queue: JobQueue, operator_keys: OperatorKeys, *, concurrency: int = CONCURRENCY
    ) -> None:
        self._queue = queue
        self._keys = operator_keys
        self._slots = asyncio.Semaphore(concurrency)
        self._wake = asyncio.Event()
        self._inflight: set[str] = set()
        self._workers: set[asyncio.Task[None]] = set()
        self._attempts: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    def notify(self) -> None:
        """New entries are queued: take them now rather than at the next sweep."""
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="webhook-dispatcher")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        await stop_tasks([task])
        if self._workers:
            # Let creates under way finish and remove their entries; any cut short stays
            # leased in Redis and is created (or found existing) after the next start.
            await asyncio.wait(set(self._workers), timeout=STOP_GRACE_SECONDS)
        await stop_tasks(list(self._workers))

    async def lifespan(self, app: web.Application) -> AsyncIterator[None]:
        """For ``app.cleanup_ctx``: runs while the app serves."""
        self.start()
        yield
        await self.stop()

    async def _run(self) -> None:
        reclaimed = False
        failures = 0
        while True:
            self._wake.clear()  # Before taking, so an enqueue during the take is not missed.
            try:
                if not reclaimed:
                    moved = await self._queue.reclaim()
                    reclaimed = True
                    if moved:
                        log.info("webhook dispatcher: %d queued job(s) left pending", moved)
                batch, earliest = await self._queue.take(BATCH, LEASE_SECONDS)
            except Exception as exc:  # Redis down or worse: keep the task alive, back off.
                failures += 1
                delay = _backoff(failures)
                log.warning(
                    "webhook dispatcher: queue unavailable (%s); retry in %.1fs",
                    type(exc).__name__,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            failures = 0
            for leased in batch:
                if leased.key in self._inflight:
                    continue  # Its lease ran out while our create is still running.
                job = leased.open(self._keys)
                if job is None:
                    await self._drop_forged(leased)
                    continue
                await self._slots.acquire()
                self._inflight.add(job.key)
                worker = asyncio.create_task(self._dispatch(job))
                self._workers.add(worker)
                worker.add_done_callback(self._workers.discard)
            if batch:
                continue
            await self._idle(earliest)

    async def _idle(self, earliest: float | None) -> None:
        """Wait for an enqueue, the next due entry, or the sweep, whichever comes first."""
        timeout = SWEEP_SECONDS
        if earliest is not None:
            timeout = min(max(earliest - time.time(), 0.05), SWEEP_SECONDS)
        # asyncio.timeout, not wait_for: on 3.11 wait_for returns the inner result when a
        # cancel races with it, so stop()'s cancel could be lost and the loop run on.
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            return
        deadline = time.monotonic() + DEFER_MAX_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            self._wake.clear()
            try:
                async with asyncio.timeout(min(QUIET_SECONDS, left)):
                    await self._wake.wait()
            except TimeoutError:
                return  # Quiet: the burst is answered.

    async def _drop_forged(self, leased: LeasedJob) -> None:
        log.error("webhook job %r dropped: its queue entry has no valid seal", leased.key)
        WEBHOOK_JOBS.labels(result="forged").inc()
        with contextlib.suppress(Exception):  # Otherwise its lease runs out: dropped again.
            await self._queue.done(leased.namespace, leased.raw_name)

    async def _dispatch(self, job: QueuedJob) -> None:
        try:
            result = await self._attempt(job)
            WEBHOOK_JOBS.labels(result=result).inc()
        finally:
            self._inflight.discard(job.key)
            self._slots.release()

    async def _attempt(self, job: QueuedJob) -> str:
        try:
            result = await _create(job)
        except apierrors.ApiError as exc:
            if exc.code not in PERMANENT:
                return await self._retry(job, f"API server answered {exc.code}")
            log.error(
                "webhook job %s dropped: the API server refused it (%s %s)",
                job.key,
                exc.code,
                exc.reason,
            )
            result = "failed"
        except Exception as exc:  # Unreachable API server, timeout: transient.
            return await self._retry(job, type(exc).__name__)
        self._attempts.pop(job.key, None)
        try:
            await self._queue.done(job.namespace, job.name)
        except Exception as exc:  # The lease runs out and the next create finds it existing.
            log.warning("webhook job %s: could not unqueue (%s)", job.key, type(exc).__name__)
        return result

    async def _retry(self, job: QueuedJob, why: str) -> str:
        if len(self._attempts) > MAX_TRACKED_RETRIES:
            self._attempts.clear()  # Entries that expired unretried; restart their back-off.
        attempts = self._attempts[job.key] = self._attempts.get(job.key, 0) + 1
        delay = _backoff(attempts)
        log.warning("webhook job %s not created (%s); retry in %.1fs", job.key, why, delay)
        with contextlib.suppress(Exception):  # Otherwise the lease runs out: a later retry.
            await self._queue.retry_at(job.namespace, job.name, time.time() + delay)
        return "retried"
