"""One hop's writes, in order, against an in-process API server and a real Redis.

The parent ``p`` (agent ``writer``, whose ``next`` is ``reviewer``) ran; its pod ended
with exit code 0; its reconcile (``hop.reconciling``) runs the hop.  Aspects covered:
- nothing is written to the API server before the capture is durable in Redis;
- the hop is counted in ``agentchain_hop_latency_seconds``;
- the writes, in order: the child AgentJob, then its batch Job (controlled by the child)
  and Secret, the child's status, and last the parent's one patch that carries its end
  and its ``status.next`` together (the marker);
- a crash before any one of those writes (the write refused and the hop stopped there,
  then a new process' replay of the same pod event) ends in the same state as an
  uninterrupted hop: the same objects, one child, one batch Job, the same statuses
  (at most one unused job Secret more, which the exactly-once claim allows);
- the child's batch Job is in the ownership index from its create's answer, so its
  pod's first event needs no Job read.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from agentchain.core.hopstate import Exit
from agentchain.core.runtime import Runtime
from agentchain.kube import apierrors, clients
from agentchain.settings import Settings
from tests.unit.fakeapi import OPERATOR_KEY, FakeApi, Obj, Write, sealed
from tests.unit.hop.watched import pod_ended
from tests.unit.kube.test_clients import write_kubeconfig

NS = "team-a"
SETTINGS = Settings(operator_key=(OPERATOR_KEY,), api_url="http://agentchain.test:8080")
EXIT = Exit(attempt=1, exit_code=0, pod="p-pod", batch_uid="job-uid")
TIMESTAMPS = {"completionTime", "startTime", "lastTransitionTime"}


def agent(trigger: str, next_: str | None = None) -> Obj:
    manual: Obj = {"source": "manual"}
    if next_ is not None:
        manual["next"] = {"agentTriggerName": next_, "condition": "on-success"}
    spec = {"triggerName": trigger, "command": ["true"], "eventTriggers": [manual]}
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AiAgent",
        "metadata": {"name": trigger, "namespace": NS},
        "spec": spec,
    }


def seed(api: FakeApi) -> None:
    api.put("aiagents", agent("writer", "reviewer"))
    api.put("aiagents", agent("reviewer"))
    chain = {"labrats.work/chain-id": "c0ffee", "labrats.work/chain-depth": "0"}
    parent = {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {
            "name": "p",
            "namespace": NS,
            "labels": {"labrats.work/chain-id": "c0ffee"},
            "annotations": {**chain, "labrats.work/chain-path": '["writer"]'},
        },
        "spec": {"agentRole": "writer", "prompt": "write it"},
        "status": {
            "phase": "Running",
            "reason": "Running",
            "chainId": "c0ffee",
            "chainDepth": 0,
            "chainPath": ["writer"],
            "jobName": "p",
            "attempt": 1,
            "podName": "p-pod",
        },
    }
    api.put("agentjobs", sealed(parent))


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    clients.reset()
    yield path
    clients.reset()


@pytest.fixture
async def api(kubeconfig: Path) -> AsyncIterator[FakeApi]:
    fake = FakeApi()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    server = TestServer(app)
    await server.start_server()
    write_kubeconfig(kubeconfig, str(server.make_url("")), "token")
    try:
        yield fake
    finally:
        await clients.close()
        await server.close()


async def hop(redis: Redis) -> None:
    """One pod event handled by a process started just now (nothing in memory)."""
    await pod_ended(Runtime.from_client(SETTINGS, redis), NS, "p", EXIT)


def state(api: FakeApi) -> dict[str, Any]:
    """The objects as a comparison sees them: no uids, versions or timestamps."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            drop = {"uid", "resourceVersion", "generation", *TIMESTAMPS}
            return {k: clean(v) for k, v in value.items() if k not in drop}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    jobs = copy.deepcopy(api.of("jobs"))
    for job in jobs:  # The Secret's name is random: only that the Job names one counts.
        volumes = job["spec"]["template"]["spec"]["volumes"]
        volumes[0]["secret"]["secretName"] = "<secret>"
        for env in job["spec"]["template"]["spec"]["containers"][0]["env"]:
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                ref["name"] = "<secret>"
    return {
        "agentjobs": clean(api.of("agentjobs")),
        "jobs": clean(jobs),
        "events": sorted(e["metadata"]["name"] for e in api.of("events")),
    }


def secrets_named_by_jobs_exist(api: FakeApi) -> bool:
    names = {s["metadata"]["name"] for s in api.of("secrets")}
    named = {
        j["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] for j in api.of("jobs")
    }
    return named <= names and len(names) <= len(named) + 1


@pytest.mark.redis
async def test_the_hops_writes_in_order(api: FakeApi, redis: Redis) -> None:
    seed(api)
    durable: list[bool] = []

    async def check(write: Write) -> None:
        uid = api.objects[("agentjobs", "p")]["metadata"]["uid"]
        outputs = Runtime.from_client(SETTINGS, redis).outputs
        captured = await outputs.get_capture(NS, "p", uid)
        durable.append(captured is not None and captured.attempt == 1)

    api.before_write = check
    hops_before = REGISTRY.get_sample_value("agentchain_hop_latency_seconds_count") or 0.0
    await hop(redis)
    hops = REGISTRY.get_sample_value("agentchain_hop_latency_seconds_count")
    assert hops == hops_before + 1  # The hop latency metric saw this hop.
    assert durable and all(durable), "an API write went out before the capture was durable"
    order = [(w.method, w.kind, w.name) for w in api.writes]
    child = next(n for _, k, n in order if k == "agentjobs")
    assert order[0] == ("POST", "agentjobs", child)
    assert {k for _, k, _ in order[1:3]} == {"jobs", "secrets"}
    assert order[3:] == [("PATCH", "agentjobs/status", child), ("PATCH", "agentjobs/status", "p")]
    last = api.writes[-1].body["status"]
    assert last["phase"] == "Succeeded" and last["next"][0]["action"] == "spawned"
    assert last["result"] == "the parent's report\n"
    (job,) = api.of("jobs")
    (created,) = [o for o in api.of("agentjobs") if o["metadata"]["name"] != "p"]
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "AgentJob",
        created["metadata"]["uid"],
        True,
    )


@pytest.mark.redis
async def test_a_crash_before_any_write_replays_to_the_same_end(api: FakeApi, redis: Redis) -> None:
    seed(api)
    await hop(redis)
    expected, writes = state(api), len(api.writes)
    assert writes >= 5
    for crash_at in range(writes):
        await redis.flushdb()
        api.objects.clear()
        api.writes.clear()
        seed(api)
        api.fail_at = crash_at
        with pytest.raises(apierrors.Forbidden):
            await hop(redis)
        api.fail_at = None
        await hop(redis)
        assert state(api) == expected, f"crashed before write {crash_at}"
        assert secrets_named_by_jobs_exist(api), f"crashed before write {crash_at}"


@pytest.mark.redis
async def test_the_childs_batch_job_is_indexed_from_its_create(api: FakeApi, redis: Redis) -> None:
    seed(api)
    rt = Runtime.from_client(SETTINGS, redis)
    await pod_ended(rt, NS, "p", EXIT)
    (job,) = api.of("jobs")
    indexed = rt.jobs.get(NS, job["metadata"]["name"])
    assert indexed is not None and indexed["metadata"]["uid"] == job["metadata"]["uid"]
