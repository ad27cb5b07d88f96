"""The benches' cluster: the local control plane on the real node, agents in containers.

Every bench that starts a cluster starts it here: ``cluster(node="real")`` (kubelet,
containerd, kube-proxy, CoreDNS, kube-router: ``e2e/controlplane/realnode.py``) with the
e2e agent image (``images/e2e-agent``, ``agent_images.build_e2e``) imported, so the jobs
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
import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from e2e.controlplane import agent_images
from e2e.controlplane.cluster import (
    ClusterInfo,
    cluster,
    existing_kubeconfig,
    finish_workdir,
    make_workdir,
    say,
)

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
    ``agent_image`` is what every operator the harness starts gives agents that name none."""
    if existing_kubeconfig() is not None:
        # AGENTCHAIN_E2E_KUBECONFIG's cluster: its nodes are its own, and so is getting
        # an agent image onto them; benches that run agents say so (agent_image).
        with cluster(workdir) as info:
            yield info
        return
    require_root()
    path = make_workdir() if workdir is None else workdir
    # Built (or found cached: a hash of its inputs) before the node starts, so a failed
    # build holds no node.
    image = agent_images.build_e2e()
    # The cache keeps one archive per image name: another checkout's build of the same
    # image (other inputs, another key) deletes this one's, maybe while the node is still
    # starting. A hard link in the run's workdir keeps the file for this run.
    kept = path / image.archive.name
    path.mkdir(parents=True, exist_ok=True)
    try:
        os.link(image.archive, kept)
    except OSError:  # Another file system: a copy does the same.
        shutil.copyfile(image.archive, kept)
    image = dataclasses.replace(image, archive=kept)
    with cluster(path, node="real") as info:
        assert info.real_node is not None
        say(f"importing the e2e agent image {image.ref}")
        agent_images.import_into(info.real_node.paths.containerd_socket, image)
        yield dataclasses.replace(info, agent_image=image.ref)
    # Reached after a clean run only; cluster() keeps a failed run's workdir itself.
    if workdir is None:
        finish_workdir(path, succeeded=True)
