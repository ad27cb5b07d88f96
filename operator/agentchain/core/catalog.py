"""AiAgents by namespace, kept in memory from the operator's own watch.

Every hop needs the agents of its namespace (the finished agent's trigger, the
next agent's existence and ``enabled``).  Listing them from the API server on
each hop cost ~70-90 ms: a list is a consistent read, and the API server holds
it until its watch cache has caught up with etcd, which after a write to
another resource means waiting for etcd's next progress notification.  The
watch kopf already holds delivers every change, so the catalog is that watch's
picture, like a controller-runtime informer.

A positive answer may be a few milliseconds stale, as any informer's is.  A
negative one (no such agent, or disabled) is confirmed by a fresh list before
anyone acts on it, so a just-created agent is never refused because its watch
event has not arrived yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from typing import Any

from agentchain.aiagents.rules import resolution as agent_policy
from agentchain.aiagents.rules.resolution import Ambiguous
from agentchain.kube import resources
from agentchain.models.aiagent import AiAgent

Obj = dict[str, Any]
Entry = tuple[Obj, AiAgent]


def _version(obj: Obj) -> int | None:
    raw = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _newer(candidate: Obj, current: Obj) -> bool:
    """Whether ``candidate`` should replace ``current`` (unknown versions: yes)."""
    new, old = _version(candidate), _version(current)
    return new is None or old is None or new >= old


def _parse(obj: Obj) -> AiAgent | None:
    try:
        return AiAgent.model_validate(obj)
    except ValueError:
        return None  # The CRD schema makes this unreachable; never crash on it.


class AgentCatalog:
    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, Entry]] = {}
        self._evaluating: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._waiting: set[str] = set()

    @contextlib.asynccontextmanager
    async def evaluating(self, namespace: str) -> AsyncIterator[bool]:
        """Take turns evaluating a namespace's agents; yields False when another
        evaluation is already waiting for its turn, which will list after this change
        (so this one need not run).

        kopf runs the handlers of different agents at once, and an evaluation made from
        an older list must not land after one made from a newer list; and a restart
        resumes every agent, which would otherwise list the namespace once per agent.
        """
        if namespace in self._waiting:
            yield False
            return
        lock = self._evaluating.get(namespace)
        if lock is None:
            lock = asyncio.Lock()
            self._evaluating[namespace] = lock
        self._waiting.add(namespace)
        try:
            await lock.acquire()
        finally:
            self._waiting.discard(namespace)  # Its turn, or cancelled while waiting.
        try:
            yield True
        finally:
            lock.release()

    def observe(self, obj: Obj, *, deleted: bool = False) -> None:
        """Apply one watch event."""
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace"), meta.get("name")
        if not namespace or not name:
            return
        agents = self._by_namespace.setdefault(namespace, {})
        current = agents.get(name)
        if current is not None and not _newer(obj, current[0]):
            return
        parsed = None if deleted else _parse(obj)
        if parsed is None:
            agents.pop(name, None)
        else:
            agents[name] = (obj, parsed)

    def namespaces(self) -> list[str]:
        """The namespaces whose AiAgents the catalog has seen."""
        return list(self._by_namespace)

    def cached(self, namespace: str) -> list[Entry]:
        # Name order, as the API server lists them, so duplicates resolve the same way.
        agents = self._by_namespace.get(namespace, {})
        return [agents[name] for name in sorted(agents)]

    async def refresh(self, namespace: str) -> list[Entry]:
        """A fresh list from the API server, merged into the catalog."""
        items, _ = await resources.list_objects(namespace, resources.AIAGENTS)
        listed = {item["metadata"]["name"] for item in items}
        agents = self._by_namespace.setdefault(namespace, {})
        for name in [n for n in agents if n not in listed]:
            del agents[name]  # Deleted while the watch was away (or not yet seen).
        for item in items:
            self.observe(item)
        return self.cached(namespace)

    async def agents_in(self, namespace: str) -> list[Entry]:
        known = self.cached(namespace)
        return known if known else await self.refresh(namespace)

    async def by_trigger(self, namespace: str, trigger: str) -> AiAgent | Ambiguous | None:
        """The agent for ``trigger``; a miss, a disabled agent or an ambiguous
        triggerName (used by two agents) is confirmed first."""
        found = by_trigger(self.cached(namespace), trigger)
        if not isinstance(found, AiAgent) or not found.spec.enabled:
            found = by_trigger(await self.refresh(namespace), trigger)
        return found


def by_trigger(entries: list[Entry], trigger: str) -> AiAgent | Ambiguous | None:
    """The one agent of ``entries`` with ``trigger``, as ``resolution.resolve`` decides."""
    named = [(obj["metadata"]["name"], agent) for obj, agent in entries]
    return agent_policy.resolve(trigger, named, lambda a: a.spec.trigger_name)
