"""Engine start-up and shutdown: kopf settings and the engine's background tasks.

kopf runs only in the replica that leads (``replica.py``), which also owns the Runtime
and the web server: both live as long as the process, on every replica, so this
start-up handler takes the Runtime from the memo and starts only what belongs to the
engine (the resync, the scheduler).  Launched some other way (no Runtime in the memo),
it builds one from the environment and closes it on cleanup, serving no web.

kopf's own progress and diff-base records go to annotations under our group
so users never see kopf internals in ``status``; kopf's handler-log Events are
off because the operator emits its own, meaningful ones.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, cast

import kopf

from agentchain.cancelling import stop_tasks
from agentchain.core.runtime import Runtime
from agentchain.github import appruntime
from agentchain.handlers import scheduling, watches
from agentchain.hop import resync
from agentchain.settings import Settings

log = logging.getLogger(__name__)
PREFIX = "kopf.labrats.work"


class AiAgentDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base, built for AiAgents only.

    kopf builds one (a deep copy of the whole object) for every event of every
    watched resource, but only AiAgents have change handlers that read it; pods,
    batch Jobs and AgentJobs have event handlers only, and copying each of their
    events was a tenth of the operator's CPU on a busy chain.
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        if body.get("kind") != "AiAgent":
            return cast(kopf.BodyEssence, {})
        return super().build(body=body, extra_fields=extra_fields)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = AiAgentDiffBase(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.posting.enabled = False
    # kopf logs an INFO line per handler call ("Handler 'reconcile' succeeded.", "...is
    # processed") under ``kopf.objects``: a line per AiAgent per event, none of them a
    # transition.  Its warnings and errors (a handler failing, a retry) still show.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    settings.watching.server_timeout = 300
    settings.queueing.idle_timeout = 0.1
    # `agentchain run` hands over its flags and its Runtime in the memo.
    config = getattr(memo, "settings", None) or Settings()
    if config.namespaces and not any(watches.is_pattern(ns) for ns in config.namespaces):
        # Named namespaces: resources come from API discovery once, and no namespace or
        # CRD is watched, so the chart's per-namespace Roles are all the operator needs.
        settings.scanning.disabled = True
    runtime = getattr(memo, "runtime", None)
    if runtime is None:
        runtime = memo.runtime = Runtime.create(config)
        memo.owns_runtime = True
    memo.resyncer = asyncio.create_task(resync.keep_resyncing(runtime), name="resync")
    memo.scheduler = asyncio.create_task(scheduling.keep_scheduling(runtime), name="schedule")
    memo.exporter = runtime.traces.start_exporting()  # The leader's; None when off.
    memo.watches = watches.start(runtime)  # AgentJobs, batch Jobs, pods: our own.


@kopf.on.cleanup()
async def shutdown(memo: kopf.Memo, **_: Any) -> None:
    tasks = [getattr(memo, name, None) for name in ("resyncer", "scheduler", "exporter")]
    await stop_tasks([task for task in tasks if task is not None])
    if getattr(memo, "watches", None) is not None:
        await memo.watches.stop()
    runtime = getattr(memo, "runtime", None)
    if runtime is not None:
        # The write-back worker stops before the runtime closes under it. It starts on
        # the first AgentJob that came through an App installation
        # (``github/writeback.observe``); whatever it had not written yet is redone by
        # the next operator, whose watch lists every AgentJob again.
        await appruntime.close(runtime)
    if runtime is not None and getattr(memo, "owns_runtime", False):
        await runtime.close()
