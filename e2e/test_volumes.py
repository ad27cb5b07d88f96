"""Claims of the default StorageClass on the real node: the harness's provisioner
(``e2e/controlplane/provisioner.py``) and the kubelet's hostPath volumes, as a workspace
uses them.

Aspects covered:
- a claim without a class gets the default one and is bound (an Event says it was
  provisioned); what one pod writes a later pod sees, also through a ``subPath``; a
  ``readOnly`` mount and a claim volume's own ``readOnly`` refuse writes;
- two claims are two volumes: each pod sees only its own claim's files;
- a pod whose claim does not exist yet is not scheduled until the claim is bound;
- deleting the claim (once its pod is gone) removes its PersistentVolume and its
  directory (on the real node, whose volumes are this machine's directories).

The pods run the node's test image (busybox), or busybox on a cluster the environment
names.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from e2e import operating
from e2e.controlplane import provisioner
from e2e.controlplane.cluster import ClusterInfo

TIMEOUT_SECONDS = 90.0
READ_ONLY = "Read-only file system"
Obj = dict[str, Any]


def _image(info: ClusterInfo) -> str:
    return info.real_node.test_image if info.real_node else "busybox:1.36"


def _claim(name: str) -> Obj:
    """A claim of the default StorageClass (no storageClassName), as the product makes."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}},
    }


def _volume(name: str, claim: str, read_only: bool = False) -> Obj:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}}


def _pod(info: ClusterInfo, name: str, script: str, mounts: list[Obj], volumes: list[Obj]) -> Obj:
    container = {
        "name": "main", "image": _image(info), "command": ["sh", "-c", script],
        "volumeMounts": mounts,
    }  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [container],
            "volumes": volumes,
        },
    }


def _create(info: ClusterInfo, namespace: str, body: Obj) -> None:
    info.kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(body))


def _bound(kube_api: kubernetes.client.ApiClient, namespace: str, claim: str) -> Any:
    core: Any = kubernetes.client.CoreV1Api(kube_api)  # its models' fields are Optional
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while (
        found := core.read_namespaced_persistent_volume_claim(claim, namespace)
    ).status.phase != "Bound":
        assert time.monotonic() < deadline, f"claim {claim} never bound: {found.status}"
        time.sleep(0.2)
    return found


def _finished(info: ClusterInfo, namespace: str, name: str) -> Obj:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        pod: Obj = json.loads(
            info.kubectl("-n", namespace, "get", "pod", name, "-o", "json").stdout
        )
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return pod
        assert time.monotonic() < deadline, f"pod {name} did not end: {pod.get('status')}"
        time.sleep(0.5)


def _run(info: ClusterInfo, namespace: str, body: Obj) -> str:
    """Create the pod, wait until it has ended, check it succeeded; its log."""
    name = body["metadata"]["name"]
    _create(info, namespace, body)
    pod = _finished(info, namespace, name)
    logs = info.kubectl("-n", namespace, "logs", name).stdout
    assert pod["status"]["phase"] == "Succeeded", logs
    return logs


