"""The issue's acceptance check, against the operator *process* (SPEC §2, §7; seed 003).

"A signed issues.opened delivery for seed 003's triage agent returns 202 and the chain
runs to the end; the same delivery sent again (also after restarting the operator)
creates nothing new."  ``test_webhook.py`` checks the endpoint in-process; here the
session's operator (``python -m agentchain run``, its own ServiceAccount) receives the
delivery over HTTP, its dispatcher creates the root AgentJob and its engine runs the
chain, and a restart is a SIGKILL and a new process on the same Redis.

Aspects covered:
* a signed ``issues.opened`` → 202 naming one new ai-triage root job; the chain runs
  ai-triage → ai-developer → ai-reviewer, every job Succeeded, depths, parents and
  paths as the sample declares, the last job marks the chain complete; the job API's
  chain tree (admin token) shows the same finished tree;
* the same delivery again → 202 ``duplicate`` naming the same job, not newly created;
  once the dispatcher has dealt with the re-queued job (found existing) the namespace
  holds exactly the same AgentJobs and batch Jobs;
* after a SIGKILL and a restart, the same delivery again → the same answer, nothing new;
* a new delivery whose 202 is followed at once by a SIGKILL (the dispatcher may not
  have created anything yet) → after the restart exactly one root AgentJob for it (the
  durable queue is drained by the new process), its chain runs once to the end, and a
  redelivery afterwards adds nothing.

The operator's webhook matches against an AiAgent listing up to two seconds old, and
a delivery's outcome is recorded for good on first sight (as GitHub would see it): so
each test first waits until the operator's listing holds the namespace's agents (see
:func:`agents_listed`).  Waits are polls with generous deadlines (two cores, a whole
control plane); the session operator is left running whatever happens.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from agentchain.store import keys
from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "config" / "samples" / "labrats.work_v1alpha1_aiagent_issue-fix-review.yaml"
ROLES = ["ai-triage", "ai-developer", "ai-reviewer"]
CHAIN_TIMEOUT_SECONDS = 180.0
DRAIN_TIMEOUT_SECONDS = 60.0
# After the dispatcher is done with a redelivery, this long again to catch a late extra job.
SETTLE_SECONDS = 3.0


# --------------------------------------------------------------------------- helpers


def agents_listed(op: operating.OperatorProcess, namespace: str) -> None:
    """Wait until the operator's webhook matches ``namespace``'s triage agent.

    Probed with a stranger's issue: it matches the triage trigger, the sender policy
    refuses it, and the answer names the agent it refused; nothing is created.
    """

    def listed() -> bool:
        probe = delivering.issue_opened(number=9000, association="NONE")
        status, answer = delivering.send(op, *delivering.signed(op.webhook_secret, probe))
        assert status in (200, 202), answer
        return any(i["namespace"] == namespace for i in answer["ignored"])

    operating.wait_until(
        listed, timeout=60, interval=0.5, what=f"the webhook to list the agents of {namespace}"
    )


def mine(answer: Obj, namespace: str) -> list[tuple[str, str | None, bool]]:
    """The answer's jobs in ``namespace`` (the session operator serves every namespace)."""
    return [
        (j["name"], j["agent"], j["created"]) for j in answer["jobs"] if j["namespace"] == namespace
    ]


def agentjobs(info: ClusterInfo, namespace: str) -> list[Obj]:
    out = info.kubectl("get", "agentjobs", "-n", namespace, "-o", "json").stdout
    items: list[Obj] = json.loads(out)["items"]
    return items


