"""Launching an AgentJob created again under the name of a deleted one.

Against an in-process API server and a real Redis.  Aspects covered:
- the deleted object's batch Job, not yet removed by the garbage collector, is never
  taken for the new job's: it is deleted, and the new job's own batch Job (controlled
  by the new uid) is created and recorded;
- a batch Job of that name that is not an AgentJob's is left alone.
"""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.hop import reconciling
from tests.unit.fakeapi import FakeApi, Obj
from tests.unit.hop.test_hop_write_order import SETTINGS, agent

# The in-process API server and its kubeconfig, as fixtures (re-exported by name).
from tests.unit.hop.test_hop_write_order import api as api
from tests.unit.hop.test_hop_write_order import kubeconfig as kubeconfig

NS = "team-a"


def _job(uid: str) -> Obj:
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": "same", "namespace": NS, "uid": uid},
        "spec": {"agentRole": "writer", "prompt": "write it"},
    }


def _batch(owner: Obj | None) -> Obj:
    meta: Obj = {"name": "same", "namespace": NS, "labels": {"labrats.work/agentjob": "same"}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {}}


def _ref(uid: str) -> Obj:
    return {"apiVersion": "labrats.work/v1alpha1", "kind": "AgentJob", "name": "same",
            "uid": uid, "controller": True}  # fmt: skip


@pytest.mark.redis
async def test_the_deleted_objects_batch_job_is_replaced(api: FakeApi, redis: Redis) -> None:
    api.put("aiagents", agent("writer"))
    api.put("jobs", _batch(_ref("uid-first")))
    api.put("agentjobs", _job("uid-second"))
    rt = Runtime.from_client(SETTINGS, redis)
    await reconciling.reconcile(rt, NS, "same")
    batch = api.objects[("jobs", "same")]
    (owner,) = batch["metadata"]["ownerReferences"]
    assert owner["uid"] == "uid-second"
    assert api.objects[("agentjobs", "same")]["status"]["jobName"] == "same"
    assert [w.method for w in api.writes if w.kind == "jobs"] == ["POST", "DELETE", "POST"]


@pytest.mark.redis
async def test_a_batch_job_that_is_no_agentjobs_is_left_alone(api: FakeApi, redis: Redis) -> None:
    api.put("aiagents", agent("writer"))
    api.put("jobs", _batch(None))
    api.put("agentjobs", _job("uid-second"))
    rt = Runtime.from_client(SETTINGS, redis)
    await reconciling.reconcile(rt, NS, "same")
    assert "ownerReferences" not in api.objects[("jobs", "same")]["metadata"]
    assert not [w for w in api.writes if w.kind == "jobs" and w.method == "DELETE"]


@pytest.mark.redis
async def test_a_settled_namesakes_last_answer_does_not_settle_the_new_job(
    api: FakeApi, redis: Redis
) -> None:
    # The first job's last write was answered after the watch had delivered it settled
    # (the answer then stays: no later event of that version comes to retire it), and
    # its namespace was deleted and created again with a job of the same name.
    api.put("aiagents", agent("writer"))
    rt = Runtime.from_client(SETTINGS, redis)
    old = {**_job("uid-first"), "status": {"phase": "Succeeded", "jobName": "same",
           "next": [{"action": "none"}], "chainComplete": True}}  # fmt: skip
    old["metadata"] = {**old["metadata"], "resourceVersion": "7"}
    rt.unsettled.observe(old, 0.0, 1.0)
    rt.writes.wrote(old, over="6")
    rt.unsettled.forget(old)  # Its deletion.
    new = {**_job("uid-second"), "metadata": {**_job("uid-second")["metadata"],
           "resourceVersion": "9"}}  # fmt: skip
    api.put("agentjobs", new)
    rt.unsettled.observe(new, 0.0, 1.0)
    await reconciling.reconcile(rt, NS, "same")
    assert api.objects[("agentjobs", "same")]["status"]["jobName"] == "same"
