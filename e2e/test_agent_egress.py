"""The egress NetworkPolicy the operator keeps per AiAgent, on the real control plane.

An operator with ``agent_egress`` on (under the chart's RBAC rules, as every e2e
operator runs) writes one policy per AiAgent: it selects the pods of that agent's jobs
(the policy's selector finds the pod of a job that ran), allows only egress, and holds
the operator, the in-cluster model endpoint and the agent's own allow-list; it follows
a change of the AiAgent, goes when the agent opts out and when the agent is deleted
(its ownerReference). Whether a network plugin enforces it is the real node's test
(``test_agent_egress_realnode.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agentchain.aiagents.rules import egress
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
TIMEOUT_SECONDS = 60.0
OPERATOR_NAMESPACE = "agentchain-system"
OPERATOR_LABELS = "app.kubernetes.io/name=agentchain,app.kubernetes.io/component=operator"


@pytest.fixture
def egress_operator(
    operator_paused: None, cluster_info: ClusterInfo
) -> Iterator[operating.OperatorProcess]:
    extra = {
        "AGENTCHAIN_AGENT_EGRESS": "true",
        "AGENTCHAIN_AGENT_EGRESS_OPERATOR_NAMESPACE": OPERATOR_NAMESPACE,
        "AGENTCHAIN_AGENT_EGRESS_OPERATOR_POD_LABELS": OPERATOR_LABELS,
    }
    with operating.running(cluster_info, extra) as op:
        yield op


def _policy(info: ClusterInfo, namespace: str, agent: str) -> Obj | None:
    name = egress.policy_name(agent)
    found = info.kubectl("get", "networkpolicy", name, "-n", namespace, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    policy: Obj = json.loads(found.stdout)
    return policy


def _wait_policy(info: ClusterInfo, namespace: str, agent: str, check: Any, what: str) -> Obj:
    holder: dict[str, Obj] = {}

    def reached() -> bool:
        policy = _policy(info, namespace, agent)
        if policy is not None and check(policy):
            holder["policy"] = policy
            return True
        return False

    operating.wait_until(reached, timeout=TIMEOUT_SECONDS, what=what)
    return holder["policy"]


def _peers(policy: Obj) -> list[Obj]:
    return [peer for rule in policy["spec"]["egress"] for peer in rule.get("to", [])]


def _cidrs(policy: Obj) -> set[str]:
    return {p["ipBlock"]["cidr"] for p in _peers(policy) if "ipBlock" in p}


def _patch(info: ClusterInfo, namespace: str, name: str, spec: Obj) -> None:
    info.kubectl(
        "patch", "aiagent", name, "-n", namespace, "--type", "merge",
        "-p", json.dumps({"spec": spec}),
    )  # fmt: skip


def _wait_condition(info: ClusterInfo, namespace: str, agent: str, status: str, reason: str) -> Obj:
    """The AiAgent's ``EgressPolicy`` condition once it says ``status`` for ``reason``."""
    holder: dict[str, Obj] = {}

    def reached() -> bool:
        found = operating.get_json(info, "aiagent", agent, "-n", namespace)
        for condition in (found.get("status") or {}).get("conditions") or []:
            if condition["type"] == "EgressPolicy" and condition["status"] == status:
                if condition["reason"] == reason:
                    holder["condition"] = condition
                    return True
        return False

    operating.wait_until(reached, timeout=TIMEOUT_SECONDS, what=f"{agent}'s EgressPolicy {reason}")
    return holder["condition"]