def snapshot(info: ClusterInfo, namespace: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(AgentJob name, uid) pairs and batch Job names: what a redelivery must not change."""
    jobs = sorted((j["metadata"]["name"], j["metadata"]["uid"]) for j in agentjobs(info, namespace))
    return jobs, chaining.batch_job_names(info, namespace)


def pending(info: ClusterInfo, namespace: str) -> int:
    """Queued webhook jobs of ``namespace`` the dispatcher has not finished with."""
    with redis.Redis.from_url(info.redis_url) as client:
        return int(client.zcard(keys.webhook_queue(namespace)))


def drained(info: ClusterInfo, namespace: str) -> None:
    # A 202 answers after the job is queued; it leaves the queue once its create answered.
    operating.wait_until(
        lambda: pending(info, namespace) == 0,
        timeout=DRAIN_TIMEOUT_SECONDS,
        what=f"the webhook queue of {namespace} to drain",
    )


def dispatched(op: operating.OperatorProcess, result: str) -> float:
    """``agentchain_webhook_jobs_total{result=…}`` of the running operator process."""
    with urllib.request.urlopen(f"{op.internal_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "agentchain_webhook_jobs_total" and sample.labels == {
                "result": result
            }:
                return float(sample.value)
    return 0.0


def chain_tree(op: operating.OperatorProcess, namespace: str, chain_id: str) -> Obj:
    request = urllib.request.Request(
        f"{op.url}/api/chains/{namespace}/{chain_id}",
        headers={"Authorization": f"Bearer {op.admin_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        tree: Obj = json.load(resp)
    return tree


def assert_finished_chain(
    op: operating.OperatorProcess, namespace: str, root: str, delivery_id: str, jobs: list[Obj]
) -> str:
    """Seed 003's chain ran to the end from ``root``; its chain id."""
    names = [j["metadata"]["name"] for j in jobs]
    assert names[0] == root
    assert [j["spec"]["agentRole"] for j in jobs] == ROLES
    chain_id = str(jobs[0]["status"]["chainId"])
    spec = jobs[0]["spec"]
    assert spec["origin"] == "github" and spec["event"]["deliveryId"] == delivery_id
    for depth, job in enumerate(jobs):
        status = job["status"]
        assert status["phase"] == "Succeeded", status
        assert status["exitCode"] == 0
        assert status["chainId"] == chain_id and status["chainDepth"] == depth
        assert status["chainPath"] == ROLES[: depth + 1]
        assert status.get("parentJobId") == (names[depth - 1] if depth else None)
    assert [bool(j["status"].get("chainComplete")) for j in jobs] == [False, False, True]

    tree = chain_tree(op, namespace, chain_id)
    assert (tree["chainId"], tree["namespace"], tree["jobCount"]) == (chain_id, namespace, 3)
    assert tree["complete"] is True and tree["outcome"] == "succeeded"
    assert tree["lastJob"] == names[-1]
    [node] = tree["roots"]
    walked: list[tuple[str, str, str, str]] = []
    while True:
        walked.append((node["id"], node["agentRole"], node["phase"], node["status"]))
        if not node["children"]:
            break
        [node] = node["children"]
    assert walked == [(n, r, "Succeeded", "completed") for n, r in zip(names, ROLES, strict=True)]
    return chain_id


def redeliver_creates_nothing(
    op: operating.OperatorProcess,
    info: ClusterInfo,
    namespace: str,
    delivery: tuple[bytes, dict[str, str]],
    root: str,
) -> None:
    """Send ``delivery`` again: a duplicate naming ``root``; the dispatcher adds nothing."""
    before = snapshot(info, namespace)
    existed = dispatched(op, "existed")
    status, answer = delivering.send(op, *delivery)
    assert status == 202, answer
    assert answer["duplicate"] is True
    assert answer["delivery"] == delivery[1]["X-GitHub-Delivery"]
    # The record's job, queued again and not newly accepted (webhook.py's contract).
    assert mine(answer, namespace) == [(root, "ai-triage", False)]
    drained(info, namespace)
    # Dealt with: the create answered AlreadyExists (the name is the delivery's).
    operating.wait_until(
        lambda: dispatched(op, "existed") >= existed + 1,
        timeout=DRAIN_TIMEOUT_SECONDS,
        what="the dispatcher to find the redelivered job existing",
    )
    # Then a late, extra object would show.
    operating.stays(
        lambda: snapshot(info, namespace) == before,
        seconds=SETTLE_SECONDS,
        what="no object from the redelivery",
    )


@pytest.fixture
def seeded(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> Iterator[str]:
    """Seed 003's agents in the test's namespace, seen by the operator's webhook.

    The tests SIGKILL the session's operator; it is running again when they end.
    """
    cluster_info.kubectl("apply", "-n", namespace, "-f", str(SAMPLE))
    try:
        agents_listed(operator, namespace)
        yield namespace
    finally:
        if operator.process is None:
            operator.start()


# --------------------------------------------------------------------------- tests


@pytest.mark.timeout(600)
def test_a_signed_issue_runs_the_chain_and_redeliveries_create_nothing(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, seeded: str
) -> None:
    op, info, namespace = operator, cluster_info, seeded
    delivery = delivering.signed(op.webhook_secret, delivering.issue_opened())
    delivery_id = delivery[1]["X-GitHub-Delivery"]

    status, answer = delivering.send(op, *delivery)
    assert status == 202, answer
    assert answer["duplicate"] is False and answer["delivery"] == delivery_id
    [(root, agent, created)] = mine(answer, namespace)
    assert (agent, created) == ("ai-triage", True)
    drained(info, namespace)  # The dispatcher created the root AgentJob.

    jobs = chaining.wait_chain(info, namespace, root, 3, timeout=CHAIN_TIMEOUT_SECONDS)
    assert_finished_chain(op, namespace, root, delivery_id, jobs)
    assert len(chaining.batch_job_names(info, namespace)) == 3

    redeliver_creates_nothing(op, info, namespace, delivery, root)

    op.kill()
    op.start()
    redeliver_creates_nothing(op, info, namespace, delivery, root)
    [only] = [j for j in agentjobs(info, namespace) if j["spec"]["origin"] == "github"]
    assert only["metadata"]["name"] == root


@pytest.mark.timeout(600)
def test_a_delivery_accepted_right_before_sigkill_is_created_once(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, seeded: str
) -> None:
    op, info, namespace = operator, cluster_info, seeded
    delivery = delivering.signed(op.webhook_secret, delivering.issue_opened(number=43))
    delivery_id = delivery[1]["X-GitHub-Delivery"]

    status, answer = delivering.send(op, *delivery)
    op.kill()  # At once: the dispatcher may not have created the job yet.
    assert status == 202, answer
    [(root, agent, created)] = mine(answer, namespace)
    assert (agent, created) == ("ai-triage", True)
    # Whichever it was, the job is in Redis (queued) or in the cluster: never lost.
    assert pending(info, namespace) + len(agentjobs(info, namespace)) >= 1

    op.start()
    drained(info, namespace)  # The new process drained what the killed one left.
    roots = [j for j in agentjobs(info, namespace) if j["spec"]["origin"] == "github"]
    assert [j["metadata"]["name"] for j in roots] == [root]
    assert roots[0]["spec"]["event"]["deliveryId"] == delivery_id

    jobs = chaining.wait_chain(info, namespace, root, 3, timeout=CHAIN_TIMEOUT_SECONDS)
    assert_finished_chain(op, namespace, root, delivery_id, jobs)
    redeliver_creates_nothing(op, info, namespace, delivery, root)
