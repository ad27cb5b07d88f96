"""Per-object serialisation inside one operator process.

kopf already serialises handlers per object, but the engine also acts on a
child directly from its parent's handler (the fast path that keeps hop latency
low), so the same AgentJob can be touched from two tasks at once.  A lock per
(namespace, name) makes those two paths take turns; across processes and
restarts, deterministic names and AlreadyExists keep things exactly-once.

A parent holds its new child's lock from before creating it to the end of
starting it, so the child's own watch event waits rather than starting it twice.
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType


class ObjectLock:
    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> None:
        await self._lock.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()


_locks: weakref.WeakValueDictionary[tuple[str, str], ObjectLock] = weakref.WeakValueDictionary()


def lock_for(namespace: str, name: str) -> ObjectLock:
    key = (namespace, name)
    lock = _locks.get(key)
    if lock is None:
        lock = ObjectLock()
        _locks[key] = lock
    return lock
