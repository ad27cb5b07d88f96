"""The scheduler: the leader starts each ``schedule`` trigger's run at its tick.

It runs in the engine, so in the replica that holds the Lease only (``replica.py``),
and its writes pass the same write fence as every engine write.  Every
``schedule_tick_seconds`` it reads the AiAgents the engine's watch keeps
(``core/catalog.py``) and asks ``aiagents/rules/schedules.py`` which ticks are due; each
due tick becomes one root AgentJob whose name is derived from the agent, the schedule
and the tick's instant.  A replica that restarts, or a follower that takes over, finds
the same tick due and sends the same name: the API server answers ``AlreadyExists`` and
nothing runs twice.  Ticks this process already created or found are remembered until
they are no longer due, so a tick costs one request, not one per period.  Each run is
said once on its AiAgent as a Normal Event (``ScheduledRunCreated``, as a CronJob's
``SuccessfulCreate``), under a name derived from the run's, so the replica that created
it and one that found it after a crash say it once between them.

A missed tick (no leader at that moment) runs late, once, when it is within the
schedule's starting deadline, as a CronJob's does (docs/schedules.md).  The job is a
chain's root placed by the engine like any hand-made root: its event is the schedule's
(no GitHub event, so no token, write-back or workspace repository derives from it).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

from agentchain import models
from agentchain.aiagents.rules import schedules
from agentchain.aiagents.rules.resolution import Ambiguous
from agentchain.core import catalog
from agentchain.core.rules import naming
from agentchain.core.runtime import Runtime
from agentchain.flow.rules import concurrency
from agentchain.kube import apierrors, events, resources
from agentchain.models.agentjob import AgentJobSpec
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason

log = logging.getLogger(__name__)
Obj = dict[str, Any]
MANAGER = "agentchain"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Scheduler:
    """The ticks this process created or found, until each is no longer due."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.done: dict[str, dt.datetime] = {}

    async def tick(self, now: dt.datetime) -> list[str]:
        """Create every due run at ``now``; returns the names this call created."""
        self.done = {key: until for key, until in self.done.items() if until >= now}
        created: list[str] = []
        for namespace in self.rt.agents.namespaces():
            entries = self.rt.agents.cached(namespace)
            for obj, agent in entries:
                if not schedules.has_schedule(agent.spec):
                    continue
                if isinstance(catalog.by_trigger(entries, agent.spec.trigger_name), Ambiguous):
                    continue  # Its Ready condition says why; no run for either agent.
                created += await self._runs(namespace, obj, agent, now)
        return created

    async def _runs(self, namespace: str, obj: Obj, agent: AiAgent, now: dt.datetime) -> list[str]:
        created: list[str] = []
        for run in schedules.runs(namespace, agent.spec, _created(obj), now):
            name = naming.root_job_name(agent.spec.trigger_name, run.seed)
            key = f"{namespace}/{name}"
            if key in self.done:
                continue
            body = _body(namespace, name, agent, run)
            try:
                _, made = await resources.create(namespace, resources.AGENTJOBS, body)
            except apierrors.KubeError as exc:  # Tried again at the next pass, same name.
                log.warning("schedule: %s/%s not created: %s", namespace, name, exc)
                continue
            self.done[key] = run.until
            # Also when found: the replica that made it may have died before saying so.
            await _say(obj, name, run)
            if made:
                created.append(name)
                log.info(
                    "schedule: %s/%s: %s", namespace, agent.spec.trigger_name, _what(name, run)
                )
        return created


def _what(name: str, run: schedules.Run) -> str:
    return f"runs for {run.tick.isoformat()} ({schedules.describe(run.schedule)}) as {name}"


async def _say(obj: Obj, name: str, run: schedules.Run) -> None:
    try:
        await events.emit(obj, "Normal", Reason.SCHEDULED_RUN_CREATED, _what(name, run), key=name)
    except apierrors.KubeError as exc:  # An Event is not worth a retry of the run.
        log.warning("schedule: no Event for %s: %s", name, exc)


def _created(obj: Obj) -> dt.datetime | None:
    raw = (obj.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(raw, str):
        return None
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def _body(namespace: str, name: str, agent: AiAgent, run: schedules.Run) -> Obj:
    spec = AgentJobSpec(
        agent_role=agent.spec.trigger_name, event=schedules.event_of(run), origin="schedule"
    )
    return {
        "apiVersion": models.API_VERSION,
        "kind": "AgentJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {models.MANAGED_BY: MANAGER},
            # Its place in a concurrency group's queue: the tick, the same on every try.
            "annotations": {concurrency.TICKET: str(int(run.tick.timestamp() * 1_000_000))},
        },
        "spec": spec.to_api(),
    }


async def keep_scheduling(rt: Runtime) -> None:
    """Run until cancelled: one pass every ``schedule_tick_seconds``."""
    scheduler = Scheduler(rt)
    interval = float(rt.settings.schedule_tick_seconds)
    while True:
        try:
            await scheduler.tick(_now())
        except asyncio.CancelledError:
            raise
        except apierrors.KubeError as exc:  # Retried at the next pass; the name is the same.
            log.warning("schedule pass: %s", exc)
        except Exception:  # One bad pass must not end the scheduler.
            log.exception("schedule pass failed")
        await asyncio.sleep(interval)
