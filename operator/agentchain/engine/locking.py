"""Per-object serialisation inside one operator process.

kopf already serialises handlers per object, but the engine also acts on a
child directly from its parent's handler (the fast path that keeps hop latency
low), so the same AgentJob can be touched from two tasks at once.  A lock per
(namespace, name) makes those two paths take turns; across processes and
restarts, deterministic names and AlreadyExists keep things exactly-once.
"""

from __future__ import annotations

import asyncio
import weakref

_locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()


def lock_for(namespace: str, name: str) -> asyncio.Lock:
    key = (namespace, name)
    lock = _locks.get(key)
    if lock is None:
        lock = asyncio.Lock()
        _locks[key] = lock
    return lock
