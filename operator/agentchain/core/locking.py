"""Per-object serialisation inside one operator process, and the order locks are taken in.

kopf serialises handlers per object, but a hop touches two AgentJobs (the parent
and the child it creates) and the pod, Job and AgentJob watches, the resync and a
parent's hop may all act on the same AgentJob at once.  A lock per (namespace,
name) makes them take turns; across processes and restarts, deterministic names
and AlreadyExists keep things exactly-once.

Only the hop takes these locks: ``hop.reconciling`` a job's own (``hop.stopping``
too, for a stop's claim, with no other lock held), ``hop.hopping`` a child's, always
after its parent's, so two hops can never wait for each other.
(``workspaces.publishing`` also takes one of a key no AgentJob can have,
``pull-request/<chain id>``, around a chain's pull request, with no other lock held
and nothing taken under it; and ``hop.hopping`` one of the key
``chain/<chain id>`` from a decision to the job's ``status.next``, taken after the job's
own and released before a child's is taken, nothing taken under it.)  A hop holds its
child's lock from before creating it to the end of launching it, so the child's own
watch event waits and then finds it started.  A run of Skipped or refused records is
walked hand over hand (:class:`Held`): at most a parent's and its child's lock at once
(and the chain's, briefly), however long the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator

Key = tuple[str, str]


class Locks:
    """One ``asyncio.Lock`` per AgentJob in use; an unused one is dropped."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[Key, asyncio.Lock] = weakref.WeakValueDictionary()

    def lock(self, namespace: str, name: str) -> asyncio.Lock:
        key = (namespace, name)
        found = self._locks.get(key)
        if found is None:
            found = asyncio.Lock()
            self._locks[key] = found
        return found

    @contextlib.asynccontextmanager
    async def holding(self, namespace: str, name: str) -> AsyncIterator[Held]:
        """Hold the AgentJob's lock, and whichever the body takes on, until the end."""
        held = Held(self)
        try:
            await held.take(namespace, name)
            yield held
        finally:
            held.release_all()


class Held:
    """The locks one sequence holds (a strong reference keeps each alive)."""

    def __init__(self, locks: Locks) -> None:
        self._locks = locks
        self._held: dict[Key, asyncio.Lock] = {}

    async def take(self, namespace: str, name: str) -> None:
        if (namespace, name) in self._held:
            return
        lock = self._locks.lock(namespace, name)
        await lock.acquire()
        self._held[(namespace, name)] = lock

    def release(self, namespace: str, name: str) -> None:
        lock = self._held.pop((namespace, name), None)
        if lock is not None:
            lock.release()

    def release_all(self) -> None:
        for key in list(self._held):
            self.release(*key)
