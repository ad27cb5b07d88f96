"""The ``Running`` write never undoes an end, against the in-process API server.

``attempts.mark_running`` writes at the version it read, so a stop or a
hop may record the job's end between its read and its write (the 50-delivery
cancel-in-progress e2e test across a SIGKILL caught a ``Running`` over a ``Cancelled``
end, which nothing repaired).  Aspects covered:
- an end written between the read and the write: the write is refused (the precondition
  on the version read), the job is read again, and it stays ``Cancelled``;
- with nothing in between, ``Pending`` becomes ``Running`` with its pod.
"""

from __future__ import annotations

import copy

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.hop import attempts
from tests.unit.fakeapi import FakeApi, Obj, Write
from tests.unit.hop.test_hop_write_order import NS, SETTINGS, api, kubeconfig

__all__ = ["api", "kubeconfig"]  # Fixtures.


def pending(api: FakeApi) -> Obj:
    job = {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": "j", "namespace": NS},
        "spec": {"agentRole": "writer", "prompt": "go"},
        "status": {"phase": "Pending", "reason": "JobCreated", "jobName": "j", "attempt": 1},
    }
    return api.put("agentjobs", job)


@pytest.mark.redis
async def test_an_end_written_meanwhile_is_never_undone(api: FakeApi, redis: Redis) -> None:
    job = copy.deepcopy(pending(api))
    read = job["metadata"]["resourceVersion"]
    ended = {"phase": "Cancelled", "reason": "Superseded", "message": "by k"}

    async def end_first(write: Write) -> None:
        if write.kind == "agentjobs/status" and not api.writes:
            api.put("agentjobs", {**copy.deepcopy(job), "status": {**job["status"], **ended}})

    api.before_write = end_first
    await attempts.mark_running(Runtime.from_client(SETTINGS, redis), NS, "j", "j-pod")
    (attempt,) = api.writes  # Refused at the version it read; nothing written after.
    assert attempt.body["status"]["phase"] == "Running"
    assert attempt.body["metadata"]["resourceVersion"] == read
    (stored,) = api.of("agentjobs")
    assert stored["status"]["phase"] == "Cancelled" and "podName" not in stored["status"]


@pytest.mark.redis
async def test_pending_becomes_running(api: FakeApi, redis: Redis) -> None:
    pending(api)
    await attempts.mark_running(Runtime.from_client(SETTINGS, redis), NS, "j", "j-pod")
    (stored,) = api.of("agentjobs")
    assert (stored["status"]["phase"], stored["status"]["podName"]) == ("Running", "j-pod")
