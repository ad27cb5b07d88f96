"""Every batch Job is owned by its AgentJob from its creation: never left without one.

Aspects covered, on the real control plane with the operator under its ServiceAccount:
- every batch Job of a finished chain is owned (controller ownerReference, uid) by
  the AgentJob it ran for, so deleting that AgentJob deletes it;
- the operator SIGKILLed at the ``child-created`` crashpoint, right after it created a
  chain child's AgentJob and before launching it or writing the parent's
  ``status.next``, leaves the child without a batch Job and the parent undecided;
  restarted, it replays the parent's step: the same child (same uid, no second one),
  one owned batch Job for it, and the chain completes;
- an ownerless Job named and labelled as the next attempt of a running AgentJob
  (someone else's, exiting 0) is not the operator's: the AgentJob stays Running on its
  real pod and ends with the real output; the stray Job is left alone.

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


def _agentjobs(info: ClusterInfo, namespace: str) -> list[Obj]:
    items = operating.get_json(info, "agentjobs", "-n", namespace).get("items") or []
    return list(items)


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
def test_a_crash_after_the_child_is_created_replays_to_one_child_and_one_job(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, *_agents())
    code = operator.crash_at(
        "child-created",
        lambda: chaining.apply(info, namespace, chaining.root_job("own-2", "own-a")),
        timeout=TIMEOUT,
    )
    assert code == -signal.SIGKILL
    try:
        children = [j for j in _agentjobs(info, namespace) if j["metadata"]["name"] != "own-2"]
        assert len(children) == 1, [j["metadata"]["name"] for j in children]
        child = children[0]
        assert not (child.get("status") or {}).get("jobName")
        assert chaining.batch_jobs(info, namespace, child["metadata"]["name"]) == []
        parent = operating.get_json(info, "agentjob", "own-2", "-n", namespace)
        assert not (parent.get("status") or {}).get("next")
    finally:
        operator.start()

    jobs = chaining.wait_chain(info, namespace, "own-2", 3, timeout=3 * TIMEOUT)
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded"] * 3
    _assert_chain_owns_its_jobs(info, namespace, jobs)
    assert jobs[1]["metadata"]["uid"] == child["metadata"]["uid"]  # Not created again.
    assert [n["child"] for n in jobs[0]["status"]["next"]] == [child["metadata"]["name"]]


SLOW = "import time; time.sleep(15); print('the real agent finished')"


def _stray(info: ClusterInfo, name: str, agentjob: str, attempt: str) -> Obj:
    labels = {"labrats.work/agentjob": agentjob, "labrats.work/attempt": attempt}
    # An image the node has (the agents' own), never pulled: the stray Job must complete
    # for the test to mean anything.
    image = info.agent_image or "agent"
    return chaining.bare_job(name, image, ["true"], labels)


def _complete(info: ClusterInfo, namespace: str, name: str) -> bool:
    job = operating.get_json(info, "job", name, "-n", namespace)
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)


@pytest.mark.timeout(300)
def test_an_ownerless_job_named_for_an_agentjob_is_not_the_operators(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    slow = chaining.agent("own-slow")
    slow["spec"]["command"] = chaining.python_command(SLOW)
    chaining.apply(info, namespace, slow, chaining.root_job("own-3", "own-slow"))
    real_pod = chaining.wait_phase(info, namespace, "own-3", "Running", timeout=TIMEOUT)["podName"]
    # Named and labelled as the operator would name attempt 2 of own-3, but not owned.
    chaining.apply(info, namespace, _stray(info, "own-3-a2", "own-3", "2"))
    operating.wait_until(
        lambda: _complete(info, namespace, "own-3-a2"),
        timeout=TIMEOUT,
        what="the stray Job to complete",
    )

    # The operator's Job and pod watches deliver the stray's end like a real one's: it
    # would have acted within this time (a hop takes well under a second here).
    def untouched() -> bool:
        status = chaining.job_status(info, namespace, "own-3")
        assert (status.get("phase"), status.get("attempt"), status.get("podName")) == (
            "Running",
            1,
            real_pod,
        ), status
        return True

    operating.stays(untouched, seconds=3, what="own-3 untouched by the stray Job")
    status = chaining.wait_phase(info, namespace, "own-3", timeout=TIMEOUT)
    assert status["phase"] == "Succeeded" and status["podName"] == real_pod, status
    assert "the real agent finished" in status["result"]
    stray = operating.get_json(info, "job", "own-3-a2", "-n", namespace)
    assert not stray["metadata"].get("ownerReferences")  # Not adopted either.
