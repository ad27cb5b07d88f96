"""The operator image, built from the top-level Dockerfile with no registry and no Docker
engine (``e2e/controlplane/operator_image.py``), runs on the real node under the chart's
security context: non-root, read-only root filesystem, no capabilities.

Marked ``realnode`` like ``test_realnode.py``: it needs root, buildah, mmdebstrap and the
real node, so ``make test`` runs it in its real-node lane (root) and ``make realnode`` alone.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

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

    with cluster() as info:
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


def _layers(archive: Path) -> list[tuple[str, int]]:
    """The (digest, size) of each layer of the one image in an OCI archive, base first."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> dict[str, Any]:
            member = tar.extractfile("blobs/sha256/" + digest.removeprefix("sha256:"))
            assert member is not None
            loaded: dict[str, Any] = json.load(member)
            return loaded

        index = tar.extractfile("index.json")
        assert index is not None
        (entry,) = json.load(index)["manifests"]
        return [(layer["digest"], layer["size"]) for layer in blob(entry["digest"])["layers"]]


def test_a_code_change_rebuilds_only_the_package_layer(tmp_path: Path) -> None:
    # The warm rebuild after a change to one module: every layer but the last is
    # reused, and the last holds the package alone (not its dependencies, which
    # depend on pyproject.toml only), so the image is rebuilt in seconds, not minutes.
    realnodes.skip_on_an_existing_cluster()
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "operator", tree / "operator",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))  # fmt: skip
    first = operator_image.build(tree, archives=tmp_path / "first")
    module = tree / "operator" / "agentchain" / "__init__.py"
    module.write_text(module.read_text() + "\n# A change to the code alone.\n")
    second = operator_image.build(tree, archives=tmp_path / "second")
    print(f"\n[image] rebuilt after a code change in {second.seconds:.1f} s")

    before, after = _layers(first.archive), _layers(second.archive)
    assert second.ref != first.ref and not second.cached
    assert len(after) == len(before) and after[:-1] == before[:-1], (before, after)
    assert after[-1] != before[-1]
    # The package's own files are well under a megabyte or two; with its dependencies
    # (the whole install redone) the layer is tens of MB.
    assert after[-1][1] < 8 * 2**20, after[-1]
