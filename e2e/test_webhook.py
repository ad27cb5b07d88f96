"""The GitHub webhook against the real API server and Redis (the engine is not running).

Aspects covered:
* a signed ``issues.opened`` for seed 003's triage agent → 202 and one root AgentJob
  (origin github, chain labels and annotations, the event as data);
* the same delivery again → 202, ``duplicate``, nothing new; also from a fresh app and
  runtime (an operator restart), and after the Redis record is gone (names alone);
* 200 deliveries plus 10 % redeliveries, sent concurrently → exactly 200 AgentJobs;
* a stranger's issue and an event no agent wants → 200 with no jobs and the reasons;
* ``/metrics`` counts deliveries by result; ``/readyz`` is ready with both backends.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from agentchain import models
from agentchain.store import keys
from e2e.controlplane.cluster import ClusterInfo
from e2e.webharness import (
    SEED_AGENTS,
    agentjobs,
    apply,
    issue_opened,
    kube,
    served,
    signed,
)

__all__ = ["kube"]  # The fixture is used by name.
PATH = "/webhooks/github"


@pytest.fixture
def seeded(kube: ClusterInfo, namespace: str) -> str:
    apply(kube, namespace, SEED_AGENTS)
    return namespace


async def test_issue_opened_creates_one_root_job_and_redelivery_nothing(
    kube: ClusterInfo, seeded: str
) -> None:
    body, headers = signed(issue_opened())
    async with served(kube, seeded) as (client, _):
        first = await client.post(PATH, data=body, headers=headers)
        assert first.status == 202, await first.text()
        answer = await first.json()
        assert answer["duplicate"] is False
        [job] = answer["jobs"]
        assert job["agent"] == "ai-triage" and job["created"] is True
        again = await (await client.post(PATH, data=body, headers=headers)).json()
        assert again["duplicate"] is True
        assert [(j["name"], j["created"]) for j in again["jobs"]] == [(job["name"], False)]
    [obj] = agentjobs(kube, seeded)
    assert obj["metadata"]["name"] == job["name"]
    assert obj["spec"]["origin"] == "github" and obj["spec"]["agentRole"] == "ai-triage"
    assert obj["spec"]["event"]["deliveryId"] == headers["X-GitHub-Delivery"]
    assert obj["spec"]["event"]["title"].startswith("Login fails")
    chain_id = obj["metadata"]["labels"][models.CHAIN_ID]
    assert obj["metadata"]["annotations"][models.CHAIN_DEPTH] == "0"
    selected = kube.kubectl("-n", seeded, "get", "aj", "-l", f"{models.CHAIN_ID}={chain_id}")
    assert job["name"] in selected.stdout


async def test_redelivery_after_restart_and_after_the_record_expired(
    kube: ClusterInfo, seeded: str
) -> None:
    body, headers = signed(issue_opened())
    async with served(kube, seeded) as (client, _):
        assert (await client.post(PATH, data=body, headers=headers)).status == 202
    async with served(kube, seeded) as (client, rt):  # A restarted operator.
        again = await (await client.post(PATH, data=body, headers=headers)).json()
        assert again["duplicate"] is True
        await rt.redis.delete(keys.delivery("4242", headers["X-GitHub-Delivery"]))
        late = await (await client.post(PATH, data=body, headers=headers)).json()
        assert late["duplicate"] is False and late["jobs"][0]["created"] is False
    assert len(agentjobs(kube, seeded)) == 1


@pytest.mark.slow
async def test_concurrent_deliveries_with_redeliveries_yield_exact_job_count(
    kube: ClusterInfo, seeded: str
) -> None:
    unique = [signed(issue_opened(number=n)) for n in range(200)]
    requests = unique + random.Random(5).sample(unique, 20)
    random.Random(7).shuffle(requests)
    async with served(kube, seeded) as (client, _):
        answers = await asyncio.gather(
            *(client.post(PATH, data=body, headers=headers) for body, headers in requests)
        )
        assert sorted({a.status for a in answers}) == [202]
        duplicates = [(await a.json())["duplicate"] for a in answers]
    assert duplicates.count(True) == 20
    assert len(agentjobs(kube, seeded)) == 200


async def test_stranger_and_unwanted_events_create_nothing(kube: ClusterInfo, seeded: str) -> None:
    async with served(kube, seeded) as (client, _):
        body, headers = signed(issue_opened(association="NONE"))
        stranger = await client.post(PATH, data=body, headers=headers)
        assert stranger.status == 200
        answer = await stranger.json()
        assert answer["jobs"] == []
        assert "author_association NONE" in answer["ignored"][0]["reason"]
        body, headers = signed({"ref": "refs/heads/main", "sender": {"login": "a"}}, "push")
        push = await client.post(PATH, data=body, headers=headers)
        assert push.status == 200 and (await push.json())["jobs"] == []
        metrics = await (await client.get("/metrics")).text()
        assert 'agentchain_webhook_deliveries_total{result="ignored"}' in metrics
        ready = await client.get("/readyz")
        assert ready.status == 200, await ready.text()
    assert agentjobs(kube, seeded) == []