def test_a_claim_is_bound_and_what_one_pod_writes_the_next_sees_read_only_too(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    info = cluster_info
    _create(info, namespace, _claim("ws"))
    claim = _bound(kube_api, namespace, "ws")
    if info.real_node is not None:
        assert claim.spec.storage_class_name == provisioner.CLASS_NAME  # the default class
        events = info.kubectl(
            "-n", namespace, "get", "events", "--field-selector=involvedObject.name=ws",
            "-o", "jsonpath={.items[*].reason}",
        ).stdout  # fmt: skip
        assert "ProvisioningSucceeded" in events.split()
    script = "mkdir -p /ws/src && echo from-writer > /ws/src/note && echo ok"
    writer = _pod(info, "writer", script, [{"name": "w", "mountPath": "/ws"}], [_volume("w", "ws")])
    assert _run(info, namespace, writer) == "ok\n"

    # Later: one mount of a subPath read-only beside a writable mount of the whole claim.
    # (One volume: two volumes of one claim in a pod are never both mounted by the
    # kubelet, which waits for them until the pod's start times out.)
    mounts: list[Obj] = [
        {"name": "w", "mountPath": "/src", "subPath": "src", "readOnly": True},
        {"name": "w", "mountPath": "/all"},
    ]
    script = (
        f"cat /src/note; cat /all/src/note; (echo x > /src/new) 2>&1 | grep -o '{READ_ONLY}';"
        " echo y > /all/new && ls /all"
    )
    logs = _run(info, namespace, _pod(info, "reader", script, mounts, [_volume("w", "ws")]))
    assert logs == f"from-writer\nfrom-writer\n{READ_ONLY}\nnew\nsrc\n"
    # A claim volume read-only itself refuses writes on every mount of it.
    script = f"(echo x > /all/other) 2>&1 | grep -o '{READ_ONLY}'; ls /all"
    volumes = [_volume("r", "ws", read_only=True)]
    sealed = _pod(info, "sealed", script, [{"name": "r", "mountPath": "/all"}], volumes)
    assert _run(info, namespace, sealed) == f"{READ_ONLY}\nnew\nsrc\n"


def test_two_claims_are_two_volumes(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    for name in ("one", "two"):
        _create(cluster_info, namespace, _claim(name))
    bound = {name: _bound(kube_api, namespace, name).spec.volume_name for name in ("one", "two")}
    assert bound["one"] != bound["two"]
    for name in ("one", "two"):
        script = f"echo {name} > /v/{name}; ls /v"
        body = _pod(
            cluster_info, f"pod-{name}", script, [{"name": "v", "mountPath": "/v"}],
            [_volume("v", name)],
        )  # fmt: skip
        assert _run(cluster_info, namespace, body) == f"{name}\n"


def test_a_pod_waits_for_its_claim_then_runs(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    body = _pod(
        cluster_info, "patient", "ls -a /v | wc -l", [{"name": "v", "mountPath": "/v"}],
        [_volume("v", "later")],
    )  # fmt: skip
    _create(cluster_info, namespace, body)
    core: Any = kubernetes.client.CoreV1Api(kube_api)  # its models' fields are Optional

    def unscheduled() -> bool:
        pod = core.read_namespaced_pod("patient", namespace)
        assert pod.status.phase == "Pending" and not pod.spec.node_name  # not scheduled
        return True

    operating.stays(unscheduled, seconds=3, what="the pod without its claim unscheduled")
    _create(cluster_info, namespace, _claim("later"))
    pod = _finished(cluster_info, namespace, "patient")
    assert pod["status"]["phase"] == "Succeeded"
    assert cluster_info.kubectl("-n", namespace, "logs", "patient").stdout.strip() == "2"


def test_deleting_a_claim_removes_its_volume_and_directory(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    info = cluster_info
    if info.real_node is None:
        pytest.skip("the volumes' directories are this machine's on the real node only")
    _create(info, namespace, _claim("gone"))
    volume_name = _bound(kube_api, namespace, "gone").spec.volume_name
    core: Any = kubernetes.client.CoreV1Api(kube_api)  # its models' fields are Optional
    volume = core.read_persistent_volume(volume_name)
    assert volume.spec.persistent_volume_reclaim_policy == "Delete"
    directory = Path(volume.spec.host_path.path)
    assert directory.is_dir() and directory.parent == info.workdir / "volumes"
    body = _pod(
        info, "filler", "echo data > /v/f", [{"name": "v", "mountPath": "/v"}],
        [_volume("v", "gone")],
    )  # fmt: skip
    _run(info, namespace, body)
    assert (directory / "f").read_text() == "data\n"

    # Even a finished pod holds its claim (pvc-protection) until the pod is deleted.
    info.kubectl("-n", namespace, "delete", "pod", "filler", "--wait=true")
    info.kubectl("-n", namespace, "delete", "pvc", "gone", "--wait=true")
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while directory.exists() or volume_name in {
        v.metadata.name for v in core.list_persistent_volume().items
    }:
        assert time.monotonic() < deadline, "the released volume was not reclaimed"
        time.sleep(0.2)
