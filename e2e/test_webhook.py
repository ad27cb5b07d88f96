"""The GitHub webhook against the real API server and Redis (the engine is not running).

Aspects covered:
* a signed ``issues.opened`` for seed 003's triage agent → 202 with the queued job, and
  once the dispatcher ran, one root AgentJob (origin github, chain labels and
  annotations, the event as data);
* the same delivery again → 202, ``duplicate``, nothing new;
* a dispatcher that dies before creating (the app served without it, the entry even
  left leased): the 202's job is created exactly once by the next app and runtime (an
  operator restart), at once, not after the lease; the delivery sent again after the
  restart, and again once its Redis record is gone (names alone), creates nothing new;
* 1,000 deliveries plus 10 % redeliveries, sent concurrently → exactly 1,000 AgentJobs
  once the dispatcher drained its queue, and still 1,000 a little later (with the
  session operator stopped until the namespace is gone: nothing runs them);
* a stranger's issue and an event no agent wants → 200 with no jobs and the reasons;
* ``/metrics`` counts deliveries by result; ``/readyz`` is ready with both backends.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Iterator

import kubernetes
import pytest
from prometheus_client import REGISTRY

from agentchain import models
from agentchain.store import keys
from agentchain.store.deliveries import JobQueue
from e2e import operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.webharness import (
    SEED_AGENTS,
    agentjobs,
    apply,
    drained,
    issue_opened,
    kube,
    served,
    served_internal,
    signed,
)

__all__ = ["kube"]  # The fixture is used by name.
PATH = "/webhooks/github"
DELIVERIES = 1000
# After the count reaches its target, this long again to catch a late, extra job.
OVERSHOOT_WAIT_SECONDS = 3.0


def dispatched(result: str) -> float:
    value = REGISTRY.get_sample_value("agentchain_webhook_jobs_total", {"result": result})
    return value or 0.0


@pytest.fixture
def seeded(kube: ClusterInfo, namespace: str) -> str:
    apply(kube, namespace, SEED_AGENTS)
    return namespace


@pytest.fixture
def unserved(
    operator: operating.OperatorProcess, kube_api: kubernetes.client.ApiClient, seeded: str
) -> Iterator[str]:
    """``seeded`` with no session operator, until the namespace is gone.

    The session operator serves every namespace: a thousand root jobs would become
    three thousand pods on the test node, still starting minutes after this test ended
    and starving the tests after it (a later job waited two minutes for its pod).
    """
    operator.stop()
    core = kubernetes.client.CoreV1Api(kube_api)
    try:
        yield seeded
    finally:
        core.delete_namespace(seeded)

        def gone() -> bool:
            try:
                core.read_namespace(seeded)
            except kubernetes.client.ApiException as error:
                return bool(error.status == 404)
            return False

        operating.wait_until(gone, timeout=180, interval=1, what=f"namespace {seeded} to go")
        operator.start()


async def test_issue_opened_creates_one_root_job_and_redelivery_nothing(
    kube: ClusterInfo, seeded: str
) -> None:
    body, headers = signed(issue_opened())
    async with served(kube, seeded, own_redis=True) as (client, rt):
        first = await client.post(PATH, data=body, headers=headers)
        assert first.status == 202, await first.text()
        answer = await first.json()
        assert answer["duplicate"] is False
        [job] = answer["jobs"]
        assert job["agent"] == "ai-triage" and job["created"] is True
        assert job["namespace"] == seeded
        await drained(rt, seeded)
        again = await (await client.post(PATH, data=body, headers=headers)).json()
        assert again["duplicate"] is True
        assert [(j["name"], j["created"]) for j in again["jobs"]] == [(job["name"], False)]
        await drained(rt, seeded)
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
    # The first operator's dispatcher dies before creating anything.
    dies_early = served(kube, seeded, dispatch=False, own_redis=True)
    async with dies_early as (client, rt):
        first = await client.post(PATH, data=body, headers=headers)
        assert first.status == 202, await first.text()
        [job] = (await first.json())["jobs"]
        # The killed dispatcher had even leased the entry: the restart must not wait it out.
        [leased], _ = await JobQueue(rt.redis, (seeded,)).take(10, lease_seconds=600)
        assert leased.name == job["name"]
    assert agentjobs(kube, seeded) == []
    created, existed = dispatched("created"), dispatched("existed")
    async with served(kube, seeded, own_redis=True) as (client, rt):  # A restarted operator.
        await drained(rt, seeded, timeout=20)
        [obj] = agentjobs(kube, seeded)
        assert obj["metadata"]["name"] == job["name"]
        assert dispatched("created") == created + 1
        again = await (await client.post(PATH, data=body, headers=headers)).json()
        assert again["duplicate"] is True and again["jobs"][0]["created"] is False
        await drained(rt, seeded)
        await rt.redis.delete(
            keys.delivery(headers["X-GitHub-Delivery"]),
            keys.delivery_body(hashlib.sha256(body).hexdigest()),
        )
        late = await (await client.post(PATH, data=body, headers=headers)).json()
        # Newly accepted (the record is gone), but the same name: found existing.
        assert late["duplicate"] is False and late["jobs"][0]["name"] == job["name"]
        await drained(rt, seeded)
        assert dispatched("created") == created + 1
        assert dispatched("existed") == existed + 2
    [same] = agentjobs(kube, seeded)
    assert same["metadata"]["uid"] == obj["metadata"]["uid"]


@pytest.mark.slow
async def test_concurrent_deliveries_with_redeliveries_yield_exact_job_count(
    kube: ClusterInfo, unserved: str
) -> None:
    seeded = unserved
    unique = [signed(issue_opened(number=n)) for n in range(DELIVERIES)]
    requests = unique + random.Random(5).sample(unique, DELIVERIES // 10)
    random.Random(7).shuffle(requests)
    async with served(kube, seeded, own_redis=True) as (client, rt):
        answers = await asyncio.gather(
            *(client.post(PATH, data=body, headers=headers) for body, headers in requests)
        )
        assert sorted({a.status for a in answers}) == [202]
        duplicates = [(await a.json())["duplicate"] for a in answers]
        await drained(rt, seeded, timeout=90)
        assert len(agentjobs(kube, seeded)) == DELIVERIES
        await asyncio.to_thread(
            operating.stays,
            lambda: len(agentjobs(kube, seeded)) == DELIVERIES,
            seconds=OVERSHOOT_WAIT_SECONDS,
            interval=0.5,
            what="no AgentJob past one per delivery",
        )
    assert duplicates.count(True) == DELIVERIES // 10
    assert len(agentjobs(kube, seeded)) == DELIVERIES


async def test_stranger_and_unwanted_events_create_nothing(kube: ClusterInfo, seeded: str) -> None:
    async with served(kube, seeded, own_redis=True) as (client, rt):
        body, headers = signed(issue_opened(association="NONE"))
        stranger = await client.post(PATH, data=body, headers=headers)
        assert stranger.status == 200
        answer = await stranger.json()
        assert answer["jobs"] == []
        assert "author_association NONE" in answer["ignored"][0]["reason"]
        body, headers = signed({"ref": "refs/heads/main", "sender": {"login": "a"}}, "push")
        push = await client.post(PATH, data=body, headers=headers)
        assert push.status == 200 and (await push.json())["jobs"] == []
        async with served_internal(rt) as internal:
            metrics = await (await internal.get("/metrics")).text()
            assert 'agentchain_webhook_deliveries_total{result="ignored"}' in metrics
            ready = await internal.get("/readyz")
            assert ready.status == 200, await ready.text()
        # Neither faces GitHub: the public listener does not serve them.
        assert (await client.get("/metrics")).status == 404
        assert (await client.get("/readyz")).status == 404
    assert agentjobs(kube, seeded) == []
