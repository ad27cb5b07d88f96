"""The scheduler's passes (``agentchain.handlers.scheduling``) against an in-process API
server and a real Redis, with "now" given.

Aspects covered:
- a due tick becomes one root AgentJob: its deterministic name, ``origin: schedule``,
  the tick and the schedule in its event, the tick as its concurrency ticket;
- passes within the deadline create it once; a new Scheduler (a restarted operator, a
  new leader) that finds the same tick due sends the same name and creates nothing;
- a tick past its deadline, a disabled agent, an agent whose triggerName another shares
  and a schedule that cannot be parsed create nothing;
- a create the API server refuses (403) is retried at the next pass, and does not stop
  the other agents' runs in the same pass.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from redis.asyncio import Redis

from agentchain.aiagents.rules import schedules
from agentchain.core.rules import naming
from agentchain.core.runtime import Runtime
from agentchain.flow.rules import concurrency
from agentchain.handlers.scheduling import Scheduler
from agentchain.models.aiagent import TriggerSchedule
from tests.unit.fakeapi import FakeApi, Obj
from tests.unit.hop.test_hop_write_order import NS, SETTINGS, api, kubeconfig

__all__ = ["api", "kubeconfig"]  # Fixtures.

TICK = dt.datetime(2026, 1, 15, 2, 0, tzinfo=dt.UTC)  # 03:00 in Paris.
NIGHTLY = {"cron": "0 3 * * *", "timeZone": "Europe/Paris"}


def scheduled(trigger: str, schedule: Obj, *, name: str | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AiAgent",
        "metadata": {"name": name or trigger, "namespace": NS},
        "spec": {
            "triggerName": trigger,
            "command": ["true"],
            "eventTriggers": [{"source": "schedule", "schedule": schedule}],
            **spec,
        },
    }


def job_name(trigger: str, schedule: Obj, tick: dt.datetime = TICK) -> str:
    seed = schedules.tick_seed(NS, trigger, TriggerSchedule.model_validate(schedule), tick)
    return naming.root_job_name(trigger, seed)


async def runtime(api: FakeApi, redis: Redis) -> Runtime:
    rt = Runtime.from_client(SETTINGS, redis)
    await rt.agents.refresh(NS)
    return rt


@pytest.mark.redis
async def test_a_due_tick_is_one_root_job(api: FakeApi, redis: Redis) -> None:
    api.put("aiagents", scheduled("ai-nightly", NIGHTLY))
    scheduler = Scheduler(await runtime(api, redis))
    created = await scheduler.tick(TICK + dt.timedelta(seconds=3))
    name = job_name("ai-nightly", NIGHTLY)
    assert created == [name]
    job = api.objects[("agentjobs", name)]
    assert job["spec"]["agentRole"] == "ai-nightly"
    assert job["spec"]["origin"] == "schedule"
    assert job["spec"]["event"]["scheduledAt"] == "2026-01-15T03:00:00+01:00"
    assert job["spec"]["event"]["schedule"] == "0 3 * * * in Europe/Paris"
    ticket = job["metadata"]["annotations"][concurrency.TICKET]
    assert ticket == str(int(TICK.timestamp() * 1_000_000))


@pytest.mark.redis
async def test_every_pass_and_every_new_scheduler_creates_the_tick_once(
    api: FakeApi, redis: Redis
) -> None:
    api.put("aiagents", scheduled("ai-nightly", NIGHTLY))
    rt = await runtime(api, redis)
    first = Scheduler(rt)
    for seconds in (0, 1, 2, 60, 299):
        await first.tick(TICK + dt.timedelta(seconds=seconds))
    creates = [w for w in api.writes if w.kind == "agentjobs"]
    assert len(creates) == 1  # The first pass created it; the others remembered it.
    restarted = Scheduler(rt)
    assert await restarted.tick(TICK + dt.timedelta(seconds=120)) == []
    assert len(api.of("agentjobs")) == 1  # AlreadyExists: done.


@pytest.mark.redis
async def test_what_creates_nothing(api: FakeApi, redis: Redis) -> None:
    api.put("aiagents", scheduled("ai-late", NIGHTLY))
    api.put("aiagents", scheduled("ai-off", NIGHTLY, enabled=False))
    api.put("aiagents", scheduled("ai-twice", NIGHTLY, name="twice-a"))
    api.put("aiagents", scheduled("ai-twice", NIGHTLY, name="twice-b"))
    api.put("aiagents", scheduled("ai-never", {"cron": "0 0 30 2 *"}))
    scheduler = Scheduler(await runtime(api, redis))
    assert await scheduler.tick(TICK + dt.timedelta(seconds=301)) == []  # Past the deadline.
    api.remove("aiagents", "ai-late")
    await scheduler.rt.agents.refresh(NS)
    assert await scheduler.tick(TICK + dt.timedelta(seconds=10)) == []
    assert api.of("agentjobs") == []


@pytest.mark.redis
async def test_a_refused_create_is_retried_and_holds_up_no_other_agent(
    api: FakeApi, redis: Redis
) -> None:
    api.put("aiagents", scheduled("ai-a", NIGHTLY))
    api.put("aiagents", scheduled("ai-b", NIGHTLY))
    scheduler = Scheduler(await runtime(api, redis))
    posts = 0

    async def refuse_the_first_create(method: str, kind: str, name: str | None) -> None:
        nonlocal posts
        if method == "POST":
            posts += 1
            api.fail_at = len(api.writes) if posts == 1 else None  # 403, not retried.

    api.before_request = refuse_the_first_create
    created = await scheduler.tick(TICK + dt.timedelta(seconds=1))
    assert created == [job_name("ai-b", NIGHTLY)]
    assert await scheduler.tick(TICK + dt.timedelta(seconds=6)) == [job_name("ai-a", NIGHTLY)]
    assert len(api.of("agentjobs")) == 2
