"""Issue 15's chain and agent defects, end to end on the real control plane.

Aspects covered:
- a triggerName two AiAgents share runs neither: a chain step to it is a Failed
  child (``DuplicateTriggerName``, message and Warning Event naming both AiAgents,
  the parent's ``status.next`` ``refused``); an AgentJob created with kubectl ends
  Failed with that reason and never gets a batch Job; ``POST /api/jobs`` answers 409
  JSON naming both; a webhook delivery lists no job for it and says why, once;
- ``dependsOn`` cycles end instead of waiting for good: a job depending on itself
  and two jobs depending on each other all end Failed with ``DependencyCycle``, a
  message naming the cycle and a Warning Event; a job depending on one of them goes
  on and runs; a Waiting job's message follows its dependency's phase (``Running``
  once it runs, not the ``Waiting`` it had when first looked at);
- a static ring of ``next`` steps (an agent naming itself, two naming each other)
  shows ``LoopFree=False`` with ``StaticLoop`` naming the ring and a Warning Event,
  while ``Ready`` stays True; an agent outside any ring shows ``LoopFree=True``;
- a skipped step is recorded as ``Skipped`` on the parent's ``status.next``, not
  ``ChildSpawned``, and the skipped agent's own ``next`` runs as after a success.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from e2e import chaining, delivering, operating
from e2e.chaining import agent, root_job, step
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
DUP = "ai-dup"


def _named(obj: Obj, name: str) -> Obj:
    return {**obj, "metadata": {"name": name}}


def _job(name: str, agent_role: str, depends_on: list[str]) -> Obj:
    job = root_job(name, agent_role)
    job["spec"]["dependsOn"] = depends_on
    return job


def _get(info: ClusterInfo, kind: str, name: str, namespace: str) -> Obj:
    return operating.get_json(info, kind, name, "-n", namespace)


def _condition(info: ClusterInfo, name: str, namespace: str, type_: str) -> Obj:
    return chaining.condition(_get(info, "aiagent", name, namespace), type_) or {}


def _post_job(op: operating.OperatorProcess, body: Obj) -> tuple[int, Obj]:
    request = urllib.request.Request(
        f"{op.url}/api/jobs",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {op.admin_token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code), json.loads(error.read())


def _names_both(text: str) -> bool:
    return "dup-one" in text and "dup-two" in text


def _duplicates(info: ClusterInfo, namespace: str) -> None:
    """Two AiAgents with triggerName ai-dup (one with a github trigger), and ai-to-dup → ai-dup."""
    chaining.apply(
        info,
        namespace,
        _named(agent(DUP, "--no-context", github="issues.opened"), "dup-one"),
        _named(agent(DUP, "--no-context", "--exit-code", "3"), "dup-two"),
        agent("ai-to-dup", "--no-context", next_=step(DUP)),
    )
    for name in ("dup-one", "dup-two"):
        operating.wait_until(
            lambda n=name: (
                _condition(info, n, namespace, "Ready").get("reason") == "DuplicateTriggerName"
            ),
            timeout=30,
            what=f"{name} Ready=False/DuplicateTriggerName",
        )


def test_a_chain_step_to_a_shared_trigger_name_is_refused(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    _duplicates(info, namespace)
    chaining.apply(info, namespace, root_job("to-dup", "ai-to-dup"))
    parent, child = chaining.wait_chain(info, namespace, "to-dup", 2)
    assert child["status"]["phase"] == "Failed", child["status"]
    assert child["status"]["reason"] == "DuplicateTriggerName"
    assert _names_both(child["status"]["message"])
    assert "jobName" not in child["status"]
    assert parent["status"]["next"][0]["action"] == "refused"
    # The refusal ends the chain, as every refusal does.
    complete = chaining.condition(child, "ChainComplete") or {}
    assert "(refused)" in complete.get("message", ""), child["status"]
    events = chaining.events_for(info, namespace, child["metadata"]["name"])
    assert any(
        e["type"] == "Warning"
        and e["reason"] == "DuplicateTriggerName"
        and _names_both(e["message"])
        for e in events
    ), events
    # Only the chain's first job ever ran.
    assert chaining.batch_job_names(info, namespace) == [parent["status"]["jobName"]]


def test_a_job_created_for_a_shared_trigger_name_fails(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    _duplicates(info, namespace)
    chaining.apply(info, namespace, root_job("manual-dup", DUP))
    status = chaining.wait_phase(info, namespace, "manual-dup", "Failed")
    assert status["reason"] == "DuplicateTriggerName", status
    assert _names_both(status["message"])
    assert "jobName" not in status
    assert chaining.has_event(info, namespace, "manual-dup", "Warning", "DuplicateTriggerName")
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, "manual-dup").get("chainComplete"),
        timeout=30,
        what="manual-dup's chain to complete",
    )
    assert chaining.job_status(info, namespace, "manual-dup")["next"][0]["action"] == "none"
    assert chaining.batch_job_names(info, namespace) == []


def test_the_api_refuses_a_shared_trigger_name(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    _duplicates(cluster_info, namespace)
    code, answer = _post_job(operator, {"namespace": namespace, "agentRole": DUP, "prompt": "x"})
    assert code == 409, answer
    assert answer["reason"] == "DuplicateTriggerName"
    assert answer["agents"] == ["dup-one", "dup-two"]
    assert _names_both(answer["detail"])
    assert chaining.batch_job_names(cluster_info, namespace) == []


def test_a_webhook_delivery_says_why_a_shared_trigger_name_did_not_run(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    _duplicates(cluster_info, namespace)

    def answer() -> Obj:
        payload = delivering.issue_opened()
        status, body = delivering.send(
            operator, *delivering.signed(operator.webhook_secret, payload)
        )
        assert status in (200, 202), body
        return body

    def mine(body: Obj, key: str) -> list[Obj]:
        return [i for i in body[key] if i["namespace"] == namespace]

    # The webhook's listing of agents is up to 2 s old: wait until it has this namespace.
    operating.wait_until(
        lambda: mine(answer(), "jobs") or mine(answer(), "ignored"),
        timeout=60,
        interval=0.5,
        what="the webhook to match ai-dup",
    )
    body = answer()
    assert mine(body, "jobs") == []
    ignored = mine(body, "ignored")
    assert len(ignored) == 1 and ignored[0]["agent"] == DUP, ignored
    assert _names_both(ignored[0]["reason"])


def test_dependency_cycles_end_with_a_reason(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, agent("ai-work", "--no-context"))
    chaining.apply(
        info,
        namespace,
        _job("selfish", "ai-work", ["selfish"]),
        _job("cyc-a", "ai-work", ["cyc-b"]),
        _job("cyc-b", "ai-work", ["cyc-a"]),
        _job("after-cycle", "ai-work", ["cyc-a"]),
    )
    expected = {
        "selfish": "selfish depends on itself",
        "cyc-a": "cyc-a → cyc-b → cyc-a",
        "cyc-b": "cyc-b → cyc-a → cyc-b",
    }
    for name, words in expected.items():
        status = chaining.wait_phase(info, namespace, name, "Failed")
        assert status["reason"] == "DependencyCycle", status
        assert words in status["message"], status
        assert "jobName" not in status
        assert chaining.has_event(info, namespace, name, "Warning", "DependencyCycle")
    # Depending on a job of the cycle is not being in it: it goes on once that ends.
    assert chaining.wait_phase(info, namespace, "after-cycle", "Succeeded")["reason"] == "Succeeded"


def test_the_second_half_of_a_cycle_ends_after_the_first_has(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    # The order a busy operator can take: cyc-a has already ended for the cycle when
    # cyc-b is first looked at, so cyc-b has nothing left to wait for. It is still in
    # the cycle (through cyc-a's dependsOn) and must end the same way, not run.
    info = cluster_info
    chaining.apply(info, namespace, agent("ai-work", "--no-context"))
    chaining.apply(info, namespace, _job("cyc-a", "ai-work", ["cyc-b"]))
    chaining.wait_phase(info, namespace, "cyc-a", "Waiting")
    ended = {"phase": "Failed", "reason": "DependencyCycle", "message": "cyc-a → cyc-b → cyc-a"}
    info.kubectl(
        "patch", "agentjob", "cyc-a", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": ended}),
    )  # fmt: skip
    chaining.apply(info, namespace, _job("cyc-b", "ai-work", ["cyc-a"]))
    status = chaining.wait_phase(info, namespace, "cyc-b", "Failed")
    assert status["reason"] == "DependencyCycle", status
    assert "cyc-b → cyc-a → cyc-b" in status["message"], status
    assert "jobName" not in status


def test_a_waiting_message_follows_the_dependencys_phase(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info, namespace, agent("ai-work", "--no-context"), agent("ai-slow", "--sleep", "15")
    )
    chaining.apply(
        info,
        namespace,
        _job("waiter", "ai-work", ["middle"]),
        _job("middle", "ai-slow", ["gate"]),
    )

    def says(phase: str) -> bool:
        message = chaining.job_status(info, namespace, "waiter").get("message")
        return message == f"Waiting for middle (phase {phase})."

    operating.wait_until(lambda: says("Waiting"), timeout=30, what="waiter: middle Waiting")
    chaining.apply(info, namespace, root_job("gate", "ai-work"))
    # Same reason (WaitingForDependencies) all along; only the dependency's phase moves.
    operating.wait_until(lambda: says("Running"), timeout=30, what="waiter: middle Running")
    assert chaining.wait_phase(info, namespace, "waiter", "Succeeded")


def test_static_rings_are_flagged_and_ready_stays_true(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info,
        namespace,
        agent("ai-narcissus", "--no-context", next_=step("ai-narcissus")),
        agent("ai-ping", "--no-context", next_=step("ai-pong")),
        agent("ai-pong", "--no-context", next_=step("ai-ping", "on-failure")),
        agent("ai-plain", "--no-context", next_=step("ai-ping")),
    )
    rings = {
        "ai-narcissus": "ai-narcissus → ai-narcissus",
        "ai-ping": "ai-ping → ai-pong → ai-ping",
        "ai-pong": "ai-pong → ai-ping → ai-pong",
    }
    for name, ring in rings.items():
        operating.wait_until(
            lambda n=name: _condition(info, n, namespace, "LoopFree").get("reason") == "StaticLoop",
            timeout=30,
            what=f"{name} LoopFree=False/StaticLoop",
        )
        loop = _condition(info, name, namespace, "LoopFree")
        assert loop["status"] == "False" and ring in loop["message"], loop
        assert _condition(info, name, namespace, "Ready")["status"] == "True"
        assert chaining.has_event(info, namespace, name, "Warning", "StaticLoop")
    operating.wait_until(
        lambda: _condition(info, "ai-plain", namespace, "LoopFree").get("status") == "True",
        timeout=30,
        what="ai-plain LoopFree=True",
    )


def test_a_skipped_step_is_recorded_as_skipped(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info,
        namespace,
        agent(
            "ai-falls", "--no-context", "--exit-code", "1", next_=step("ai-passed", policy="skip")
        ),
        agent("ai-passed", "--no-context", next_=step("ai-lands")),
        agent("ai-lands", "--no-context"),
    )
    chaining.apply(info, namespace, root_job("skipping", "ai-falls"))
    fell, passed, landed = chaining.wait_chain(info, namespace, "skipping", 3)
    entry = fell["status"]["next"][0]
    assert (entry["action"], entry["reason"]) == ("skipped", "Skipped"), entry
    assert "as if it succeeded" in entry["message"]
    assert (passed["status"]["phase"], passed["status"]["reason"]) == ("Skipped", "Skipped")
    assert passed["status"]["next"][0]["action"] == "spawned"
    assert landed["status"]["phase"] == "Succeeded"
