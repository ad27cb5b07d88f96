"""What the tests on the real node share (kubelet and containerd,
``e2e/controlplane/realnode.py``), the session's cluster and the tests marked
``realnode``, which each start a cluster of their own and wait for a pod.

The real node needs root: without it (and without a cluster named by
``AGENTCHAIN_E2E_KUBECONFIG``) a test that needs a cluster skips with one reason, and
fails under CI, which must never pass without the real node. The ``realnode`` tests
cannot run against an existing cluster, whose node is not this machine's, so they skip
there; their pods run in ``default`` of that fresh cluster.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from e2e.controlplane.cluster import NEEDS_ROOT, ClusterInfo, existing_kubeconfig

POD_TIMEOUT_SECONDS = 120.0
# Why a test of the real node's behaviour skips on a cluster the environment names.
NAMED_CLUSTER = "the cluster is a named one (AGENTCHAIN_E2E_KUBECONFIG), not the real node"


def skip_without_root() -> None:
    """Skip the test when the real node cannot run here (not root), saying why and what
    to do; under CI (``CI=true``) fail it instead."""
    if os.geteuid() == 0:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {NEEDS_ROOT}", pytrace=False)
    pytest.skip(NEEDS_ROOT)


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
