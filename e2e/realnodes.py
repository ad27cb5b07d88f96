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

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.controlplane import agent_images
from e2e.controlplane import realnode_lanes as lanes
from e2e.controlplane.cluster import (
    NEEDS_ROOT,
    ClusterInfo,
    HarnessError,
    cluster,
    existing_kubeconfig,
    say,
)

POD_TIMEOUT_SECONDS = 120.0
# Why a test of the real node's behaviour skips on a cluster the environment names.
NAMED_CLUSTER = "the cluster is a named one (AGENTCHAIN_E2E_KUBECONFIG), not the real node"


@contextlib.contextmanager
def cluster_with_agent_image(workdir: Path | None = None) -> Iterator[ClusterInfo]:
    """``cluster()`` with the e2e agent image (``images/e2e-agent``) built from this tree
    and imported into its real node, named as ``ClusterInfo.agent_image`` (every operator
    the harness starts makes it the agents' default image); on a cluster the environment
    names, ``cluster()`` as it is. The e2e session's cluster, ``make demo``'s and
    ``python -m e2e.controlplane up``'s."""
    if existing_kubeconfig() is not None:
        with cluster(workdir) as info:
            yield info
        return
    if os.geteuid() != 0:
        raise HarnessError(NEEDS_ROOT)
    # Built before the node starts: a failed build then holds no node, and a cached one
    # costs a hash of the inputs.
    image = agent_images.build_e2e()
    with cluster(workdir) as info:
        assert info.real_node is not None
        say(f"importing the e2e agent image {image.ref}")
        agent_images.import_into(info.real_node.paths.containerd_socket, image)
        yield dataclasses.replace(info, agent_image=image.ref)


def skip_without_root() -> None:
    """Skip the test when the real node cannot run here (not root), saying why and what
    to do; under CI (``CI=true``) fail it instead."""
    if os.geteuid() == 0:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {NEEDS_ROOT}", pytrace=False)
    pytest.skip(NEEDS_ROOT)


def skip_outside_a_lane(what: str) -> None:
    """Skip a test that starts ``what`` (a real node in another process) when this
    process runs outside a lane: it then holds the machine's one real node for the whole
    session (``realnode.machine``), which another process's node would wait for. In a lane
    (``lane-ns.sh``, as ``make test`` and ``make realnode`` run these tests) the other
    process's node is one more of the lane's, started after this test's own has gone."""
    if lanes.lane() is None:
        pytest.skip(
            f"{what} starts a real node in another process, and outside a lane this session "
            "holds the machine's one: run it in a lane (`make realnode`, `make test`, or "
            "e2e/controlplane/lane-ns.sh python -m pytest -m realnode ...)"
        )


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
