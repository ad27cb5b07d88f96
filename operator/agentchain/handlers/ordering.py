"""Running the engine for watch events: per object in order, newest event wins.

The watches (``kube.watching``) call their consumers synchronously; what needs I/O is
submitted here under the object's key.  Like kopf's per-object workers: one object's
work runs one at a time (a pod's Running and Terminated events never race each
other), events that arrive meanwhile are folded into the newest, and different
objects run side by side, at most ``CONCURRENCY`` at once so a restart with a large
unsettled backlog does not start thousands of hops together.  A failure is logged
and dropped, as kopf drops a failed event handler's: the resync redoes the step.
The number of objects with work queued or running feeds the restart's
:class:`~agentchain.core.unsettled.Backlog`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

from agentchain.cancelling import stop_tasks
from agentchain.core.unsettled import Backlog
from agentchain.kube import apierrors

log = logging.getLogger(__name__)
Work = Callable[[], Awaitable[object]]
Submit = Callable[[Hashable, Work], None]
# Enough for 100 chains' hops at once; a bound for what a restart may start together.
CONCURRENCY = 128


class Dispatcher:
    def __init__(self, backlog: Backlog, concurrency: int = CONCURRENCY) -> None:
        self._backlog = backlog
        self._gate = asyncio.Semaphore(concurrency)
        self._busy: set[Hashable] = set()
        self._next: dict[Hashable, Work] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._busy)

    def submit(self, key: Hashable, work: Work) -> None:
        if key in self._busy:
            self._next[key] = work  # Folded: only the newest event of a busy object runs.
            return
        self._busy.add(key)
        self._backlog.update(len(self._busy))
        task = asyncio.create_task(self._drain(key, work), name=f"event {key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def settle_backlog(self) -> None:
        """The lists are in: the backlog is done as soon as nothing is busy."""
        self._backlog.listed = True
        self._backlog.update(len(self._busy))

    async def _drain(self, key: Hashable, work: Work | None) -> None:
        try:
            while work is not None:
                async with self._gate:
                    await _run(key, work)
                work = self._next.pop(key, None)
        finally:
            self._busy.discard(key)
            self._backlog.update(len(self._busy))

    async def close(self) -> None:
        await stop_tasks(list(self._tasks))


async def _run(key: Hashable, work: Work) -> None:
    try:
        await work()
    except asyncio.CancelledError:
        raise
    except apierrors.KubeError as exc:
        # Expected now and then (a namespace being deleted, the API server away past the
        # client's retries): one line, and the resync or the next event does it again.
        log.warning("event of %s: %s", key, exc)
    except Exception:  # One object's failure must not stop the others'.
        log.exception("event of %s failed", key)
