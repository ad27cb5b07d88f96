"""The egress NetworkPolicy the operator keeps per AiAgent, on the real control plane.

An operator with ``agent_egress`` on (under the chart's RBAC rules, as every e2e
operator runs) writes one policy per AiAgent: it selects the pods of that agent's jobs
(the policy's selector finds the pod of a job that ran), allows only egress, and holds
the operator, the in-cluster model endpoint and the agent's own allow-list; it follows
a change of the AiAgent, goes when the agent opts out and when the agent is deleted
(its ownerReference).

On the real node, where kube-router enforces NetworkPolicy, the policy is also
enforced. The pods stand for a release as the chart
installs it: an "operator" pod with the chart's operator labels behind a Service whose
port is not the pod's, a "redis" pod with the chart's Redis labels beside it, and in the
agents' namespace a pod carrying the labels of an agent's job and an unrelated
"bystander" pod serving a port and 443. With no policy the agent's pod reaches all
three, so each probe can succeed. Under the policy ``aiagents/rules/egress.plan`` builds
for that agent the agent still resolves names and reaches the operator through its
Service, and no longer reaches Redis or the bystander, not even on 443, the external
rule's port (pod addresses are among its private exceptions); with the policy deleted it
reaches them again, so their silence was the policy's doing. The cluster's DNS there is
CoreDNS as a host process, not a pod: the policy is built with the DNS namespace setting
empty (port 53 to any address), as the chart's ``networkPolicy.agentEgress.dnsNamespace:
""`` says for such clusters. On a cluster named by ``AGENTCHAIN_E2E_KUBECONFIG`` the
session has no real node (and its pods and DNS are not this harness's), so that test
skips there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentchain.aiagents.rules import egress
from agentchain.models.aiagent import AiAgentSpec
from agentchain.settings import Settings
from e2e import chaining, operating, realnodes
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


CHART_OPERATOR_LABELS = {
    "app.kubernetes.io/name": "agentchain",
    "app.kubernetes.io/instance": "agentchain",
    "app.kubernetes.io/component": "operator",
}
REDIS_LABELS = {"app.kubernetes.io/name": "agentchain-redis"}
JOB_LABELS = {"labrats.work/agent": "triage", "labrats.work/agentjob": "triage-1"}
API_PORT = 8080
SERVICE_PORT = 80
REDIS_PORT = 6379
HTTPS_PORT = 443
RUNNING_TIMEOUT_SECONDS = 120.0
# kube-router applies a policy change within a sync, normally a second or two.
ENFORCE_TIMEOUT_SECONDS = 60.0
CONNECT_SECONDS = 3


def _pod(
    image: str, name: str, namespace: str, labels: dict[str, str], command: list[str]
) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main", "image": image, "imagePullPolicy": "Never", "command": command,
            }],
        },
    }  # fmt: skip


def _server(port: int) -> list[str]:
    # `-ll -e`: a persistent server that answers each connection with its hostname.
    return ["nc", "-ll", "-p", str(port), "-e", "hostname"]


def _service(system: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "agentchain", "namespace": system},
        "spec": {
            "selector": CHART_OPERATOR_LABELS,
            "ports": [{"port": SERVICE_PORT, "targetPort": API_PORT, "protocol": "TCP"}],
        },
    }


def _apply(info: ClusterInfo, obj: dict[str, object]) -> None:
    info.kubectl("apply", "-f", "-", input=json.dumps(obj))


def _running_ip(info: ClusterInfo, namespace: str, name: str) -> str:
    deadline = time.monotonic() + RUNNING_TIMEOUT_SECONDS
    while True:
        out = info.kubectl("get", "pod", name, "-n", namespace, "-o", "json").stdout
        status = json.loads(out).get("status") or {}
        if status.get("phase") == "Running" and status.get("podIP"):
            return str(status["podIP"])
        if time.monotonic() > deadline:
            events = info.kubectl("get", "events", "-n", namespace, check=False).stdout
            pytest.fail(f"pod {name} is not running: {json.dumps(status)}\n{events}")
        time.sleep(0.5)


def _answers(info: ClusterInfo, agents: str, address: str, port: int, expected: str) -> bool:
    """Whether the agent's pod gets ``expected`` (the server's hostname) from there."""
    result = info.kubectl(
        "exec", "-n", agents, "agent", "--",
        "nc", "-w", str(CONNECT_SECONDS), address, str(port), check=False,
    )  # fmt: skip
    return result.returncode == 0 and result.stdout.strip() == expected


def _resolves(info: ClusterInfo, agents: str, service: str) -> bool:
    result = info.kubectl(
        "exec", "-n", agents, "agent", "--", "nslookup", service, check=False,
    )  # fmt: skip
    return result.returncode == 0


def _until(what: str, check: Callable[[], bool]) -> None:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > ENFORCE_TIMEOUT_SECONDS:
            pytest.fail(f"not within {ENFORCE_TIMEOUT_SECONDS:.0f}s: {what}")
        time.sleep(0.5)


def _agents_policy(agents: str, system: str) -> dict[str, object]:
    settings = Settings(
        agent_egress=True,
        api_url=f"http://agentchain.{system}.svc:{SERVICE_PORT}",
        listen_port=API_PORT,
        agent_egress_operator_namespace=system,
        agent_egress_operator_pod_labels=tuple(
            f"{k}={v}" for k, v in CHART_OPERATOR_LABELS.items()
        ),
        agent_egress_dns_namespace="",
    )
    spec = AiAgentSpec.model_validate({"triggerName": "triage"})
    planned = egress.plan("triage", agents, "no-agent-here", spec, settings)
    assert planned.policy is not None and planned.problems == ()
    policy = planned.policy
    # No AiAgent stands behind it here, and the garbage collector deletes an object
    # whose owner does not exist.
    del policy["metadata"]["ownerReferences"]
    return policy


@pytest.mark.timeout(420)
def test_an_agents_pod_reaches_the_job_api_and_nothing_else_in_the_cluster(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    info, agents = cluster_info, namespace
    node = info.real_node
    if node is None:
        pytest.skip(realnodes.NAMED_CLUSTER)
    image = node.test_image
    system = f"{agents}-sys"
    info.kubectl("create", "namespace", system)
    try:
        _apply(info, _pod(image, "operator", system, CHART_OPERATOR_LABELS, _server(API_PORT)))
        _apply(info, _pod(image, "redis", system, REDIS_LABELS, _server(REDIS_PORT)))
        # The bystander also serves 443, the external rule's port: a pod address is in
        # the rule's private exceptions, so the policy keeps it out there too.
        both = f"{' '.join(_server(API_PORT))} & {' '.join(_server(HTTPS_PORT))}; wait"
        _apply(info, _pod(image, "bystander", agents, {}, ["sh", "-c", both]))
        _apply(info, _pod(image, "agent", agents, JOB_LABELS, ["sleep", "3600"]))
        _apply(info, _service(system))
        redis = _running_ip(info, system, "redis")
        bystander = _running_ip(info, agents, "bystander")
        _running_ip(info, system, "operator")
        _running_ip(info, agents, "agent")
        service = f"agentchain.{system}.svc.cluster.local"

        def reaches_all() -> bool:
            return (
                _resolves(info, agents, service)
                and _answers(info, agents, service, SERVICE_PORT, "operator")
                and _answers(info, agents, redis, REDIS_PORT, "redis")
                and _answers(info, agents, bystander, API_PORT, "bystander")
                and _answers(info, agents, bystander, HTTPS_PORT, "bystander")
            )

        _until("the agent's pod reaches everything with no policy", reaches_all)

        _apply(info, _agents_policy(agents, system))
        _until(
            "the policy keeps the agent from the bystander",
            lambda: not _answers(info, agents, bystander, API_PORT, "bystander"),
        )
        assert not _answers(info, agents, redis, REDIS_PORT, "redis")
        assert not _answers(info, agents, bystander, HTTPS_PORT, "bystander")
        assert _resolves(info, agents, service)
        assert _answers(info, agents, service, SERVICE_PORT, "operator")

        info.kubectl("delete", "networkpolicy", "--all", "-n", agents)
        _until("the agent's pod reaches everything again", reaches_all)
    finally:
        info.kubectl("delete", "namespace", system, "--wait=false", check=False)
