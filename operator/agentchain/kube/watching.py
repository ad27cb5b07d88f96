"""The operator's own list+watch of one collection: label-selected, paginated, trimmed.

kopf lists a resource in one unpaged request and cannot send a label selector
(nolar/kopf#1311), so a restart with 5,000 finished AgentJobs read 70 MB of JSON
(every pod and Job in the namespace, ours or not) and handed all of it to the handlers
at once: 864 MiB peak, under a 512 Mi limit a crash loop.  A
:class:`Watcher` does what client-go's reflector does instead:

1. LIST in pages (``limit``/``continue``) with the ``labelSelector``; each item is
   trimmed to the fields its consumer reads and handed over at once, so at most one
   page of full objects is in memory;
2. WATCH from the list's ``resourceVersion`` with bookmarks (which keep that version
   fresh on a quiet collection), for ``WATCH_SECONDS`` at a time (under the client's
   60 s read timeout), then again from the newest version seen;
3. ``410 Gone`` (the version fell out of the API server's window, during a watch or
   between two pages) means LIST again; with ``track_deletions`` the objects that
   the new list no longer holds are handed over as ``DELETED`` (a stub: namespace,
   name and uid), so an index fed by the watch never keeps a deleted object;
4. any other failure (refused, unreachable, a broken stream) is logged once and retried
   after a capped, jittered backoff, from the version already reached; so is a 410
   answered to the very list that follows one, and a watch the server ends at once.

The consumer's ``on_event(type, obj)`` is synchronous and must not block: it decides
from the object alone and hands any I/O to tasks of its own (``handlers.watches``).
``listed`` is set once the first complete list was handed over.  Every request goes
through ``clients.open_response`` (typed errors, retries of 429/5xx, re-login on 401).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from agentchain.kube import apierrors
from agentchain.kube.clients import open_response

log = logging.getLogger(__name__)
Obj = dict[str, Any]
OnEvent = Callable[[str, Obj], None]
Trim = Callable[[Obj], Obj]
Key = tuple[str, str]

# Objects per LIST page. client-go asks for 500, but a page of 500 pods parsed into
# Python dicts is ~30 MiB the allocator keeps once freed: 100 held a 5,000-job restart's
# growth to 16 MiB instead of 55 (bench/restart_memory.py), for 40 more LISTs.
PAGE_SIZE = 100
# Under the client's 60 s socket read timeout: the API server ends the stream first.
WATCH_SECONDS = 50
# One watch event is one object: etcd refuses objects over 1.5 MiB, so more is an error.
EVENT_MAX_BYTES = 8 * 1024 * 1024
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0


@dataclass(frozen=True)
class Collection:
    """What to watch: a collection's path (e.g. ``/api/v1/namespaces/ns/pods``)."""

    path: str
    label_selector: str | None = None
    page_size: int = PAGE_SIZE

    def params(self, **extra: str) -> dict[str, str]:
        params = {"labelSelector": self.label_selector} if self.label_selector else {}
        return {**params, **extra}


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _identity(obj: Obj) -> Obj:
    return obj


