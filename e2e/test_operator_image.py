"""The operator image, built from the top-level Dockerfile with no registry and no Docker
engine (``e2e/controlplane/operator_image.py``), runs on the real node under the chart's
security context: non-root, read-only root filesystem, no capabilities.

Marked ``realnode`` like ``test_realnode.py``: it needs root, buildah, mmdebstrap and the
real node, so ``make test`` deselects it and ``make realnode`` runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from e2e import realnodes
from e2e.controlplane import operator_image, realnode_images
from e2e.controlplane.cluster import cluster

pytestmark = pytest.mark.realnode

ROOT = Path(__file__).resolve().parents[1]


def _mounts() -> list[str]:
    # Mount points and sources, not the ids, which the kernel may renumber.
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return sorted(" ".join(line.split()[3:5]) for line in lines)


def _chart_pod(image: str) -> dict[str, object]:
    """A pod with the chart's pod and container security contexts and its /tmp emptyDir,
    running the image's entry point with ``config-reference``."""
    values = yaml.safe_load((ROOT / "charts" / "agentchain" / "values.yaml").read_text())
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "operator-image", "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": values["podSecurityContext"],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": values["tmpSizeLimit"]}}],
            "containers": [{
                "name": "operator", "image": image, "imagePullPolicy": "Never",
                "args": ["config-reference", "--output", "/dev/stdout"],
                "securityContext": values["securityContext"],
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
            }],
        },
    }  # fmt: skip


def test_the_dockerfile_builds_without_a_registry_and_runs_as_the_chart_runs_it() -> None:
    realnodes.skip_on_an_existing_cluster()
    mounts = _mounts()
    built = operator_image.build(ROOT)
    assert _mounts() == mounts, "the build left mounts behind"
    # Built twice with nothing changed: the second is the cache, found by its inputs.
    again = operator_image.build(ROOT)
    assert (again.ref, again.archive, again.cached) == (built.ref, built.archive, True)
    assert again.seconds < 10, again

    with cluster(node="real") as info:
        node = info.real_node
        assert node is not None
        realnode_images.import_image(
            Path("ctr"), node.paths.containerd_socket,
            realnode_images.Image(built.ref, built.archive),
        )  # fmt: skip
        info.kubectl("apply", "-f", "-", input=json.dumps(_chart_pod(built.ref)))
        pod = realnodes.finished_pod(info, "operator-image")
        status = pod["status"]
        assert isinstance(status, dict)
        (container,) = status["containerStatuses"]
        terminated = container["state"]["terminated"]
        logs = info.kubectl("logs", "operator-image").stdout
        assert terminated["exitCode"] == 0, (terminated, logs)
        assert status["phase"] == "Succeeded"
        # The settings reference, rendered by the package installed in the image: the
        # same text as the repository's generated copy (a unit test keeps that in sync).
        assert logs == (ROOT / "docs" / "configuration.md").read_text(), logs[:500]
