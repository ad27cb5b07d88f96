"""NetworkPolicy on the real node is enforced, not only stored.

A pod serving on a port is reached from another pod; a default-deny ingress policy in
its namespace makes it unreachable; a policy that admits pods by label lets a labelled
client through and still keeps the other out; with the policies deleted it is reached
again. The last step is what makes the middle ones mean something: the probe that failed
under the policy succeeds without it, so its failure was the policy's doing.

Marked ``realnode`` (``make realnode``): it starts its own cluster with the real node,
whose policy engine is kube-router in firewall-only mode (``realnode_policy.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from e2e.controlplane.cluster import (
    ClusterInfo,
    cluster,
    existing_kubeconfig,
    finish_workdir,
    make_workdir,
)
from e2e.controlplane.realnode_host import HostState

pytestmark = pytest.mark.realnode

NAMESPACE = "policed"
PORT = 8080
RUNNING_TIMEOUT_SECONDS = 120.0
# kube-router applies a policy change within a sync, normally a second or two; the
# budget covers a busy machine.
ENFORCE_TIMEOUT_SECONDS = 60.0
# busybox nc: -w bounds the connect; a dropped SYN then fails the probe in that time.
CONNECT_SECONDS = 3


def _pod(image: str, name: str, labels: dict[str, str], command: list[str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main", "image": image, "imagePullPolicy": "Never", "command": command,
            }],
        },
    }  # fmt: skip


def _policy(name: str, ingress: list[object]) -> dict[str, object]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "podSelector": {"matchLabels": {"app": "server"}},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def _apply(info: ClusterInfo, obj: dict[str, object]) -> None:
    info.kubectl("apply", "-f", "-", input=json.dumps(obj))


def _running_ip(info: ClusterInfo, name: str) -> str:
    deadline = time.monotonic() + RUNNING_TIMEOUT_SECONDS
    while True:
        out = info.kubectl("get", "pod", name, "-n", NAMESPACE, "-o", "json").stdout
        status = json.loads(out).get("status") or {}
        if status.get("phase") == "Running" and status.get("podIP"):
            return str(status["podIP"])
        if time.monotonic() > deadline:
            events = info.kubectl("get", "events", "-n", NAMESPACE, check=False).stdout
            pytest.fail(f"pod {name} is not running: {json.dumps(status)}\n{events}")
        time.sleep(0.5)


def _reaches(info: ClusterInfo, client: str, ip: str) -> bool:
    """Whether ``client`` gets the server's answer (its hostname) from ip:PORT."""
    result = info.kubectl(
        "exec", "-n", NAMESPACE, client, "--",
        "nc", "-w", str(CONNECT_SECONDS), ip, str(PORT), check=False,
    )  # fmt: skip
    return result.returncode == 0 and result.stdout.strip() == "server"


def _until(what: str, check: Callable[[], bool]) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > ENFORCE_TIMEOUT_SECONDS:
            pytest.fail(f"not within {ENFORCE_TIMEOUT_SECONDS:.0f}s: {what}")
        time.sleep(0.5)
    return time.monotonic() - started


def test_network_policy_is_enforced_on_the_real_node() -> None:
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")
    before = HostState.capture()
    workdir = make_workdir()
    succeeded = False
    try:
        with cluster(workdir) as info:
            node = info.real_node
            assert node is not None
            info.kubectl("create", "namespace", NAMESPACE)
            # `-ll -e`: a persistent server that answers each connection with its hostname.
            serve = ["nc", "-ll", "-p", str(PORT), "-e", "hostname"]
            _apply(info, _pod(node.test_image, "server", {"app": "server"}, serve))
            idle = ["sleep", "3600"]
            _apply(info, _pod(node.test_image, "trusted", {"access": "server"}, idle))
            _apply(info, _pod(node.test_image, "stranger", {}, idle))
            ip = _running_ip(info, "server")
            _running_ip(info, "trusted")
            _running_ip(info, "stranger")

            _until("the server is reached with no policy", lambda: _reaches(info, "stranger", ip))
            assert _reaches(info, "trusted", ip)

            _apply(info, _policy("deny-all", []))
            _until("the default-deny policy blocks", lambda: not _reaches(info, "stranger", ip))
            assert not _reaches(info, "trusted", ip)

            labelled = {"podSelector": {"matchLabels": {"access": "server"}}}
            admit: list[object] = [{"from": [labelled]}]
            _apply(info, _policy("admit-labelled", admit))
            _until("the labelled client is admitted", lambda: _reaches(info, "trusted", ip))
            assert not _reaches(info, "stranger", ip)

            info.kubectl("delete", "networkpolicy", "--all", "-n", NAMESPACE)
            _until("the server is reached again", lambda: _reaches(info, "stranger", ip))
        succeeded = True
    finally:
        finish_workdir(workdir, succeeded)
    # The engine's chains and ipsets are gone with the node.
    assert before.differences(HostState.capture()) == {}
