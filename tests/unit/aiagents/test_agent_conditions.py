"""An AiAgent's conditions stay true with two writers and concurrent evaluations,
against the in-process API server.

kopf runs the handlers of different AiAgents at once, and every one re-evaluates the
whole namespace (CI once saw ``ai-ping`` keep ``LoopFree=True`` after ``ai-pong``
closed its ring: an evaluation listed before ``ai-pong`` existed wrote last).
Aspects covered:
- an evaluation from an older list never lands after one from a newer list;
- ``GitHubWriteBack`` written between an evaluation's list and its write survives it;
- ``Ready`` and ``LoopFree`` survive a ``GitHubWriteBack`` written from a stale body;
- nothing is written when nothing changed;
- ``Scheduled`` appears on an agent with a schedule trigger only, says why a schedule
  cannot be followed, and says there is none once the last schedule trigger is gone;
- a burst of evaluations (a restart resumes every agent) lists the namespace at most
  twice: requests made while one waits for its turn are folded into it.
"""

from __future__ import annotations

import asyncio
import copy

import pytest
from redis.asyncio import Redis

from agentchain.aiagents import readiness
from agentchain.core.runtime import Runtime
from agentchain.github import writeback
from tests.unit.fakeapi import FakeApi, Obj, Write
from tests.unit.hop.test_hop_write_order import NS, SETTINGS, agent, api, kubeconfig

__all__ = ["api", "kubeconfig"]  # Fixtures.


def condition(api: FakeApi, name: str, type_: str) -> Obj:
    stored = api.objects[("aiagents", name)]
    found = [c for c in stored.get("status", {}).get("conditions", []) if c["type"] == type_]
    return found[0] if found else {}


def status_writes(api: FakeApi) -> list[Write]:
    return [w for w in api.writes if w.kind == "aiagents/status"]


@pytest.mark.redis
async def test_an_older_evaluation_never_lands_after_a_newer_one(
    api: FakeApi, redis: Redis
) -> None:
    rt = Runtime.from_client(SETTINGS, redis)
    api.put("aiagents", agent("ai-ping", "ai-pong"))
    racing: list[asyncio.Task[None]] = []

    async def pong_arrives(write: Write) -> None:
        # The first evaluation has listed ai-ping alone; ai-pong closes the ring now and
        # its own evaluation starts, with time to list and write before this one goes on.
        if write.kind == "aiagents/status" and not racing:
            api.put("aiagents", agent("ai-pong", "ai-ping"))
            racing.append(asyncio.create_task(readiness.reconcile_namespace(rt, NS)))
            await asyncio.sleep(0.3)

    api.before_write = pong_arrives
    await readiness.reconcile_namespace(rt, NS)
    await asyncio.gather(*racing)
    for name in ("ai-ping", "ai-pong"):
        loop = condition(api, name, "LoopFree")
        assert (loop["status"], loop["reason"]) == ("False", "StaticLoop"), loop
        assert condition(api, name, "Ready")["status"] == "True"


@pytest.mark.redis
async def test_a_write_back_condition_written_meanwhile_survives(
    api: FakeApi, redis: Redis
) -> None:
    rt = Runtime.from_client(SETTINGS, redis)
    api.put("aiagents", agent("ai-solo"))
    written_back = {
        "type": "GitHubWriteBack",
        "status": "True",
        "reason": "WrittenBack",
        "message": "m",
        "lastTransitionTime": "2026-11-25T00:00:00Z",
    }

    async def write_back_first(write: Write) -> None:
        if write.kind == "aiagents/status" and not api.writes:
            stored = copy.deepcopy(api.objects[("aiagents", "ai-solo")])
            api.put("aiagents", {**stored, "status": {"conditions": [written_back]}})

    api.before_write = write_back_first
    await readiness.reconcile_namespace(rt, NS)
    assert condition(api, "ai-solo", "GitHubWriteBack") == written_back
    assert condition(api, "ai-solo", "Ready")["status"] == "True"
    assert condition(api, "ai-solo", "LoopFree")["status"] == "True"
    refused, written = (w.body["metadata"]["resourceVersion"] for w in status_writes(api))
    assert refused != written  # Refused at the version listed, written at the one read.


