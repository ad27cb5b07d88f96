"""Pods seen on the watch, per batch Job: what a launch waits for before bookkeeping.

A chain hop ends when the child's pod exists, and the Job controller creates it
on the same busy API server the operator writes to.  The writes that follow a
launch and that nothing waits on (the Job's owner, the child's and the parent's
status) are held until the pod is seen or ``POD_WAIT_SECONDS`` pass, so they do
not compete with the one write the hop needs.  The token Secret is not held: the
pod's container needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict

POD_WAIT_SECONDS = 1.0
_REMEMBERED = 4096
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")

_Key = tuple[str, str]


class PodArrivals:
    """Batch Jobs whose pod the watch delivered, and launches waiting for one."""

    def __init__(self) -> None:
        self._seen: OrderedDict[_Key, None] = OrderedDict()
        self._waiting: dict[_Key, asyncio.Event] = {}

    def seen(self, namespace: str, labels: dict[str, str]) -> None:
        job = next((labels[k] for k in JOB_NAME_LABELS if labels.get(k)), None)
        if job is None:
            return
        key = (namespace, job)
        self._seen[key] = None
        self._seen.move_to_end(key)
        while len(self._seen) > _REMEMBERED:
            self._seen.popitem(last=False)
        waiter = self._waiting.get(key)
        if waiter is not None:
            waiter.set()

    async def wait(self, namespace: str, job: str, timeout: float = POD_WAIT_SECONDS) -> bool:
        """Whether the Job's pod was seen within ``timeout`` (at once if already)."""
        key = (namespace, job)
        if key in self._seen:
            return True
        waiter = self._waiting.setdefault(key, asyncio.Event())
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), timeout)
        finally:
            if self._waiting.get(key) is waiter:
                del self._waiting[key]
        return waiter.is_set()
