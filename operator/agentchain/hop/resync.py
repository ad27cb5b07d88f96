"""The periodic resync: catch up on whatever happened while the operator was away.

Watches can miss events (operator down, watch expired) and a handler can fail on a
transient error; every ``resync_seconds`` each unsettled AgentJob is reconciled
(``hop.reconciling``: the same function every event ends in, which redoes the next
idempotent step).  Two looks are the resync's own: a chain over its wall-time budget
is stopped (``flow/budgeting``), and a running job whose batch Job the watch shows
not ended is skipped without a request (``Unsettled.quiet``): its end still arrives
as an event, and an event whose handler failed leaves the Job ended, so the next
resync looks.  Before, each running job cost three requests per period (Job, pod
list, AgentJob): 500 running jobs, a second of CPU every 10 s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from redis.exceptions import RedisError

from agentchain.core import statuswriting
from agentchain.core.runtime import Runtime
from agentchain.flow import admitting, budgeting
from agentchain.hop import reconciling, stopping
from agentchain.kube import apierrors
from agentchain.workspaces import publishing

log = logging.getLogger(__name__)
# Resyncs run side by side, but not all at once after a long outage.
CONCURRENCY = 8


async def resync(rt: Runtime, obj: dict[str, Any]) -> None:
    """One unsettled job's periodic look."""
    if await budgeting.check_running(rt, obj):
        return  # Over its chain's wall-time budget: stopping.
    if rt.unsettled.quiet(obj) and not stopping.wants_stop(obj):
        return  # Running, its batch Job not ended, as the watches show: nothing missed.
    await reconciling.reconcile(rt, *statuswriting.name_of(obj))


async def keep_resyncing(rt: Runtime) -> None:
    """Run until cancelled: resync each unsettled job once per ``resync_seconds``."""
    interval = float(rt.settings.resync_seconds)
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(obj: dict[str, Any]) -> None:
        async with gate:
            try:
                await resync(rt, obj)
            except asyncio.CancelledError:
                raise
            except apierrors.KubeError as exc:
                # Expected now and then (a namespace being deleted answers 403 to every
                # create; the API server down past the client's retries): one line per
                # job and tick, retried at the next tick.
                log.warning("resync of %s/%s: %s", *statuswriting.name_of(obj), exc)
            except Exception:  # One job's failure must not stop the others' resync.
                log.exception("resync of %s/%s failed", *statuswriting.name_of(obj))

    swept = 0.0
    while True:
        await asyncio.sleep(min(interval, 1.0))
        due = rt.unsettled.take_due(time.monotonic(), interval)
        if due:
            await asyncio.gather(*(one(obj) for obj in due))
        try:
            await admitting.repair_due(rt)  # Concurrency slots the CRs say are free.
        except (apierrors.KubeError, RedisError) as exc:
            log.warning("repairing concurrency slots: %s", exc)
        # Volumes whose keepFor passed, pull requests GitHub failed to open.
        if time.monotonic() - swept >= interval:
            swept = time.monotonic()
            try:
                await publishing.sweep(rt)
            except (apierrors.KubeError, RedisError) as exc:
                log.warning("workspace sweep (volumes, pull requests): %s", exc)
