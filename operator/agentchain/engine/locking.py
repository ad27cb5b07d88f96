"""Per-object serialisation inside one operator process.

kopf already serialises handlers per object, but the engine also acts on a
child directly from its parent's handler (the fast path that keeps hop latency
low), so the same AgentJob can be touched from two tasks at once.  A lock per
(namespace, name) makes those two paths take turns; across processes and
restarts, deterministic names and AlreadyExists keep things exactly-once.

Each release bumps the lock's ``epoch``.  A caller that holds the lock object
from before it obtained a copy of the object (the child its parent just
created) can tell on entry whether anyone worked on the object in between, and
skip re-reading it when nobody did.  Holding the lock object also keeps it,
and so its epoch, alive.
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType


class ObjectLock:
    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self.epoch = 0

    async def __aenter__(self) -> int:
        await self._lock.acquire()
        return self.epoch

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.epoch += 1
        self._lock.release()


_locks: weakref.WeakValueDictionary[tuple[str, str], ObjectLock] = weakref.WeakValueDictionary()


def lock_for(namespace: str, name: str) -> ObjectLock:
    key = (namespace, name)
    lock = _locks.get(key)
    if lock is None:
        lock = ObjectLock()
        _locks[key] = lock
    return lock
