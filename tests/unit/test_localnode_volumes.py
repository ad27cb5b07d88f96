"""Volumes on the local node (``e2e/controlplane/localnode_volumes.py``), without a cluster.

Aspects covered:
- planning: a Secret's keys as files (base64 decoded, ``defaultMode``), ``items`` (key →
  path, per-item mode), a ConfigMap's, an emptyDir, unsupported types left out; a
  missing object or key waits (EnvError) unless ``optional``; paths cannot leave the
  volume;
- the objects a container's volumes refer to (only those it mounts);
- mounts: ``mountPath``, ``readOnly``, ``subPath``;
- for real (as root): a process started with the mounts sees the Secret's file at the
  mount path, cannot write there when read-only, and the node's own view is unchanged.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e.controlplane import localnode_volumes as volumes
from e2e.controlplane.localnode_env import EnvError


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


SECRETS = {"job-s": {"prompt": _b64("$(X) hi"), "token": _b64("tok")}}
MAPS = {"cfg": {"a.txt": "A"}}
POD: dict[str, Any] = {
    "spec": {
        "volumes": [
            {
                "name": "p",
                "secret": {"secretName": "job-s", "items": [{"key": "prompt", "path": "prompt"}]},
            },
            {"name": "c", "configMap": {"name": "cfg", "defaultMode": 0o600}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "host", "hostPath": {"path": "/etc"}},
            {"name": "unused", "secret": {"secretName": "other"}},
        ]
    }
}
CONTAINER: dict[str, Any] = {
    "volumeMounts": [
        {"name": "p", "mountPath": "/var/run/agentchain", "readOnly": True},
        {"name": "c", "mountPath": "/etc/cfg/a.txt", "subPath": "a.txt"},
        {"name": "scratch", "mountPath": "/work/"},
        {"name": "host", "mountPath": "/host"},
    ]
}


def _volume(name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(v for v in POD["spec"]["volumes"] if v["name"] == name)
    return found


def test_a_secret_volume_with_items_holds_only_those_keys_decoded() -> None:
    plan = volumes.plan_volume(_volume("p"), SECRETS, MAPS)
    assert plan == volumes.VolumePlan("p", {"prompt": (b"$(X) hi", 0o644)}, read_only=True)


def test_a_whole_secret_and_per_item_modes() -> None:
    whole = volumes.plan_volume(
        {"name": "v", "secret": {"secretName": "job-s", "defaultMode": 0o400}}, SECRETS, {}
    )
    assert whole is not None and whole.files == {
        "prompt": (b"$(X) hi", 0o400),
        "token": (b"tok", 0o400),
    }
    item = {"key": "token", "path": "sub/t", "mode": 0o440}
    one = volumes.plan_volume(
        {"name": "v", "secret": {"secretName": "job-s", "items": [item]}}, SECRETS, {}
    )
    assert one is not None and one.files == {"sub/t": (b"tok", 0o440)}


def test_config_maps_empty_dirs_and_unsupported_types() -> None:
    assert volumes.plan_volume(_volume("c"), SECRETS, MAPS) == volumes.VolumePlan(
        "c", {"a.txt": (b"A", 0o600)}, read_only=True
    )
    assert volumes.plan_volume(_volume("scratch"), SECRETS, MAPS) == volumes.VolumePlan(
        "scratch", keep=True
    )
    assert volumes.plan_volume(_volume("host"), SECRETS, MAPS) is None


def test_missing_objects_and_keys_wait_unless_optional() -> None:
    with pytest.raises(EnvError, match='secret "gone" not found'):
        volumes.plan_volume({"name": "v", "secret": {"secretName": "gone"}}, SECRETS, {})
    optional = {"name": "v", "secret": {"secretName": "gone", "optional": True}}
    assert volumes.plan_volume(optional, SECRETS, {}) == volumes.VolumePlan("v", read_only=True)
    items = [{"key": "nope", "path": "x"}]
    with pytest.raises(EnvError, match="couldn't find key nope"):
        volumes.plan_volume(
            {"name": "v", "secret": {"secretName": "job-s", "items": items}}, SECRETS, {}
        )


@pytest.mark.parametrize("path", ["../escape", "/abs", "a/../../b", ""])
def test_item_paths_cannot_leave_the_volume(path: str) -> None:
    items = [{"key": "token", "path": path}]
    with pytest.raises(EnvError, match="leaves the volume"):
        volumes.plan_volume(
            {"name": "v", "secret": {"secretName": "job-s", "items": items}}, SECRETS, {}
        )


def test_only_mounted_volumes_are_referenced() -> None:
    assert volumes.referenced_objects(POD, CONTAINER) == ({"job-s"}, {"cfg"})
    assert volumes.referenced_objects(POD, {"name": "bare"}) == (set(), set())


def test_mounts_follow_mount_path_read_only_and_sub_path() -> None:
    dirs = {"p": Path("/n/p"), "c": Path("/n/c"), "scratch": Path("/n/s")}
    assert volumes.plan_mounts(CONTAINER, dirs) == [
        volumes.Mount("/n/p", "/var/run/agentchain", True),
        volumes.Mount("/n/c/a.txt", "/etc/cfg/a.txt", False),
        volumes.Mount("/n/s", "/work", False),
    ]


PROBE = """
import os, sys
target = sys.argv[1]
print(open(os.path.join(target, "prompt")).read())
try:
    open(os.path.join(target, "new"), "w")
    print("writable")
except OSError as exc:
    print("refused", exc.errno)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
def test_a_process_sees_its_volume_read_only_and_the_node_does_not(tmp_path: Path) -> None:
    target = tmp_path / "mnt" / "agentchain"
    pod = {"spec": {"volumes": [_volume("p")]}}
    container = {"volumeMounts": [{"name": "p", "mountPath": str(target), "readOnly": True}]}
    mounts = volumes.materialise(pod, container, tmp_path / "vols", SECRETS, MAPS)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(target)],
        preexec_fn=lambda: volumes.enter_mounts(mounts),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == ["$(X) hi", "refused 30"]  # EROFS
    assert target.is_dir() and list(target.iterdir()) == []  # Nothing mounted out here.
    assert (tmp_path / "vols" / "p" / "prompt").read_text() == "$(X) hi"