class Watcher:
    """One collection, listed then watched until cancelled (:meth:`run`)."""

    def __init__(
        self,
        collection: Collection,
        on_event: OnEvent,
        *,
        trim: Trim = _identity,
        track_deletions: bool = False,
    ) -> None:
        self.collection = collection
        self.listed = asyncio.Event()
        self.lists = 0  # LISTs completed (the first, then one per 410 Gone).
        self.pages = 0  # LIST requests answered.
        self._on_event = on_event
        self._trim = trim
        self._known: dict[Key, str] | None = {} if track_deletions else None

    async def run(self) -> None:
        """List, watch, relist on 410, back off on other errors; until cancelled."""
        version: str | None = None
        failures = 0
        while True:
            try:
                if version is None:
                    version = await self._list()
                started = time.monotonic()
                version = await self._watch(version)
                # The API server ends a watch after WATCH_SECONDS; one ended at once (a
                # proxy closing it) is retried after a pause, not in a tight loop.
                failures = 0 if time.monotonic() - started >= 1.0 else failures + 1
                if failures:
                    await asyncio.sleep(backoff(failures))
            except apierrors.Gone:
                # Listed again at once; a list that is itself Gone again backs off.
                log.info("watch of %s expired (410): listing again", self.collection.path)
                failures, version = failures + 1, None
                if failures > 1:
                    await asyncio.sleep(backoff(failures - 1))
            except (apierrors.KubeError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                failures += 1
                wait = backoff(failures)
                log.warning(
                    "watch of %s failed (%s); again in %.1fs", self.collection.path, exc, wait
                )
                await asyncio.sleep(wait)

    async def _list(self) -> str:
        """Every object, page by page, handed over as ADDED; the list's version."""
        seen: set[Key] = set()
        token: str | None = None
        while True:
            page = await self._page(token)
            for item in page.get("items") or []:
                seen.add(key_of(item))
                self._deliver("ADDED", item)
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                break
            await asyncio.sleep(0)  # Let the consumer's tasks run between pages.
        self._forget_unlisted(seen)
        self.lists += 1
        self.listed.set()
        return str(meta.get("resourceVersion") or "")

    async def _page(self, token: str | None) -> Obj:
        extra = {"limit": str(self.collection.page_size)}
        if token:
            extra["continue"] = token
        params = self.collection.params(**extra)
        async with open_response("GET", self.collection.path, params=params) as resp:
            raw = await resp.read()
        self.pages += 1
        page: Obj = json.loads(raw)
        return page

    def _forget_unlisted(self, listed: set[Key]) -> None:
        """Deleted while no watch ran: a stub DELETED for each object not listed again."""
        if self._known is None:
            return
        for key in [k for k in self._known if k not in listed]:
            namespace, name = key
            uid = self._known.pop(key)
            stub = {"metadata": {"namespace": namespace, "name": name, "uid": uid}}
            self._on_event("DELETED", stub)

    async def _watch(self, version: str) -> str:
        """One watch request from ``version``; the newest version it reached."""
        params = self.collection.params(
            watch="true",
            resourceVersion=version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(WATCH_SECONDS),
        )
        async for event in stream(self.collection.path, params, WATCH_SECONDS + 30):
            kind, obj = str(event.get("type")), event.get("object") or {}
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self._deliver(kind, obj)
        return version

    def _deliver(self, kind: str, obj: Obj) -> None:
        if self._known is not None:
            key = key_of(obj)
            if kind == "DELETED":
                self._known.pop(key, None)
            else:
                self._known[key] = str((obj.get("metadata") or {}).get("uid") or "")
        self._on_event(kind, self._trim(obj))


def backoff(failures: int, rng: random.Random | None = None) -> float:
    """Seconds before the next try after ``failures`` in a row: doubling, capped,
    jittered in [50%, 100%] so several operators do not hammer in lockstep."""
    delay = min(MAX_BACKOFF, FIRST_BACKOFF * 2.0 ** (failures - 1))
    return delay * (rng or random).uniform(0.5, 1.0)


async def stream(path: str, params: dict[str, str], timeout: float) -> AsyncIterator[Obj]:
    """The events of one watch request; an ERROR event raises its typed error
    (``apierrors.Gone`` for an expired version)."""
    async with open_response("GET", path, params=params, timeout=timeout) as resp:
        parts: list[bytes] = []  # The current line's pieces: joined once, at its end.
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > EVENT_MAX_BYTES:
                raise ValueError(f"a watch event over {EVENT_MAX_BYTES} bytes")
            if b"\n" not in chunk:
                parts.append(chunk)
                continue
            first, *lines, rest = chunk.split(b"\n")
            for line in (b"".join([*parts, first]), *lines):
                if line.strip():
                    yield _event(line)
            parts, size = [rest], len(rest)


def _event(line: bytes) -> Obj:
    event: Obj = json.loads(line)
    if event.get("type") == "ERROR":
        status = event.get("object") or {}
        raise apierrors.from_status(int(status.get("code") or 500), status)
    return event
