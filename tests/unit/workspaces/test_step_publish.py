"""Publishing after a step (``publishAfterStep``, issue 18), against the in-process API
server and a real Redis.

Aspects covered:
- the hop: the parent ``p`` (agent ``writer``, asking ``publishAfterStep``; the chain's
  workspace has ``publish: true``) succeeded and its chain goes on: its publish Job,
  ``agentchain-publish-c0ffee-<digest>``, is created before the child and before the
  parent's marker, owned by and labelled with ``p``, with the push credential's
  Secret; the chain is not completed and nothing is released;
- nothing of it when the agent does not ask, or the chain's workspace is not
  published, or the job failed (its ``onFailure`` child spawned all the same);
- a crash before any one of the hop's writes, then the replay: one step publish Job,
  the same objects as an uninterrupted hop;
- its end (``publishing.on_job``): the step's AgentJob gets ``WorkspacePublished`` and a
  Normal Event, the chain's one pull request is opened, the push token revoked, the
  outcome recorded under the Job's name (a second sight of the Job does nothing),
  neither ``published`` nor the volume's release; the chain's final publish after it
  updates that same pull request, and is recorded and releases the volume as before;
- a step's publish and the chain's final one ending at once: one pull request (the
  per-chain lock around it);
- a step publish that failed: ``WorkspacePublished=False`` on the step's AgentJob, the
  Warning naming the step's Job; no pull request.
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest
from redis.asyncio import Redis

from agentchain import models
from agentchain.core.hopstate import Exit
from agentchain.core.runtime import Runtime
from agentchain.github.appruntime import side_of
from agentchain.github.rules.githubscope import Scope
from agentchain.kube import apierrors
from agentchain.models.aiagent import Workspace
from agentchain.workspaces import attaching, publishing
from agentchain.workspaces.rules import jobmounts
from tests.unit.fakeapi import FakeApi, Obj, sealed
from tests.unit.hop.test_hop_write_order import NS, SETTINGS, api, hop, kubeconfig, seed
from tests.unit.hop.watched import pod_ended
from tests.unit.workspaces import test_workspace_pulls as pulls

__all__ = ["api", "kubeconfig"]  # Fixtures.
pytestmark = pytest.mark.redis
CHAIN = "c0ffee"
STEP_JOB = jobmounts.step_publish_job_name(CHAIN, "p")
github = pulls.github
rt = pulls.rt


async def workspace(redis: Redis, *, publish: bool = True) -> None:
    declared = Workspace(repository="https://git.example/octo/app.git", publish=publish)
    chain = jobmounts.resolve(declared, None, CHAIN, "https://gh")
    assert isinstance(chain, jobmounts.ChainWorkspace)
    await attaching.store(Runtime.from_client(SETTINGS, redis)).claim(NS, CHAIN, chain.to_record())


def ask(api: FakeApi, after_step: bool = True, exit_code: int = 0) -> None:
    """The writer declares ``publishAfterStep``; ``exit_code``: its attempt's end."""
    writer = api.objects[("aiagents", "writer")]
    writer["spec"]["workspace"] = {"publishAfterStep": after_step}
    if exit_code:
        (manual,) = writer["spec"]["eventTriggers"]
        manual["next"]["condition"] = "always"


def step_jobs(api: FakeApi) -> list[Obj]:
    return [j for j in api.of("jobs") if j["metadata"]["name"].startswith("agentchain-publish-")]


async def test_the_hop_starts_the_steps_publish_before_its_marker(
    api: FakeApi, redis: Redis
) -> None:
    seed(api)
    ask(api)
    await workspace(redis)
    await hop(redis)
    (job,) = step_jobs(api)
    meta = job["metadata"]
    assert meta["name"] == STEP_JOB and len(STEP_JOB) <= 63
    parent = api.objects[("agentjobs", "p")]
    (owner,) = meta["ownerReferences"]
    assert (owner["name"], owner["uid"]) == ("p", parent["metadata"]["uid"])
    assert meta["labels"][models.AGENTJOB_LABEL] == "p"
    assert meta["labels"][jobmounts.WORKSPACE_LABEL] == CHAIN
    secret = job["spec"]["template"]["spec"]["volumes"][1]["secret"]["secretName"]
    assert ("secrets", secret) in api.objects
    order = [(w.kind, w.name) for w in api.writes]
    created = order.index(("jobs", STEP_JOB))
    child = next(i for i, (k, n) in enumerate(order) if k == "agentjobs" and n != "p")
    assert created < child < order.index(("agentjobs/status", "p"))
    assert parent["status"]["next"][0]["action"] == "spawned"
    assert not parent["status"].get("chainComplete")
    store = attaching.store(Runtime.from_client(SETTINGS, redis))
    assert await store.due(NS, now=time.time() + 1e9) == []


@pytest.mark.parametrize(
    ("after_step", "publish", "exit_code"),
    [(False, True, 0), (True, False, 0), (True, True, 1)],
    ids=["not-asked", "not-published", "failed"],
)
async def test_no_step_publish_unless_asked_published_and_succeeded(
    api: FakeApi, redis: Redis, after_step: bool, publish: bool, exit_code: int
) -> None:
    seed(api)
    ask(api, after_step, exit_code)
    await workspace(redis, publish=publish)
    if exit_code:
        failed = Exit(attempt=1, exit_code=exit_code, pod="p-pod", batch_uid="job-uid")
        runtime = Runtime.from_client(SETTINGS, redis)
        await pod_ended(runtime, NS, "p", failed)
        status = api.objects[("agentjobs", "p")]["status"]
        assert status["phase"] == "Failed" and status["next"][0]["action"] == "spawned"
    else:
        await hop(redis)
    assert step_jobs(api) == []


