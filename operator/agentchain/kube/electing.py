"""The leader elector: one Lease, tried every retry period, as client-go's ``leaderelection``.

:meth:`Elector.campaign` returns once this process holds the Lease; :meth:`Elector.hold`
renews it every retry period and returns only when leadership is lost (a renewal did
not succeed before the renew deadline, or someone else holds the Lease), at which point
the caller must stop acting at once (``replica.py`` exits the process, as
controller-runtime does).  :meth:`Elector.release` hands the Lease over on a clean stop.

:meth:`Elector.fence` is the write fence: it answers, from this process's monotonic
clock alone, whether the renew deadline of the last successful renewal has not yet
passed.  The engine's writes consult it just before they are sent (``clients.WRITE_FENCE``),
so a process that was frozen (SIGSTOP, a stalled node) and wakes up after a follower
took over refuses its own writes before its elector task has even run.  The rules and
why they are safe are in ``kube/rules/leadership.py``; the I/O is ``kube/leases.py``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from agentchain.kube import apierrors, leases
from agentchain.kube.rules import leadership
from agentchain.kube.rules.leadership import Observation, Record, Timing

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def _released(lease: Obj) -> Record:
    return leadership.released(Record.from_spec(lease.get("spec")), _wall())


def _wall() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Elector:
    """Leader election for one identity over the Lease ``namespace/name``."""

    def __init__(
        self,
        namespace: str,
        name: str,
        identity: str,
        timing: Timing,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.namespace, self.name, self.identity, self.timing = namespace, name, identity, timing
        self._clock = clock
        self._observed: Observation | None = None
        self._lease: Obj | None = None
        self._renewed_at: float | None = None
        self.transitions_seen = 0

    @property
    def holder(self) -> str:
        """Who holds the Lease as last read ("" when nobody, or not read yet)."""
        return self._observed.record.holder if self._observed else ""

    def fence(self) -> bool:
        """Whether this process may act as the leader right now."""
        return leadership.fence_open(self._renewed_at, self.timing, self._clock())

    async def campaign(self) -> None:
        """Return once this process holds the Lease (tries forever; cancel to give up)."""
        log.info("leader election: %s wants lease %s/%s", self.identity, self.namespace, self.name)
        while not await self._attempt(self.timing.retry_period):
            wait = leadership.next_attempt(
                self._observed, self.identity, self.timing, self._clock()
            )
            await asyncio.sleep(wait * random.uniform(1.0, leadership.JITTER))
        log.info(
            "leader election: %s leads (lease %s/%s)", self.identity, self.namespace, self.name
        )

    async def hold(self, on_lost: Callable[[], None] = lambda: None) -> None:
        """Renew every retry period; when leadership is lost, call ``on_lost`` at once
        (from this very step: no other task of the loop runs in between), then return."""
        while True:
            await asyncio.sleep(self.timing.retry_period)
            while not await self._attempt(self._left()):
                if not self.fence() or self.holder not in ("", self.identity):
                    log.critical(
                        "leader election: %s lost lease %s/%s (holder now %r)",
                        self.identity,
                        self.namespace,
                        self.name,
                        self.holder,
                    )
                    self._renewed_at = None
                    on_lost()
                    return
                await asyncio.sleep(min(self.timing.retry_period / 2, self._left()))

    async def release(self) -> None:
        """Give the Lease up (best effort) so a follower takes over at its next try."""
        lease, self._renewed_at = self._lease, None
        if lease is None:
            return
        try:
            await self._release(lease)
        except apierrors.KubeError as exc:  # Someone else wrote it, or the API is down: it expires.
            log.warning("leader election: lease not released (%s)", exc)
            return
        log.info(
            "leader election: %s released lease %s/%s", self.identity, self.namespace, self.name
        )

    async def _release(self, lease: Obj) -> None:
        timeout = self.timing.retry_period
        try:
            await leases.replace(lease, _released(lease), timeout=timeout)
        except apierrors.Conflict:
            # A renewal whose answer never came back (the holder was stopped while it was
            # on its way) wrote the Lease after the copy kept here: read it again, and
            # release it if it still names this replica, or the follower waits a lease.
            current = await leases.read(self.namespace, self.name, timeout=timeout)
            if current is None or not leadership.still_held_by(
                Record.from_spec(current.get("spec")), self.identity
            ):
                raise
            await leases.replace(current, _released(current), timeout=timeout)

    def _left(self) -> float:
        """Seconds left before the renew deadline (a small floor keeps a call possible)."""
        if self._renewed_at is None:
            return 0.1
        return max(0.1, self._renewed_at + self.timing.renew_deadline - self._clock())

    async def _attempt(self, timeout: float) -> bool:
        """One acquire-or-renew; True when this process holds the Lease afterwards."""
        started = self._clock()
        try:
            obj = await self._claim(timeout)
        except apierrors.Conflict as exc:  # Someone wrote the Lease between our read and write.
            log.debug("leader election: attempt lost a race (%s)", exc)
            return False
        except apierrors.KubeError as exc:  # The API server, or a missing permission (403).
            log.warning("leader election: attempt failed (%s)", exc)
            return False
        if obj is None:
            return False
        self._lease = obj
        self._observed = leadership.observe(
            None, Record.from_spec(obj.get("spec")), _version(obj), self._clock()
        )
        self._renewed_at = started  # Counted from the start: the conservative end.
        return True

    async def _claim(self, timeout: float) -> Obj | None:
        current = await leases.read(self.namespace, self.name, timeout=timeout)
        if current is None:
            record = leadership.claim(None, self.identity, self.timing, _wall())
            return await leases.create(self.namespace, self.name, record, timeout=timeout)
        record = Record.from_spec(current.get("spec"))
        before = self._observed
        self._observed = leadership.observe(before, record, _version(current), self._clock())
        if before is None or before.record.holder != record.holder:
            self.transitions_seen += 1
            log.info(
                "leader election: lease %s/%s held by %r", self.namespace, self.name, record.holder
            )
        if not leadership.may_claim(self._observed, self.identity, self._clock()):
            return None
        claimed = leadership.claim(record, self.identity, self.timing, _wall())
        return await leases.replace(current, claimed, timeout=timeout)


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
