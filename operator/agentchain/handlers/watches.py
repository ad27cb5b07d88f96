"""The operator's own watches of AgentJobs, batch Jobs and pods, started with it.

kopf keeps watching AiAgents (few, small, and with change handlers); the three
collections that grow with the backlog are watched by ``kube.watching`` instead:
label-selected, listed in pages, trimmed to what the engine reads.  The order is
what makes a restart cheap: AgentJobs are listed first, so the index knows which
jobs are settled before the first Job or pod event arrives, and those events are
dropped without any request; Jobs are listed before pods, so a pod's controlling
Job is in the ownership index when the pod is looked at.

Scopes: each named namespace gets its own three watches (the chart's per-namespace
Roles suffice); no namespaces, or patterns (kopf's globs and ``!`` negations), are
watched cluster-wide and the patterns applied to each object.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentchain import models
from agentchain.cancelling import stop_tasks
from agentchain.core.runtime import Runtime
from agentchain.handlers import jobevents, podevents
from agentchain.handlers.ordering import Dispatcher, Submit
from agentchain.kube import clients
from agentchain.kube.watching import Collection, Watcher

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Consumer = Callable[[Runtime, Submit, str, Obj], None]
SELECTOR = models.AGENTJOB_LABEL  # Present, whatever its value.


def is_pattern(namespace: str) -> bool:
    """Whether kopf reads ``namespace`` as a glob or negation rather than a name."""
    return any(c in namespace for c in "*?[]!,")


def namespace_filter(patterns: list[str]) -> Callable[[str], bool]:
    """kopf's reading of namespace patterns: any positive glob (or none) matches,
    and no ``!``-negated one does."""
    globs = [g.strip() for p in patterns for g in p.split(",") if g.strip()]
    include = [g for g in globs if not g.startswith("!")]
    exclude = [g[1:] for g in globs if g.startswith("!")]

    def matches(namespace: str) -> bool:
        if include and not any(fnmatch.fnmatchcase(namespace, g) for g in include):
            return False
        return not any(fnmatch.fnmatchcase(namespace, g) for g in exclude)

    return matches


def _collections(namespace: str | None) -> tuple[Collection, Collection, Collection]:
    if namespace is None:
        jobs = clients.path("apis", "batch", "v1", "jobs")
        pods = clients.path("api", "v1", "pods")
    else:
        jobs, pods = clients.batch_path(namespace), clients.core_path(namespace, "pods")
    return (
        Collection(clients.custom_path(namespace, "agentjobs")),
        Collection(jobs, label_selector=SELECTOR),
        Collection(pods, label_selector=SELECTOR),
    )


@dataclass
class Watches:
    runtime: Runtime
    dispatcher: Dispatcher
    watchers: list[list[Watcher]] = field(default_factory=list)  # AgentJobs, Jobs, pods
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def _consumer(self, consume: Consumer, allowed: Callable[[str], bool]) -> Any:
        def on_event(kind: str, obj: Obj) -> None:
            if allowed(str((obj.get("metadata") or {}).get("namespace") or "")):
                consume(self.runtime, self.dispatcher.submit, kind, obj)

        return on_event

    async def _run_in_order(self) -> None:
        """Each kind's watches once the previous kind's lists are in; then the backlog
        is only what the dispatcher still has."""
        for watchers in self.watchers:
            for watcher in watchers:
                self.tasks.append(asyncio.create_task(watcher.run(), name="watch"))
            await asyncio.gather(*(w.listed.wait() for w in watchers))
        self.dispatcher.settle_backlog()
        log.info(
            "initial lists in: %d unsettled AgentJobs, %d with work",
            len(self.runtime.unsettled),
            len(self.dispatcher),
        )

    async def stop(self) -> None:
        await stop_tasks(self.tasks)
        await self.dispatcher.close()


def start(runtime: Runtime) -> Watches:
    namespaces = list(runtime.settings.namespaces)
    patterned = not namespaces or any(is_pattern(ns) for ns in namespaces)
    scopes: list[str | None] = [None] if patterned else list[str | None](namespaces)
    allowed = namespace_filter(namespaces) if namespaces else (lambda _: True)
    runtime.unsettled.reset()  # A replica leading again starts from fresh lists.
    watches = Watches(runtime, Dispatcher(runtime.unsettled.backlog))
    kinds: list[tuple[Consumer, Any]] = [
        (jobevents.observed, jobevents.trim),
        (podevents.job_changed, podevents.trim_job),
        (podevents.pod_changed, podevents.trim_pod),
    ]
    for index, (consume, trim) in enumerate(kinds):
        on_event = watches._consumer(consume, allowed)
        watches.watchers.append(
            [
                Watcher(_collections(ns)[index], on_event, trim=trim, track_deletions=index == 0)
                for ns in scopes
            ]
        )
    watches.tasks.append(asyncio.create_task(watches._run_in_order(), name="watches"))
    return watches
