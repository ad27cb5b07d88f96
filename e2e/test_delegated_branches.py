"""A delegated job's end ends its branch; the chain completes when its last job ends
(SPEC §2 "marked complete, once", §3 delegation), on the real control plane.

Aspects covered, with the session operator and demo agents, the delegation made as an
agent makes it (``POST /api/jobs`` with the caller's job token, not waiting):
- the delegated job ends first (the caller still runs): it gets its end status and
  ``status.next`` (``none``, ``BranchEnded``, ``branchEnded``) but no ``chainComplete``,
  no ``ChainComplete`` condition or Event; the chain's record is not complete and its
  concurrency slot stays held (a run queued behind it in the same group stays Queued);
  when the caller ends, the chain completes there, once, and the queued run is let in;
- the mirror: the caller ends first while the job it delegated to still runs; its branch
  ends, and the chain completes when the delegated job ends.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from agentchain.hop.rules.jobspec import TOKEN_SECRET_KEY
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
TIMEOUT = 90.0
GROUP = "delegend"


def _agents(lead_sleep: int, helper_sleep: int) -> list[Obj]:
    lead = chaining.agent("lead", "--no-context", "--sleep", str(lead_sleep))
    helper = chaining.agent("helper", "--no-context", "--sleep", str(helper_sleep))
    helper["spec"]["delegation"] = {"allowedFrom": ["lead"]}
    return [lead, helper]


def _post(operator: operating.OperatorProcess, token: str, body: Obj) -> Obj:
    request = urllib.request.Request(
        f"{operator.url}/api/jobs",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201
        answer: Obj = json.loads(response.read())
    return answer


def _chain(operator: operating.OperatorProcess, namespace: str, chain_id: str) -> Obj:
    request = urllib.request.Request(
        f"{operator.url}/api/chains/{namespace}/{chain_id}",
        headers={"Authorization": f"Bearer {operator.admin_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: Obj = json.load(response)
    return answer


def _status(info: ClusterInfo, namespace: str, name: str) -> Obj:
    job = operating.get_json(info, "agentjob", name, "-n", namespace)
    return dict(job.get("status") or {})


def _wait_decided(info: ClusterInfo, namespace: str, name: str) -> Obj:
    """The job once it ended and its ``status.next`` (written in the same patch) is set."""
    operating.wait_until(
        lambda: _status(info, namespace, name).get("next"),
        timeout=TIMEOUT,
        what=f"{name} to end and decide",
    )
    return operating.get_json(info, "agentjob", name, "-n", namespace)


def _assert_branch_ended(info: ClusterInfo, namespace: str, job: Obj) -> None:
    status = job["status"]
    assert status["phase"] == "Succeeded", status
    [entry] = status["next"]
    assert entry["action"] == "none" and entry["reason"] == "BranchEnded", entry
    assert status.get("branchEnded") is True
    assert not status.get("chainComplete"), status
    assert chaining.condition(job, "ChainComplete") is None
    name = job["metadata"]["name"]
    assert not chaining.has_event(info, namespace, name, "Normal", "ChainComplete")


def _assert_completes(info: ClusterInfo, namespace: str, job: Obj) -> None:
    status = job["status"]
    [entry] = status["next"]
    assert entry["action"] == "none" and entry["reason"] == "ChainComplete", entry
    assert status.get("chainComplete") is True and not status.get("branchEnded")
    assert (chaining.condition(job, "ChainComplete") or {}).get("status") == "True"


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("lead_sleep", "helper_sleep", "first"),
    [
        pytest.param(25, 0, "delegated", id="delegated-ends-first"),
        pytest.param(8, 30, "caller", id="caller-ends-first"),
    ],
)
def test_the_chain_completes_when_its_last_branch_ends(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    lead_sleep: int,
    helper_sleep: int,
    first: str,
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, *_agents(lead_sleep, helper_sleep))
    admin = operator.admin_token
    run = {"namespace": namespace, "concurrencyGroup": GROUP, "prompt": "go"}
    _post(operator, admin, {**run, "agentRole": "lead", "name": "lead-1"})
    operating.wait_until(
        lambda: _status(info, namespace, "lead-1").get("jobName"),
        timeout=TIMEOUT,
        what="lead-1 to run (its token Secret exists by then)",
    )
    lead = operating.get_json(info, "agentjob", "lead-1", "-n", namespace)
    chain_id = lead["status"]["chainId"]
    # A second chain in the same group (limit 1): it runs once lead-1's chain completes.
    _post(operator, admin, {**run, "agentRole": "helper", "name": "after-1"})
    operating.wait_until(
        lambda: _status(info, namespace, "after-1").get("phase") == "Queued",
        timeout=TIMEOUT,
        what="after-1 queued behind lead-1's chain",
    )
    token = chaining.job_secret(info, namespace, lead)[TOKEN_SECRET_KEY]
    delegated = _post(operator, token, {"agentRole": "helper", "task": "look it up"})
    assert delegated["chainId"] == chain_id and delegated["parentJobId"] == "lead-1"
    early, late = ("lead-1", delegated["id"])
    if first == "delegated":
        early, late = late, early

    ended = _wait_decided(info, namespace, early)
    _assert_branch_ended(info, namespace, ended)
    # The other branch still runs (it sleeps much longer), so the chain is not complete.
    assert _status(info, namespace, late).get("phase") == "Running"
    assert _chain(operator, namespace, chain_id)["complete"] is False
    assert _status(info, namespace, "after-1").get("phase") == "Queued"  # Its slot is held.

    last = _wait_decided(info, namespace, late)
    assert last["status"]["phase"] == "Succeeded", last["status"]
    _assert_completes(info, namespace, last)
    record = _chain(operator, namespace, chain_id)
    assert record["complete"] is True and record["lastJob"] == late
    assert chaining.has_event(info, namespace, late, "Normal", "ChainComplete")
    # Once: the branch that ended first was not completed afterwards.
    jobs = chaining.chain_jobs(info, namespace, chain_id)
    assert [j["metadata"]["name"] for j in jobs if j["status"].get("chainComplete")] == [late]
    assert not chaining.has_event(info, namespace, early, "Normal", "ChainComplete")
    operating.wait_until(
        lambda: _status(info, namespace, "after-1").get("phase") == "Succeeded",
        timeout=TIMEOUT,
        what="after-1 let in by the freed slot",
    )
