"""Flow control's engine metrics move when the engine decides, against the in-process
API server and a real Redis (issue 16, "Usage is shown on the job, the chain and in
metrics").

A root AgentJob, as the API or the webhook creates it, is started the way its watch
starts it (``reconciling.reconcile``).  Aspects covered:
- a job asked to stop before it starts ends ``Cancelled`` (reason ``Stopped``,
  ``status.stoppedBy``) and counts once in ``agentchain_stops_total{reason="Stopped"}``;
- a root job of a concurrency group counts its verdict in
  ``agentchain_admissions_total``: the first ``admitted``, a second chain of the same
  group under ``limit: 1, policy: queue`` ``queued`` (and shown ``Queued``).
"""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from agentchain.core.rules import naming
from agentchain.core.runtime import Runtime
from agentchain.flow.rules import stoprules
from agentchain.hop import reconciling
from agentchain.hop.rules import chains
from agentchain.models.agentjob import AgentJobSpec
from agentchain.web.jobapi import bodies
from tests.unit.fakeapi import FakeApi, Obj, sealed
from tests.unit.hop.test_hop_write_order import NS, SETTINGS, agent, api, kubeconfig

__all__ = ["api", "kubeconfig"]  # Fixtures.


def root_job(api: FakeApi, name: str, trigger: str = "writer", **annotations: str) -> Obj:
    spec = AgentJobSpec(agent_role=trigger, prompt="go", origin="api")
    position = chains.root_position(naming.chain_id_for(f"{NS}/{name}"), trigger)
    body = bodies.agentjob_body(NS, name, spec, position, None)
    body["metadata"]["annotations"].update(annotations)
    return api.put("agentjobs", sealed(body))


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def stored(api: FakeApi, name: str) -> Obj:
    status: Obj = api.objects[("agentjobs", name)].get("status") or {}
    return status


@pytest.mark.redis
async def test_a_stop_before_the_start_counts_once_in_stops_total(
    api: FakeApi, redis: Redis
) -> None:
    api.put("aiagents", agent("writer"))
    obj = root_job(api, "stop-me", **{stoprules.STOP: "true", stoprules.STOP_REASON: "not needed"})
    before = sample("agentchain_stops_total", namespace=NS, reason="Stopped")
    await reconciling.reconcile(Runtime.from_client(SETTINGS, redis), NS, obj["metadata"]["name"])
    status = stored(api, "stop-me")
    assert (status["phase"], status["reason"], status["stoppedBy"]) == (
        "Cancelled",
        "Stopped",
        "annotation",
    )
    assert sample("agentchain_stops_total", namespace=NS, reason="Stopped") == before + 1
    assert not api.of("jobs"), "a job stopped before its start must not run"


@pytest.mark.redis
async def test_concurrency_verdicts_count_in_admissions_total(api: FakeApi, redis: Redis) -> None:
    writer = agent("writer")
    writer["spec"]["concurrency"] = {"group": "one-at-a-time", "limit": 1, "policy": "queue"}
    api.put("aiagents", writer)
    rt = Runtime.from_client(SETTINGS, redis)
    admitted = sample("agentchain_admissions_total", namespace=NS, verdict="admitted")
    queued = sample("agentchain_admissions_total", namespace=NS, verdict="queued")
    await reconciling.reconcile(rt, NS, root_job(api, "first")["metadata"]["name"])
    assert sample("agentchain_admissions_total", namespace=NS, verdict="admitted") == admitted + 1
    assert [j["metadata"]["name"] for j in api.of("jobs")] == ["first"]
    await reconciling.reconcile(rt, NS, root_job(api, "second")["metadata"]["name"])
    assert sample("agentchain_admissions_total", namespace=NS, verdict="queued") == queued + 1
    assert stored(api, "second")["phase"] == "Queued"
    assert sample("agentchain_admissions_total", namespace=NS, verdict="admitted") == admitted + 1