async def test_a_crash_before_any_write_replays_to_one_step_publish(
    api: FakeApi, redis: Redis
) -> None:
    async def fresh() -> None:
        await redis.flushdb()
        api.objects.clear()
        api.writes.clear()
        seed(api)
        ask(api)
        await workspace(redis)

    await fresh()
    await hop(redis)
    expected, writes = _state(api), len(api.writes)
    for crash_at in range(writes):
        await fresh()
        api.fail_at = crash_at
        with pytest.raises(apierrors.Forbidden):
            await hop(redis)
        api.fail_at = None
        await hop(redis)
        assert _state(api) == expected, f"crashed before write {crash_at}"
        assert [j["metadata"]["name"] for j in step_jobs(api)] == [STEP_JOB]


def _state(api: FakeApi) -> dict[str, Any]:
    """The AgentJobs' phases and ``next``, and the Jobs' names."""
    jobs = {
        o["metadata"]["name"]: (o["status"].get("phase"), o["status"].get("next"))
        for o in api.of("agentjobs")
    }
    return {"agentjobs": jobs, "jobs": sorted(j["metadata"]["name"] for j in api.of("jobs"))}


STEP = "fix-2"
STEP_PUBLISH = jobmounts.step_publish_job_name(pulls.CHAIN, STEP)


def step_job(api: FakeApi) -> Obj:
    step = copy.deepcopy(pulls.root_job())
    step["metadata"]["name"] = STEP
    api.put("agentjobs", sealed(step))
    return step


def step_publish(ended: str = "Complete") -> Obj:
    labels = {models.AGENTJOB_LABEL: STEP, jobmounts.WORKSPACE_LABEL: pulls.CHAIN}
    return {
        "metadata": {"name": STEP_PUBLISH, "namespace": NS, "labels": labels},
        "status": {"conditions": [{"type": ended, "status": "True"}]},
    }


def published_condition(api: FakeApi, name: str) -> dict[str, Any] | None:
    conditions = api.objects[("agentjobs", name)].get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "WorkspacePublished"), None)


async def test_a_steps_publish_ends_on_its_agentjob_and_the_chain_goes_on(
    rt: Runtime, api: FakeApi, github: pulls.FakeGitHub
) -> None:
    step_job(api)
    store = attaching.store(rt)
    side = side_of(rt)
    assert side is not None
    await side.tokens.record(NS, STEP_PUBLISH, "push-token", time.time() + 3600)
    await publishing.on_job(rt, step_publish())

    cond = published_condition(api, STEP)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "WorkspacePublished")
    assert cond["message"].endswith("Pull request #1.")
    assert ("Normal", "WorkspacePublished", cond["message"]) in pulls.events(api)
    assert published_condition(api, pulls.ROOT) is None
    assert list(github.pulls) == [1] and github.pulls[1]["head"] == pulls.BRANCH
    assert "revoke" in github.calls
    assert await store.noted(NS, pulls.CHAIN, f"published:{STEP_PUBLISH}") == "pushed"
    assert await store.noted(NS, pulls.CHAIN, "published") is None
    assert await store.due(NS, now=time.time() + 1e9) == []

    calls = len(github.calls)
    await publishing.on_job(rt, step_publish())  # Seen again (a restart's list): nothing.
    assert len(github.calls) == calls

    await publishing.on_job(rt, pulls.publish_job())  # The chain's final publish.
    assert list(github.pulls) == [1] and github.calls[-2:] == ["find_pull", "update_pull"]
    final = published_condition(api, pulls.ROOT)
    assert final is not None and final["message"].endswith("Pull request #1.")
    assert await store.noted(NS, pulls.CHAIN, "published") == "pushed"
    assert await store.due(NS, now=time.time() + 1e9) == [pulls.CHAIN]


async def test_a_failed_step_publish_is_a_warning_on_its_agentjob(
    rt: Runtime, api: FakeApi, github: pulls.FakeGitHub
) -> None:
    step_job(api)
    await publishing.on_job(rt, step_publish("Failed"))
    cond = published_condition(api, STEP)
    assert cond is not None and (cond["status"], cond["reason"]) == (
        "False",
        "WorkspacePublishFailed",
    )
    assert STEP_PUBLISH in cond["message"]
    assert ("Warning", "WorkspacePublishFailed", cond["message"]) in pulls.events(api)
    assert github.pulls == {}
    store = attaching.store(rt)
    assert await store.noted(NS, pulls.CHAIN, f"published:{STEP_PUBLISH}") == "failed"
    assert await store.due(NS, now=time.time() + 1e9) == []


async def test_a_step_and_the_final_publish_ending_together_open_one_pull_request(
    rt: Runtime, api: FakeApi, github: pulls.FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    step_job(api)
    find = github.find_pull

    async def slow(scope: Scope, branch: str) -> int | None:
        found = await find(scope, branch)
        await asyncio.sleep(0.05)  # The other one's look comes now, without the lock.
        return found

    monkeypatch.setattr(github, "find_pull", slow)
    await asyncio.gather(
        publishing.on_job(rt, step_publish()), publishing.on_job(rt, pulls.publish_job())
    )
    assert list(github.pulls) == [1]
    assert github.calls.count("create_pull") == 1
