"""The real node (``cluster()``): a pod from a locally built image runs under
the upstream kubelet and containerd, and teardown leaves the machine as it was.

Marked ``realnode``: ``make test`` runs it in a lane of its own, ``make realnode`` alone
(it needs root, Debian's containerd, runc, CNI plugins, iptables and nftables, and builds kubelet,
kube-proxy and CoreDNS on its first run). It starts its own cluster rather than the
session's, to compare the machine from before its node to after it. Run in a lane
(``e2e/controlplane/lane-ns.sh``, as ``e2e/lanes.sh`` does) it checks the lane: its
node's cgroups under the lane's own root, and the lane's state as it was after.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from e2e import realnodes
from e2e.controlplane import realnode_config, realnode_lanes
from e2e.controlplane import realnode_host as host
from e2e.controlplane.cluster import cluster
from e2e.controlplane.realnode_host import HostState

pytestmark = pytest.mark.realnode

SCRIPT = "echo hello from a real kubelet; echo to stderr >&2; exit 3"
# From inside a pod: the cluster DNS resolves the API server's Service, and the Service IP
# leads to the API server (kube-proxy's rules, the bridge address). busybox speaks no TLS,
# so nc sends plain HTTP to the HTTPS port, which Go's TLS server answers with a 400:
# proof that the API server itself was reached.
# The pod's addresses and routes follow, so a failure to reach either says whether the
# pod had its network at all.
REACH_API = (
    "nslookup kubernetes.default.svc.cluster.local; "
    "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 10 10.0.0.1 443; "
    "ip addr; ip route; true"
)


def _pod(image: str, name: str = "exits-three", script: str = SCRIPT) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [{
                "name": "main", "image": image, "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", script],
            }],
        },
    }  # fmt: skip


def test_real_kubelet_runs_a_local_image_and_teardown_restores_the_machine() -> None:
    realnodes.skip_on_an_existing_cluster()
    before = HostState.capture()
    with cluster() as info:
        node = info.real_node
        assert node is not None
        nodes = json.loads(info.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        assert [n["metadata"]["name"] for n in nodes] == [realnode_config.NODE_NAME]
        runtime = nodes[0]["status"]["nodeInfo"]["containerRuntimeVersion"]
        assert runtime.startswith("containerd://"), runtime
        # The kubelet's pods' cgroups are under this node's own root (a lane's, in one),
        # which no other real node on the machine touches.
        kubepods = host.CGROUP_MOUNT / "memory" / realnode_lanes.cgroup_root() / "kubepods"
        assert kubepods.is_dir(), kubepods

        info.kubectl("apply", "-f", "-", input=json.dumps(_pod(node.test_image)))
        pod = realnodes.finished_pod(info, "exits-three")
        spec, status = pod["spec"], pod["status"]
        assert isinstance(spec, dict) and isinstance(status, dict)
        assert spec["nodeName"] == realnode_config.NODE_NAME
        assert status["phase"] == "Failed"
        (container,) = status["containerStatuses"]
        terminated = container["state"]["terminated"]
        assert terminated["exitCode"] == 3, terminated
        assert terminated["reason"] == "Error", terminated
        assert container["containerID"].startswith("containerd://"), container
        assert container["imageID"], container
        # Through the API server, which reads them from the kubelet on its bridge
        # address: both streams (containerd reads them through two pipes, so their
        # relative order is not kept).
        logs = info.kubectl("logs", "exits-three").stdout
        assert sorted(logs.splitlines()) == ["hello from a real kubelet", "to stderr"]

        pod_json = json.dumps(_pod(node.test_image, "reaches-the-api", REACH_API))
        info.kubectl("apply", "-f", "-", input=pod_json)
        realnodes.finished_pod(info, "reaches-the-api")
        logs = info.kubectl("logs", "reaches-the-api").stdout
        if "400 Bad Request" not in logs:  # The node's side too, for the message.
            for argv in (["ip", "addr"], ["ip", "route"], ["iptables-save", "-t", "nat"]):
                run = subprocess.run(argv, capture_output=True, text=True, check=False)
                logs += f"\n--- node: {' '.join(argv)}\n{run.stdout}{run.stderr}"
        assert f"Server:\t\t{realnode_config.DNS_SERVICE_IP}" in logs, logs
        assert "Address: 10.0.0.1\n" in logs, logs
        assert "400 Bad Request" in logs, logs
        # Pods came and went, and the bridge kept the address it was given: a bridge with
        # none of its own takes its ports' lowest, and pods then lose the gateway.
        link = subprocess.run(["ip", "-json", "link", "show", realnode_config.BRIDGE],
                              capture_output=True, text=True, check=True)  # fmt: skip
        assert json.loads(link.stdout)[0]["address"] == node.network.bridge_mac
    assert before.differences(HostState.capture()) == {}
    # containerd's shims detach from containerd; none may outlive the cluster.
    assert _processes_naming(str(info.workdir)) == []


def _processes_naming(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(f"{entry.name}: {cmdline}")
    return found