def test_each_agent_gets_a_policy_that_follows_it_and_goes_with_it(
    egress_operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    allow = [{"cidr": "203.0.113.0/24", "ports": [{"port": 8443}]}]
    model = {"type": "claude-code", "baseUrl": "http://vllm.models.svc:8000"}
    coder = chaining.ai_agent("coder", triggers=chaining.MANUAL, runtime=model)
    chaining.apply(info, namespace, chaining.agent("triage", egress={"allow": allow}), coder)

    policy = _wait_policy(info, namespace, "triage", lambda p: True, "triage's policy")
    _wait_condition(info, namespace, "triage", "True", "EgressPolicyApplied")
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Egress"]
    assert spec["podSelector"]["matchLabels"] == {"labrats.work/agent": "triage"}
    (owner,) = policy["metadata"]["ownerReferences"]
    agent = operating.get_json(info, "aiagent", "triage", "-n", namespace)
    assert (owner["kind"], owner["uid"]) == ("AiAgent", agent["metadata"]["uid"])
    operator_peer = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": OPERATOR_NAMESPACE}},
        "podSelector": {"matchLabels": dict(p.split("=") for p in OPERATOR_LABELS.split(","))},
    }
    assert operator_peer in _peers(policy)
    assert "203.0.113.0/24" in _cidrs(policy)
    model_peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "models"}}}
    coder_policy = _wait_policy(info, namespace, "coder", lambda p: True, "coder's policy")
    assert model_peer in _peers(coder_policy) and model_peer not in _peers(policy)

    # The selector finds the pods of the agent's jobs, and only those.
    chaining.apply(info, namespace, chaining.root_job("triage-1", "triage"))
    job = chaining.wait_job(info, namespace, "triage-1")
    assert job["status"]["phase"] == "Succeeded", job["status"]
    selector = "labrats.work/agent=triage,labrats.work/agentjob"
    pods = operating.get_json(info, "pods", "-n", namespace, "-l", selector)["items"]
    assert [p["metadata"]["labels"]["labrats.work/agentjob"] for p in pods] == ["triage-1"]

    _patch(info, namespace, "triage", {"egress": {"allow": [{"cidr": "198.51.100.7/32"}]}})
    _wait_policy(
        info, namespace, "triage",
        lambda p: "198.51.100.7/32" in _cidrs(p) and "203.0.113.0/24" not in _cidrs(p),
        "the policy to follow the AiAgent's allow-list",
    )  # fmt: skip

    _patch(info, namespace, "triage", {"egress": {"policy": "none"}})
    operating.wait_until(
        lambda: _policy(info, namespace, "triage") is None,
        timeout=TIMEOUT_SECONDS,
        what="the opted-out agent's policy to go",
    )
    _wait_condition(info, namespace, "triage", "True", "EgressNotRestricted")
    _patch(info, namespace, "triage", {"egress": {"policy": "generated"}})
    _wait_policy(info, namespace, "triage", lambda p: True, "the policy to come back")

    info.kubectl("delete", "aiagent", "triage", "-n", namespace)
    operating.wait_until(
        lambda: _policy(info, namespace, "triage") is None,
        timeout=TIMEOUT_SECONDS,
        what="the deleted agent's policy to be collected",
    )
    assert _policy(info, namespace, "coder") is not None


def test_an_allow_entry_the_policy_cannot_hold_is_refused_by_the_api_server(
    egress_operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    both = {"allow": [{"cidr": "10.1.0.0/16", "namespace": "models"}]}
    result = cluster_info.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=json.dumps(chaining.agent("both", egress=both)), check=False,
    )  # fmt: skip
    assert result.returncode != 0 and "give either cidr or namespace" in result.stderr


def test_an_allow_list_the_policy_cannot_hold_is_said_in_events_not_a_crash(
    egress_operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    # Passes the schema: a network pattern that is no network, and a label key the API
    # server refuses in the policy's selector.
    odd = {"allow": [{"cidr": "999.1.1.1/8"}, {"namespace": "models", "podLabels": {"a b": "c"}}]}
    chaining.apply(info, namespace, chaining.agent("odd", egress=odd))
    operating.wait_until(
        lambda: chaining.has_event(info, namespace, "odd", "Warning", "EgressPolicyFailed"),
        timeout=TIMEOUT_SECONDS,
        what="the refused policy's Event",
    )
    assert chaining.has_event(info, namespace, "odd", "Warning", "EgressRuleIgnored")
    assert _policy(info, namespace, "odd") is None
    refused = _wait_condition(info, namespace, "odd", "False", "EgressPolicyFailed")
    assert "could not be written" in refused["message"]

    # The operator goes on: fixed, the agent gets its policy.
    _patch(info, namespace, "odd", {"egress": {"allow": [{"cidr": "192.0.2.0/24"}]}})
    policy = _wait_policy(info, namespace, "odd", lambda p: True, "the fixed agent's policy")
    assert "192.0.2.0/24" in _cidrs(policy)
    _wait_condition(info, namespace, "odd", "True", "EgressPolicyApplied")
