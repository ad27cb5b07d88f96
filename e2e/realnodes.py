"""What the tests marked ``realnode`` share: each starts a cluster of its own on the real
node (kubelet and containerd, ``e2e/controlplane/realnode.py``) and waits for a pod.

They cannot run against an existing cluster, whose node is not this machine's, so they
skip there; their pods run in ``default`` of that fresh cluster.
"""

from __future__ import annotations

import json
import time

import pytest

from e2e.controlplane.cluster import ClusterInfo, existing_kubeconfig

POD_TIMEOUT_SECONDS = 120.0


def skip_on_an_existing_cluster() -> None:
    """Skip the test when the suite runs against an existing cluster."""
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")


def finished_pod(
    info: ClusterInfo, name: str, timeout: float = POD_TIMEOUT_SECONDS
) -> dict[str, object]:
    """Pod ``name`` of ``default`` once it has ended; fail with the cluster's Events when it
    does not end within ``timeout`` (an image or mount problem shows there)."""
    deadline = time.monotonic() + timeout
    while True:
        pod: dict[str, object] = json.loads(info.kubectl("get", "pod", name, "-o", "json").stdout)
        status = pod.get("status") or {}
        assert isinstance(status, dict)
        if status.get("phase") in ("Succeeded", "Failed"):
            return pod
        if time.monotonic() > deadline:
            events = info.kubectl("get", "events", "-o", "wide", check=False).stdout
            pytest.fail(f"pod {name} did not finish: {json.dumps(status)}\n{events}")
        time.sleep(0.5)
