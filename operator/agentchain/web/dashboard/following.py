"""Live dashboard pages on a follower: an AgentJob watch of its own feeds ``Runtime.feed``.

On the leader, kopf's AgentJob handler publishes every change to the feed
(``handlers/jobevents.observed``).  A follower runs no kopf, so the pages it serves
would load but never update.  While the replica follows, this task watches the
AgentJobs of the served namespaces (every namespace when none is named) and publishes
what it sees; ``replica.py`` cancels it when the replica starts to lead, and kopf's
handler takes over.  A watch is a read: no fence applies, and a follower writes nothing.
A broken or expired watch starts again from the collection's current version (a page
that missed something in between reloads on the next change it does get).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from agentchain.core.runtime import Runtime
from agentchain.kube import resources

log = logging.getLogger(__name__)
WATCH_SECONDS = 300
RETRY_SECONDS = 2.0
EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})


async def feed(rt: Runtime, namespaces: Sequence[str]) -> None:
    """Publish AgentJob changes until cancelled."""
    targets: list[str | None] = list(namespaces) or [None]
    await asyncio.gather(*(_watch_forever(rt, namespace) for namespace in targets))


async def _watch_forever(rt: Runtime, namespace: str | None) -> None:
    while True:
        try:
            version = await resources.list_version(namespace, resources.AGENTJOBS)  # type: ignore[arg-type]
            events = resources.watch(namespace, resources.AGENTJOBS, version, WATCH_SECONDS)  # type: ignore[arg-type]
            async for event in events:
                if event.get("type") in EVENTS:
                    rt.feed.publish(event["type"], event["object"])
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # The API server, an expired version: start over.
            log.warning("follower's AgentJob feed: %s; again in %.0fs", exc, RETRY_SECONDS)
            await asyncio.sleep(RETRY_SECONDS)
