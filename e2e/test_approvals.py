"""Approval gates and comment commands on the real control plane (issue 16).

Aspects covered:
- a gated job waits in ``AwaitingApproval``; a ``/agentchain approve`` comment from a
  stranger (association NONE, not an approver) changes nothing, visibly in the
  webhook's answer; the same comment from a listed approver lets it run
  (``approvedBy: github:<login>``) and it succeeds;
- without a GitHub App, an agent with the default ``approval: {}`` is approved by the
  repository's OWNER only (a MEMBER is refused), and that approval, replayed once a
  second job waits, does not approve it (``duplicate``);
- a ``/agentchain reject`` comment from a stranger changes nothing; from an approver it
  fails the job unrun (``ApprovalRejected``, who and why in the message);
- a gate that times out fails the job (``ApprovalTimedOut``) and the chain's failure
  policy applies: its ``on-failure`` step runs;
- the API rejects (``ApprovalRejected``, nothing runs) and the annotation approves;
- ``/agentchain retry`` from the owner runs the failed step of the issue's latest chain
  again as a new chain (``labrats.work/retry-of``); from a stranger it does nothing;
- ``/agentchain stop`` from the repository's owner stops a running job
  (``stoppedBy: github:<login>``): its pod (and process) is gone, and no child is spawned
  although its step's condition is ``always``; from a stranger it changes nothing.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from typing import Any

from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
REPO = "acme/gates"


def _labeled(number: int) -> Obj:
    return {
        "action": "labeled",
        "label": {"name": "agent"},
        "issue": {
            "id": uuid.uuid4().int >> 80,
            "number": number,
            "title": "Deploy the fix",
            "body": "Please.",
            "author_association": "OWNER",
            "labels": [{"name": "agent"}],
            "user": {"login": "alice", "type": "User"},
        },
        "repository": {"full_name": REPO},
        "sender": {"login": "alice", "type": "User"},
    }


def _comment(number: int, login: str, association: str, body: str) -> Obj:
    return {
        "action": "created",
        "issue": {"number": number, "title": "Deploy the fix", "user": {"login": "alice"}},
        "comment": {
            "id": uuid.uuid4().int >> 80,
            "body": body,
            "author_association": association,
            "user": {"login": login, "type": "User"},
        },
        "repository": {"full_name": REPO},
        "sender": {"login": login, "type": "User"},
    }


def _send(operator: operating.OperatorProcess, payload: Obj, event: str) -> Obj:
    body, headers = delivering.signed(operator.webhook_secret, payload, event=event)
    code, answer = delivering.send(operator, body, headers)
    assert code in (200, 202), answer
    return answer


def _start(operator: operating.OperatorProcess, namespace: str, number: int) -> str:
    answer = _send(operator, _labeled(number), "issues")
    [job] = [j["name"] for j in answer["jobs"] if j["namespace"] == namespace]
    return str(job)


def _mine(answer: Obj, namespace: str) -> list[Obj]:
    return [j for j in answer["command"]["jobs"] if j["namespace"] == namespace]


def test_a_comment_approves_only_from_an_allowed_sender(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    gate = {"approvers": ["carol"], "associations": ["OWNER"]}
    chaining.apply(
        info,
        namespace,
        chaining.agent("gated", "--no-context", approval=gate, github="issues.labeled"),
    )
    time.sleep(2.5)  # The webhook's agent listing is refreshed every 2 s.
    name = _start(operator, namespace, 4101)
    status = chaining.wait_phase(info, namespace, name, "AwaitingApproval")
    assert status["reason"] == "AwaitingApproval"
    stranger = _send(
        operator, _comment(4101, "mallory", "NONE", "/agentchain approve"), "issue_comment"
    )
    assert [j["result"] for j in _mine(stranger, namespace)] == ["refused"], stranger
    assert stranger["command"]["reply"].startswith("no reply on GitHub")
    operating.stays(
        lambda: chaining.job_status(info, namespace, name)["phase"] == "AwaitingApproval",
        seconds=3,
        what=f"{name} awaiting approval after a stranger's approve",
    )
    carol = _send(
        operator,
        _comment(4101, "carol", "CONTRIBUTOR", "/agentchain approve lgtm"),
        "issue_comment",
    )
    assert [j["result"] for j in _mine(carol, namespace)] == ["approved"], carol
    status = chaining.wait_phase(info, namespace, name, "Succeeded", "Failed")
    assert status["phase"] == "Succeeded" and status["approvedBy"] == "github:carol", status


def test_without_an_app_only_the_owner_approves_by_default_and_once(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info,
        namespace,
        chaining.agent("plain", "--no-context", approval={}, github="issues.labeled"),
    )
    time.sleep(2.5)  # The webhook's agent listing is refreshed every 2 s.
    first = _start(operator, namespace, 4121)
    chaining.wait_phase(info, namespace, first, "AwaitingApproval")
    member = _send(
        operator, _comment(4121, "mia", "MEMBER", "/agentchain approve"), "issue_comment"
    )
    assert [j["result"] for j in _mine(member, namespace)] == ["refused"], member
    owner = _comment(4121, "alice", "OWNER", "/agentchain approve")
    body, headers = delivering.signed(operator.webhook_secret, owner, event="issue_comment")
    code, approved = delivering.send(operator, body, headers)
    assert code == 200 and [j["result"] for j in _mine(approved, namespace)] == ["approved"]
    chaining.wait_phase(info, namespace, first, "Succeeded")
    second = _start(operator, namespace, 4121)  # Waits when the approval is replayed.
    chaining.wait_phase(info, namespace, second, "AwaitingApproval")
    code, replayed = delivering.send(operator, body, headers)
    assert code == 200 and replayed["command"]["result"] == "duplicate", replayed
    operating.stays(
        lambda: chaining.job_status(info, namespace, second)["phase"] == "AwaitingApproval",
        seconds=3,
        what=f"{second} awaiting approval after a replayed approve",
    )


def test_a_reject_comment_from_an_approver_fails_the_job_unrun(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    gate = {"approvers": ["carol"], "associations": ["OWNER"]}
    chaining.apply(
        info,
        namespace,
        chaining.agent("vetoed", "--no-context", approval=gate, github="issues.labeled"),
    )
    time.sleep(2.5)  # The webhook's agent listing is refreshed every 2 s.
    name = _start(operator, namespace, 4111)
    chaining.wait_phase(info, namespace, name, "AwaitingApproval")
    stranger = _send(
        operator, _comment(4111, "mallory", "NONE", "/agentchain reject"), "issue_comment"
    )
    assert [j["result"] for j in _mine(stranger, namespace)] == ["refused"], stranger
    carol = _send(
        operator,
        _comment(4111, "carol", "CONTRIBUTOR", "/agentchain reject not this one"),
        "issue_comment",
    )
    assert [j["result"] for j in _mine(carol, namespace)] == ["rejected"], carol
    status = chaining.wait_phase(info, namespace, name, "Failed", "Succeeded")
    assert status["reason"] == "ApprovalRejected", status
    assert "carol" in status["message"] and "not this one" in status["message"], status
    assert chaining.batch_jobs(info, namespace, name) == []  # It never ran.


def test_an_approval_timeout_applies_the_failure_policy(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    on_failure = chaining.step("cleanup", condition="on-failure")
    gated = chaining.agent("hasty", "--no-context", next_=on_failure)
    gated["spec"]["approval"] = {"timeoutSeconds": 3}
    chaining.apply(info, namespace, gated, chaining.agent("cleanup", "--no-context"))
    chaining.apply(info, namespace, chaining.root_job("hasty-1", "hasty"))
    chaining.wait_phase(info, namespace, "hasty-1", "AwaitingApproval")
    status = chaining.wait_phase(info, namespace, "hasty-1", "Failed")
    assert status["reason"] == "ApprovalTimedOut", status
    jobs = chaining.wait_chain(info, namespace, "hasty-1", 2)
    assert jobs[1]["spec"]["agentRole"] == "cleanup"
    assert jobs[1]["status"]["phase"] == "Succeeded"


def _api(operator: operating.OperatorProcess, path: str, body: Obj) -> int:
    request = urllib.request.Request(
        f"{operator.url}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {operator.admin_token}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return int(resp.status)


def test_the_api_rejects_and_an_annotation_approves(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    gated = chaining.agent("guarded", "--no-context")
    gated["spec"]["approval"] = {}
    chaining.apply(info, namespace, gated)
    chaining.apply(
        info, namespace, chaining.root_job("no-1", "guarded"), chaining.root_job("yes-1", "guarded")
    )
    chaining.wait_phase(info, namespace, "no-1", "AwaitingApproval")
    assert _api(operator, f"/api/jobs/{namespace}/no-1/reject", {"reason": "not today"}) == 202
    status = chaining.wait_phase(info, namespace, "no-1", "Failed")
    assert status["reason"] == "ApprovalRejected" and "not today" in status["message"], status
    assert chaining.batch_jobs(info, namespace, "no-1") == []
    chaining.wait_phase(info, namespace, "yes-1", "AwaitingApproval")
    info.kubectl("annotate", "aj", "yes-1", "-n", namespace, "labrats.work/approval=approved")
    status = chaining.wait_phase(info, namespace, "yes-1", "Succeeded", "Failed")
    assert status["phase"] == "Succeeded" and status["approvedBy"] == "annotation", status


def test_a_stop_comment_from_the_owner_stops_and_from_a_stranger_does_nothing(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    always = chaining.step("after", "always")
    worker = chaining.agent(
        "worker", "--no-context", "--sleep", "60", next_=always, github="issues.labeled"
    )
    chaining.apply(info, namespace, worker, chaining.agent("after", "--no-context"))
    time.sleep(2.5)  # The webhook's agent listing is refreshed every 2 s.
    name = _start(operator, namespace, 4102)
    chaining.wait_phase(info, namespace, name, "Running")
    stranger = _send(
        operator, _comment(4102, "mallory", "NONE", "/agentchain stop"), "issue_comment"
    )
    assert [j["result"] for j in _mine(stranger, namespace)] == ["refused"], stranger
    owner = _send(
        operator, _comment(4102, "alice", "OWNER", "/agentchain stop enough"), "issue_comment"
    )
    assert [j["result"] for j in _mine(owner, namespace)] == ["stopping"], owner
    status = chaining.wait_phase(info, namespace, name, "Cancelled")
    assert status["stoppedBy"] == "github:alice" and "enough" in status["message"], status
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, name).get("chainComplete") is True,
        timeout=30,
        what="the stopped chain to complete",
    )
    selector = f"labrats.work/agentjob={name}"
    operating.wait_until(  # Deleted once the kubelet saw the agent's container end.
        lambda: not operating.get_json(info, "pods", "-n", namespace, "-l", selector)["items"],
        timeout=60,
        what="the stopped job's pod to go",
    )
    jobs = chaining.chain_jobs(info, namespace, status["chainId"])
    assert [j["metadata"]["name"] for j in jobs] == [name], "a stopped job spawned a child"


def test_a_retry_comment_runs_the_failed_step_again_as_a_new_chain(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info,
        namespace,
        chaining.agent("fixer", "--no-context", "--exit-code", "3", github="issues.labeled"),
    )
    time.sleep(2.5)  # The webhook's agent listing is refreshed every 2 s.
    failed = _start(operator, namespace, 4103)
    status = chaining.wait_phase(info, namespace, failed, "Failed")
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, failed).get("chainComplete") is True,
        timeout=30,
        what="the failed chain to complete",
    )
    stranger = _send(
        operator, _comment(4103, "mallory", "NONE", "/agentchain retry"), "issue_comment"
    )
    assert [j["result"] for j in _mine(stranger, namespace)] == ["refused"], stranger
    owner = _send(operator, _comment(4103, "alice", "OWNER", "/agentchain retry"), "issue_comment")
    [done] = _mine(owner, namespace)
    assert done["result"] == "retried" and done["job"] == failed, owner
    again = chaining.wait_phase(info, namespace, done["retry"], "Failed", "Succeeded")
    assert again["chainId"] != status["chainId"] and again["chainDepth"] == 0
    retried = operating.get_json(info, "agentjob", done["retry"], "-n", namespace)
    assert retried["metadata"]["annotations"]["labrats.work/retry-of"] == failed
    assert retried["spec"]["agentRole"] == "fixer"
