"""A chain child's batch Job is created before its AgentJob can own it: never left so.

Aspects covered, on the real control plane with the operator under its ServiceAccount:
- every batch Job of a finished chain is owned (controller ownerReference, uid) by
  the AgentJob it ran for, so deleting that AgentJob deletes it;
- the operator SIGKILLed at the ``child-job-unowned`` crashpoint, right after it
  created a child's Job without owner, leaves that Job ownerless; restarted, it
  replays the parent's step, adopts that same Job (no second one), and the chain
  completes;
- an ownerless Job labelled for an AgentJob that ran another Job is deleted.

The session's operator is the one restarted with the crashpoint (as ``test_learnings``
does), so no second operator ever watches the namespace.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
TIMEOUT = 90.0


def _owned_by(job: Obj, agentjob: Obj) -> bool:
    refs = job["metadata"].get("ownerReferences") or []
    return [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in refs] == [
        ("AgentJob", agentjob["metadata"]["name"], agentjob["metadata"]["uid"], True)
    ]


def _agents() -> list[Obj]:
    return [
        chaining.agent("own-a", next_=chaining.step("own-b")),
        chaining.agent("own-b", next_=chaining.step("own-c")),
        chaining.agent("own-c"),
    ]


def _assert_chain_owns_its_jobs(info: ClusterInfo, namespace: str, jobs: list[Obj]) -> None:
    for agentjob in jobs:
        name = agentjob["metadata"]["name"]
        batch = chaining.batch_jobs(info, namespace, name)
        assert len(batch) == 1, (name, [b["metadata"]["name"] for b in batch])
        assert _owned_by(batch[0], agentjob), batch[0]["metadata"]


@pytest.mark.timeout(300)
def test_chain_jobs_are_owned_by_their_agentjobs(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, *_agents(), chaining.root_job("own-1", "own-a"))
    jobs = chaining.wait_chain(info, namespace, "own-1", 3)
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded"] * 3
    _assert_chain_owns_its_jobs(info, namespace, jobs)


@pytest.mark.timeout(480)
def test_a_crash_before_the_owner_is_set_is_adopted_by_the_replay(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, *_agents())
    code = operator.crash_at(
        "child-job-unowned",
        lambda: chaining.apply(info, namespace, chaining.root_job("own-2", "own-a")),
        timeout=TIMEOUT,
    )
    assert code == -signal.SIGKILL
    try:
        children = [
            j
            for j in chaining.batch_jobs(info, namespace)
            if j["metadata"]["labels"].get("labrats.work/agentjob") != "own-2"
        ]
        assert len(children) == 1, [j["metadata"]["name"] for j in children]
        assert not children[0]["metadata"].get("ownerReferences")
        unowned_uid = children[0]["metadata"]["uid"]
    finally:
        operator.start()

    jobs = chaining.wait_chain(info, namespace, "own-2", 3, timeout=3 * TIMEOUT)
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded"] * 3
    _assert_chain_owns_its_jobs(info, namespace, jobs)
    child = chaining.batch_jobs(info, namespace, jobs[1]["metadata"]["name"])[0]
    assert child["metadata"]["uid"] == unowned_uid  # Adopted, not created again.


@pytest.mark.timeout(300)
def test_an_ownerless_job_its_agentjob_will_not_run_is_deleted(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info, namespace, chaining.agent("own-solo"), chaining.root_job("own-3", "own-solo")
    )
    operating.wait_until(
        lambda: (
            (
                operating.get_json(info, "agentjob", "own-3", "-n", namespace).get("status") or {}
            ).get("phase")
            == "Succeeded"
        ),
        timeout=TIMEOUT,
        what="own-3 to succeed",
    )
    stray = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "own-3-a7", "labels": {"labrats.work/agentjob": "own-3"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [{"name": "agent", "image": "agent", "command": ["sleep", "60"]}],
                }
            },
        },
    }
    chaining.apply(info, namespace, stray)
    operating.wait_until(
        lambda: (
            not any(
                j["metadata"]["name"] == "own-3-a7"
                for j in chaining.batch_jobs(info, namespace, "own-3")
            )
        ),
        timeout=TIMEOUT,
        what="the stray ownerless Job to be deleted",
    )
    assert len(chaining.batch_jobs(info, namespace, "own-3")) == 1
