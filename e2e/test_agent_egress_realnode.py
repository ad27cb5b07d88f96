"""An agent's egress policy, as the operator builds it, enforced on the real node.

The pods stand for a release as the chart installs it: an "operator" pod with the
chart's operator labels behind a Service whose port is not the pod's, a "redis" pod
with the chart's Redis labels beside it, and in the agents' namespace a pod carrying
the labels of an agent's job and an unrelated "bystander" pod serving a port and 443.
With no policy the agent's pod reaches all three, so each probe can succeed. Under the
policy ``aiagents/rules/egress.plan`` builds for that agent (kube-router enforcing it)
the agent still resolves names and reaches the operator through its Service, and no
longer reaches Redis or the bystander, not even on 443, the external rule's port (pod
addresses are among its private exceptions); with the policy deleted it reaches them
again, so their silence was the policy's doing.

The cluster's DNS here is CoreDNS as a host process, not a pod: the policy is built
with the DNS namespace setting empty (port 53 to any address), as the chart's
``networkPolicy.agentEgress.dnsNamespace: ""`` says for such clusters.

Marked ``realnode`` (``make realnode``): it starts its own cluster with the real node.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from agentchain.aiagents.rules import egress
from agentchain.models.aiagent import AiAgentSpec
from agentchain.settings import Settings
from e2e.controlplane.cluster import (
    ClusterInfo,
    cluster,
    existing_kubeconfig,
    finish_workdir,
    make_workdir,
)
from e2e.controlplane.realnode_host import HostState

pytestmark = pytest.mark.realnode

SYSTEM = "agentchain-system"
AGENTS = "agents"
OPERATOR_LABELS = {
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


def _service() -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "agentchain", "namespace": SYSTEM},
        "spec": {
            "selector": OPERATOR_LABELS,
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


def _answers(info: ClusterInfo, address: str, port: int, expected: str) -> bool:
    """Whether the agent's pod gets ``expected`` (the server's hostname) from there."""
    result = info.kubectl(
        "exec", "-n", AGENTS, "agent", "--",
        "nc", "-w", str(CONNECT_SECONDS), address, str(port), check=False,
    )  # fmt: skip
    return result.returncode == 0 and result.stdout.strip() == expected


def _resolves(info: ClusterInfo) -> bool:
    result = info.kubectl(
        "exec", "-n", AGENTS, "agent", "--",
        "nslookup", f"agentchain.{SYSTEM}.svc.cluster.local", check=False,
    )  # fmt: skip
    return result.returncode == 0


def _until(what: str, check: Callable[[], bool]) -> None:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > ENFORCE_TIMEOUT_SECONDS:
            pytest.fail(f"not within {ENFORCE_TIMEOUT_SECONDS:.0f}s: {what}")
        time.sleep(0.5)


def _agents_policy() -> dict[str, object]:
    settings = Settings(
        agent_egress=True,
        api_url=f"http://agentchain.{SYSTEM}.svc:{SERVICE_PORT}",
        listen_port=API_PORT,
        agent_egress_operator_namespace=SYSTEM,
        agent_egress_operator_pod_labels=tuple(f"{k}={v}" for k, v in OPERATOR_LABELS.items()),
        agent_egress_dns_namespace="",
    )
    spec = AiAgentSpec.model_validate({"triggerName": "triage"})
    planned = egress.plan("triage", AGENTS, "no-agent-here", spec, settings)
    assert planned.policy is not None and planned.problems == ()
    policy = planned.policy
    # No AiAgent stands behind it here, and the garbage collector deletes an object
    # whose owner does not exist.
    del policy["metadata"]["ownerReferences"]
    return policy


def test_an_agents_pod_reaches_the_job_api_and_nothing_else_in_the_cluster() -> None:
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")
    before = HostState.capture()
    workdir = make_workdir()
    succeeded = False
    try:
        with cluster(workdir, node="real") as info:
            node = info.real_node
            assert node is not None
            image = node.test_image
            for namespace in (SYSTEM, AGENTS):
                info.kubectl("create", "namespace", namespace)
            _apply(info, _pod(image, "operator", SYSTEM, OPERATOR_LABELS, _server(API_PORT)))
            _apply(info, _pod(image, "redis", SYSTEM, REDIS_LABELS, _server(REDIS_PORT)))
            # The bystander also serves 443, the external rule's port: a pod address is
            # in the rule's private exceptions, so the policy keeps it out there too.
            both = f"{' '.join(_server(API_PORT))} & {' '.join(_server(HTTPS_PORT))}; wait"
            _apply(info, _pod(image, "bystander", AGENTS, {}, ["sh", "-c", both]))
            _apply(info, _pod(image, "agent", AGENTS, JOB_LABELS, ["sleep", "3600"]))
            _apply(info, _service())
            redis = _running_ip(info, SYSTEM, "redis")
            bystander = _running_ip(info, AGENTS, "bystander")
            _running_ip(info, SYSTEM, "operator")
            _running_ip(info, AGENTS, "agent")
            service = f"agentchain.{SYSTEM}.svc.cluster.local"

            def reaches_all() -> bool:
                return (
                    _resolves(info)
                    and _answers(info, service, SERVICE_PORT, "operator")
                    and _answers(info, redis, REDIS_PORT, "redis")
                    and _answers(info, bystander, API_PORT, "bystander")
                    and _answers(info, bystander, HTTPS_PORT, "bystander")
                )

            _until("the agent's pod reaches everything with no policy", reaches_all)

            _apply(info, _agents_policy())
            _until(
                "the policy keeps the agent from the bystander",
                lambda: not _answers(info, bystander, API_PORT, "bystander"),
            )
            assert not _answers(info, redis, REDIS_PORT, "redis")
            assert not _answers(info, bystander, HTTPS_PORT, "bystander")
            assert _resolves(info)
            assert _answers(info, service, SERVICE_PORT, "operator")

            info.kubectl("delete", "networkpolicy", "--all", "-n", AGENTS)
            _until("the agent's pod reaches everything again", reaches_all)
        succeeded = True
    finally:
        finish_workdir(workdir, succeeded)
    assert before.differences(HostState.capture()) == {}
