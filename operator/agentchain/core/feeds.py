"""AgentJob changes fanned out to live dashboard pages, from the watch the operator holds.

The dashboard's pages update while a chain runs.  Polling the API server
once per open page would cost one list per viewer per second; instead the AgentJob
event handler, which sees every change already, calls :meth:`JobFeed.publish` with
each one, and every open page's event stream holds a :class:`Subscription`.

Publishing never waits and never fails: a subscriber's queue is bounded, and one that
falls behind (a stalled browser) is marked ``overflowed`` and gets nothing more until
it has caught up by reloading; its stream tells the page to do so.  So a slow viewer
costs bounded memory and never slows the engine.  Objects are shared, not copied:
subscribers must not mutate them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
# Changes one subscriber may have unread before it is told to reload instead.
QUEUE_SIZE = 512


@dataclass(frozen=True, slots=True)
class Change:
    """One watch event: ``deleted`` when the object is gone."""

    obj: Obj
    deleted: bool

    @property
    def namespace(self) -> str:
        return str((self.obj.get("metadata") or {}).get("namespace") or "")

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name") or "")


@dataclass(eq=False)
class Subscription:
    """What one open page receives; ``overflowed`` once it missed a change."""

    queue: asyncio.Queue[Change] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    overflowed: bool = False

    def offer(self, change: Change) -> None:
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(change)
        except asyncio.QueueFull:
            self.overflowed = True


class JobFeed:
    """Every AgentJob change the operator's watch sees, for whoever subscribes."""

    def __init__(self) -> None:
        self._subscribers: set[Subscription] = set()

    def publish(self, event_type: str | None, obj: Obj) -> None:
        change = Change(obj, deleted=event_type == "DELETED")
        for subscriber in tuple(self._subscribers):
            subscriber.offer(change)

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[Subscription]:
        subscription = Subscription()
        self._subscribers.add(subscription)
        try:
            yield subscription
        finally:
            self._subscribers.discard(subscription)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)
