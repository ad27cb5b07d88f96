"""The benches' cluster: the local control plane on the real node, agents in containers.

Every bench that starts a cluster starts it here: ``cluster()`` (kubelet, containerd,
kube-proxy, CoreDNS, kube-router: ``e2e/controlplane/realnode.py``) with the e2e agent
image (``images/e2e-agent``, ``agent_images.build_e2e``) imported, as the e2e session's
cluster is (``e2e/realnodes.cluster_with_agent_image``), so the jobs
of the operator and of the floor controller run in the same image on the same node, and
the ratios compare like with like. The operator and the floor controller are host
processes beside the control plane, as in the e2e suite.

The real node needs root. ``make bench`` runs the scripts in a lane of their own
(``bench/run.sh``: ``lane-ns.sh`` inside ``realnode_lanes hold``), so it runs beside a
``make test`` whose real nodes are in lanes too; a script run alone, outside a lane,
takes the machine's real-node lock for itself.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from e2e import realnodes
from e2e.controlplane.cluster import ClusterInfo, existing_kubeconfig

NEEDS_ROOT = (
    "the benchmarks run on the real node (kubelet, containerd, kube-proxy), which needs "
    "root: run `make bench` (or the script) as root"
)


class NotRoot(SystemExit):
    """Raised before anything starts when this process is not root."""


def require_root() -> None:
    if os.geteuid() != 0:
        raise NotRoot(f"[bench] {NEEDS_ROOT}")


@contextlib.contextmanager
def bench_cluster(workdir: Path | None = None) -> Iterator[ClusterInfo]:
    """The control plane on the real node with the e2e agent image imported; its
    ``agent_image`` is what every operator the harness starts gives agents that name none
    (the e2e session's own cluster, ``realnodes.cluster_with_agent_image``). On
    AGENTCHAIN_E2E_KUBECONFIG's cluster, its nodes and their images are its own."""
    if existing_kubeconfig() is None:
        require_root()
    with realnodes.cluster_with_agent_image(workdir) as info:
        yield info
