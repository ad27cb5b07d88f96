"""``POST /api/jobs?wait=``: waiting for a job to end on a shared watch.

A waiting request used to read its AgentJob from the API server every half
second, so one token could turn the API server's load into a function of how many
requests it held open.  Now every waiting request in a namespace shares ONE watch
of that namespace's AgentJobs, started when the first waiter arrives and stopped
when the last one leaves; a waiter reads its job once (after registering, so no
change can fall between the read and the watch) and then only hears from the watch.
A watch that fails or expires (410) is restarted from a fresh resourceVersion and
every waiter reads its job once more, since events in between may be lost.

Concurrent waits are capped per token (:data:`MAX_WAITS_PER_JOB_TOKEN` for a job
token, :data:`MAX_WAITS_FOR_ADMINS` shared by the admin tokens); beyond the cap the
request is refused with 429 before anything is created.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentchain.cancelling import stop_tasks
from agentchain.kube import resources
from agentchain.models.agentjob import TERMINAL_PHASES
from agentchain.web import auth
from agentchain.web.responses import ApiError

log = logging.getLogger(__name__)
Obj = dict[str, Any]
MAX_WAITS_PER_JOB_TOKEN = 4
MAX_WAITS_FOR_ADMINS = 32
WATCH_SECONDS = 240  # One watch request's life; it is renewed from where it ended.
RETRY_SECONDS = 1.0  # After a failed watch, before the next one.


def terminal(obj: Obj) -> bool:
    return (obj.get("status") or {}).get("phase") in TERMINAL_PHASES


@dataclass(eq=False)
class _Waiter:
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    latest: Obj | None = None
    deleted: bool = False
    recheck: bool = False


@dataclass
class Waits:
    """The waiting requests of one app, their namespaces' watches, and the per-token cap."""

    _callers: Counter[str] = field(default_factory=Counter)
    _waiters: dict[tuple[str, str], set[_Waiter]] = field(default_factory=dict)
    _watches: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    @contextlib.contextmanager
    def slot(self, principal: auth.Principal) -> Iterator[None]:
        """One of the principal's concurrent waits, or 429 when it holds them all."""
        if isinstance(principal, auth.JobCaller):
            key = f"job:{principal.scope.tenant}/{principal.scope.job_name}"
            limit = MAX_WAITS_PER_JOB_TOKEN
        else:
            key, limit = "admin", MAX_WAITS_FOR_ADMINS
        if self._callers[key] >= limit:
            raise ApiError(
                429,
                "too many waits",
                f"At most {limit} requests with ?wait= per token at once; "
                "retry later or without ?wait=.",
                reason="TooManyWaits",
            )
        self._callers[key] += 1
        try:
            yield
        finally:
            self._callers[key] -= 1
            if not self._callers[key]:
                del self._callers[key]

    async def until_terminal(self, obj: Obj, seconds: float) -> tuple[Obj, bool]:
        """The job once terminal or after ``seconds``: (latest object, terminal)."""
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        waiter = _Waiter(recheck=True)  # The first look is a read: registered first.
        key = (namespace, name)
        self._waiters.setdefault(key, set()).add(waiter)
        self._ensure_watch(namespace)
        deadline = time.monotonic() + seconds
        try:
            while True:
                obj = await self._look(waiter, obj, name)
                if terminal(obj):
                    return obj, True
                left = deadline - time.monotonic()
                if left <= 0:
                    return obj, False
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):  # Not wait_for: it can lose a cancel.
                        await waiter.changed.wait()
                waiter.changed.clear()
        finally:
            self._forget(key, waiter)

    async def _look(self, waiter: _Waiter, obj: Obj, name: str) -> Obj:
        if waiter.recheck:
            waiter.recheck = False
            namespace = obj["metadata"]["namespace"]
            fresh = await resources.get(namespace, resources.AGENTJOBS, name)
            waiter.deleted = fresh is None
            waiter.latest = fresh or waiter.latest
        if waiter.deleted:
            raise ApiError(404, "job not found", f"AgentJob {name} was deleted while waiting.")
        return waiter.latest or obj

    def _forget(self, key: tuple[str, str], waiter: _Waiter) -> None:
        waiters = self._waiters.get(key)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._waiters[key]
        namespace = key[0]
        if not any(ns == namespace for ns, _ in self._waiters):
            task = self._watches.pop(namespace, None)
            if task is not None:
                task.cancel()

    def _ensure_watch(self, namespace: str) -> None:
        task = self._watches.get(namespace)
        if task is None or task.done():
            self._watches[namespace] = asyncio.create_task(
                self._watch(namespace), name=f"wait-watch/{namespace}"
            )

    async def _watch(self, namespace: str) -> None:
        version = ""
        while True:
            try:
                if not version:
                    version = await resources.list_version(namespace, resources.AGENTJOBS)
                    self._wake_all(namespace)  # Events before this version may be lost.
                async for event in resources.watch(
                    namespace, resources.AGENTJOBS, version, WATCH_SECONDS
                ):
                    version = self._deliver(namespace, event) or version
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Any failure: start over from a fresh version.
                log.info("wait watch in %s restarts: %s", namespace, type(exc).__name__)
                version = ""
                await asyncio.sleep(RETRY_SECONDS)

    def _deliver(self, namespace: str, event: Obj) -> str | None:
        """Hand one watch event to its waiters; the version it brings the watch to."""
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        if event.get("type") != "BOOKMARK":
            for waiter in self._waiters.get((namespace, str(meta.get("name"))), ()):
                waiter.latest = obj
                waiter.deleted = event.get("type") == "DELETED"
                waiter.changed.set()
        version = meta.get("resourceVersion")
        return str(version) if version else None

    def _wake_all(self, namespace: str) -> None:
        for (ns, _), waiters in self._waiters.items():
            if ns == namespace:
                for waiter in waiters:
                    waiter.recheck = True
                    waiter.changed.set()

    async def close(self) -> None:
        tasks = list(self._watches.values())
        self._watches.clear()
        await stop_tasks(tasks)