@pytest.mark.redis
async def test_a_write_back_from_a_stale_body_keeps_ready(api: FakeApi, redis: Redis) -> None:
    rt = Runtime.from_client(SETTINGS, redis)
    stale = copy.deepcopy(api.put("aiagents", agent("ai-solo")))  # As the catalog saw it.
    await readiness.reconcile_namespace(rt, NS)
    await writeback.agent_condition(stale, "NotInstalled", "The app is not installed.")
    assert condition(api, "ai-solo", "Ready")["status"] == "True"
    failed = condition(api, "ai-solo", "GitHubWriteBack")
    assert (failed["status"], failed["reason"]) == ("False", "NotInstalled")


@pytest.mark.redis
async def test_nothing_changed_nothing_written(api: FakeApi, redis: Redis) -> None:
    rt = Runtime.from_client(SETTINGS, redis)
    api.put("aiagents", agent("ai-solo"))
    await readiness.reconcile_namespace(rt, NS)
    assert len(status_writes(api)) == 1
    await readiness.reconcile_namespace(rt, NS)
    stored = copy.deepcopy(api.objects[("aiagents", "ai-solo")])
    await writeback.agent_condition(stored, None, "")
    await writeback.agent_condition(api.objects[("aiagents", "ai-solo")], None, "other words")
    assert len(status_writes(api)) == 2  # Ready/LoopFree once, GitHubWriteBack once.


@pytest.mark.redis
async def test_a_burst_of_evaluations_lists_the_namespace_at_most_twice(
    api: FakeApi, redis: Redis
) -> None:
    rt = Runtime.from_client(SETTINGS, redis)
    for i in range(10):
        api.put("aiagents", agent(f"ai-{i}", f"ai-{(i + 1) % 10}"))  # One ring of ten.
    await asyncio.gather(*(readiness.reconcile_namespace(rt, NS) for _ in range(10)))
    assert 1 <= api.reads.count("aiagents") <= 2, api.reads
    for i in range(10):
        assert condition(api, f"ai-{i}", "LoopFree")["reason"] == "StaticLoop"


@pytest.mark.redis
async def test_the_scheduled_condition_follows_the_schedule_triggers(
    api: FakeApi, redis: Redis
) -> None:
    rt = Runtime.from_client(SETTINGS, redis)
    plain = api.put("aiagents", agent("ai-plain"))
    nightly = agent("ai-nightly")
    nightly["spec"]["eventTriggers"].append(
        {"source": "schedule", "schedule": {"cron": "0 0 30 2 *"}}
    )
    api.put("aiagents", nightly)
    await readiness.reconcile_namespace(rt, NS)
    assert condition(api, "ai-plain", "Scheduled") == {}, plain
    bad = condition(api, "ai-nightly", "Scheduled")
    assert (bad["status"], bad["reason"]) == ("False", "InvalidSchedule"), bad

    fixed = copy.deepcopy(api.objects[("aiagents", "ai-nightly")])
    fixed["spec"]["eventTriggers"][1]["schedule"]["cron"] = "0 3 * * *"
    api.put("aiagents", fixed)
    await readiness.reconcile_namespace(rt, NS)
    good = condition(api, "ai-nightly", "Scheduled")
    assert (good["status"], good["message"]) == ("True", "Runs on 0 3 * * * in UTC."), good

    removed = copy.deepcopy(api.objects[("aiagents", "ai-nightly")])
    removed["spec"]["eventTriggers"].pop()
    api.put("aiagents", removed)
    await readiness.reconcile_namespace(rt, NS)
    gone = condition(api, "ai-nightly", "Scheduled")
    assert (gone["status"], gone["message"]) == ("True", "The agent has no schedule trigger.")
