"""Volumes on the local node (``e2e/controlplane/localnode_volumes.py``), without a cluster.

Aspects covered:
- planning: a Secret's keys as files (base64 decoded, ``defaultMode``), ``items`` (key →
  path, per-item mode), a ConfigMap's, an emptyDir, unsupported types left out; a
  missing object or key waits (EnvError) unless ``optional``; paths cannot leave the
  volume;
- the objects a container's volumes refer to (only those it mounts);
- mounts: ``mountPath``, ``readOnly``, ``subPath``; secret/configMap/projected/downwardAPI
  volumes read-only whatever the mount says, a claim's own ``readOnly``;
- persistentVolumeClaim: mounted from the bound volume's directory, waiting while the
  claim is unbound; which claim/volume pairs count as bound; a subPath cannot escape the
  volume through a symlink;
- covers: the node's directories of other pods' volumes and claims are hidden under an
  empty tmpfs, unless a mount target lies inside; for real (as root) the process sees an
  empty directory there and its own claim at its mount path;
- projected and downwardAPI: secret (``name``), configMap items, fieldRef incl. labels
  and annotations as the kubelet formats them, service-account tokens (waiting until the
  node has one), ``defaultMode``/item modes; the objects and tokens they refer to;
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


CLAIM_POD: dict[str, Any] = {
    "metadata": {
        "name": "p1",
        "namespace": "ns",
        "labels": {"b": "2", "a": 'say "hi"'},
        "annotations": {"note": "x"},
    },
    "spec": {
        "volumes": [
            {"name": "ws", "persistentVolumeClaim": {"claimName": "claim-a"}},
            {"name": "ro", "persistentVolumeClaim": {"claimName": "claim-a", "readOnly": True}},
            {
                "name": "proj",
                "projected": {
                    "defaultMode": 0o440,
                    "sources": [
                        {"secret": {"name": "job-s", "items": [{"key": "token", "path": "t"}]}},
                        {"configMap": {"name": "cfg", "items": [{"key": "a.txt", "path": "a"}]}},
                        {
                            "downwardAPI": {
                                "items": [
                                    {"path": "n", "fieldRef": {"fieldPath": "metadata.name"}},
                                    {"path": "l", "fieldRef": {"fieldPath": "metadata.labels"}},
                                    {
                                        "path": "an",
                                        "fieldRef": {"fieldPath": "metadata.annotations"},
                                        "mode": 0o400,
                                    },
                                ]
                            }
                        },
                        {"serviceAccountToken": {"path": "sa/token", "audience": "git"}},
                    ],
                },
            },
            {"name": "down", "downwardAPI": {"items": [
                {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
        ]
    },
}  # fmt: skip
CLAIM_CONTAINER: dict[str, Any] = {
    "volumeMounts": [
        {"name": "ws", "mountPath": "/workspace", "subPath": "repo"},
        {"name": "ro", "mountPath": "/ro"},
        {"name": "proj", "mountPath": "/proj"},
        {"name": "down", "mountPath": "/down"},
    ]
}
CONTEXT = volumes.Context(
    pod=CLAIM_POD, claims={"claim-a": "/vols/pvc-1"}, tokens={("git", 3600): "jwt"}
)


def _claim_volume(name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(v for v in CLAIM_POD["spec"]["volumes"] if v["name"] == name)
    return found


def test_a_bound_claim_is_its_volume_directory_and_an_unbound_one_waits() -> None:
    plan = volumes.plan_volume(_claim_volume("ws"), {}, {}, CONTEXT)
    assert plan == volumes.VolumePlan("ws", host_path="/vols/pvc-1")
    ro = volumes.plan_volume(_claim_volume("ro"), {}, {}, CONTEXT)
    assert ro == volumes.VolumePlan("ro", read_only=True, host_path="/vols/pvc-1")
    with pytest.raises(EnvError, match='persistentvolumeclaim "claim-a" is not bound'):
        volumes.plan_volume(_claim_volume("ws"), {}, {}, volumes.Context(pod=CLAIM_POD))


def test_a_projected_volume_gathers_its_sources_read_only() -> None:
    plan = volumes.plan_volume(_claim_volume("proj"), SECRETS, MAPS, CONTEXT)
    assert plan == volumes.VolumePlan(
        "proj",
        {
            "t": (b"tok", 0o440),
            "a": (b"A", 0o440),
            "n": (b"p1", 0o440),
            "l": (b'a="say \\"hi\\""\nb="2"', 0o440),
            "an": (b'note="x"', 0o400),
            "sa/token": (b"jwt", 0o440),
        },
        read_only=True,
    )
    down = volumes.plan_volume(_claim_volume("down"), {}, {}, CONTEXT)
    assert down == volumes.VolumePlan("down", {"ns": (b"ns", 0o644)}, read_only=True)


def test_a_projected_volume_waits_for_its_objects_and_token() -> None:
    with pytest.raises(EnvError, match='secret "job-s" not found'):
        volumes.plan_volume(_claim_volume("proj"), {}, MAPS, CONTEXT)
    with pytest.raises(EnvError, match="no service account token for audience 'git'"):
        volumes.plan_volume(_claim_volume("proj"), SECRETS, MAPS, volumes.Context(pod=CLAIM_POD))


def test_unsupported_downward_api_fields_are_refused_clearly() -> None:
    resource = {"name": "d", "downwardAPI": {"items": [
        {"path": "cpu", "resourceFieldRef": {"resource": "limits.cpu"}}]}}  # fmt: skip
    with pytest.raises(EnvError, match="only fieldRef is supported"):
        volumes.plan_volume(resource, {}, {}, CONTEXT)


def test_what_projected_and_claim_volumes_refer_to() -> None:
    assert volumes.referenced_objects(CLAIM_POD, CLAIM_CONTAINER) == ({"job-s"}, {"cfg"})
    assert volumes.referenced_claims(CLAIM_POD, CLAIM_CONTAINER) == {"claim-a"}
    assert volumes.referenced_tokens(CLAIM_POD, CLAIM_CONTAINER) == {("git", 3600)}
    assert volumes.referenced_claims(CLAIM_POD, {"volumeMounts": []}) == set()


def test_forced_read_only_volumes_and_their_directories() -> None:
    dirs = {"ws": Path("/vols/pvc-1"), "ro": Path("/vols/pvc-1"), "proj": Path("/n/proj")}
    mounts = volumes.plan_mounts(CLAIM_CONTAINER, dirs, read_only={"ro", "proj"})
    assert mounts == [
        volumes.Mount("/vols/pvc-1/repo", "/workspace", False),
        volumes.Mount("/vols/pvc-1", "/ro", True),
        volumes.Mount("/n/proj", "/proj", True),
    ]
    assert mounts[0].volume == "/vols/pvc-1"


def _pv(name: str = "pvc-1", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec or {"hostPath": {"path": "/vols/pvc-1"}}}


def test_bound_directory_needs_a_bound_claim_and_its_own_volume() -> None:
    claim = {"spec": {"volumeName": "pvc-1"}, "status": {"phase": "Bound"}}
    assert volumes.bound_directory(claim, _pv()) == "/vols/pvc-1"
    assert volumes.bound_directory(claim, _pv(local={"path": "/l"})) == "/l"
    assert volumes.bound_directory(claim, _pv(nfs={"path": "/x"})) is None
    assert volumes.bound_directory(claim, _pv("pvc-2")) is None
    assert volumes.bound_directory({**claim, "status": {"phase": "Pending"}}, _pv()) is None
    assert volumes.bound_directory(None, _pv()) is None
    assert volumes.bound_directory(claim, None) is None


def test_a_claim_volume_is_mounted_in_place_and_a_sub_path_cannot_escape(tmp_path: Path) -> None:
    claim_dir = tmp_path / "pvc-1"
    claim_dir.mkdir()
    (claim_dir / "out").symlink_to("/etc")
    context = volumes.Context(pod=CLAIM_POD, claims={"claim-a": str(claim_dir)})
    pod = {"spec": {"volumes": [_claim_volume("ws")]}}
    target = tmp_path / "mnt" / "ws"
    mount = {"name": "ws", "mountPath": str(target), "subPath": "repo"}
    made = volumes.materialise(pod, {"volumeMounts": [mount]}, tmp_path / "v", {}, {}, context)
    assert made == [volumes.Mount(str(claim_dir / "repo"), str(target), False)]
    assert (claim_dir / "repo").is_dir() and target.is_dir()
    assert not (tmp_path / "v").exists()  # Nothing written for a claim.

    escaping = {**mount, "subPath": "out"}
    with pytest.raises(EnvError, match="leads out of its volume"):
        volumes.materialise(pod, {"volumeMounts": [escaping]}, tmp_path / "v", {}, {}, context)
    gone = volumes.Context(pod=CLAIM_POD, claims={"claim-a": str(tmp_path / "missing")})
    with pytest.raises(EnvError, match="is missing"):
        volumes.materialise(pod, {"volumeMounts": [mount]}, tmp_path / "v", {}, {}, gone)


PVC_PROBE = """
import os, sys
for target in sys.argv[1:]:
    try:
        with open(os.path.join(target, "new"), "w") as f:
            f.write("x")
        print("wrote", target)
    except OSError as exc:
        print("refused", exc.errno)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
def test_a_claim_volume_read_only_through_the_volume_refuses_writes(tmp_path: Path) -> None:
    claim_dir = tmp_path / "pvc-1"
    claim_dir.mkdir()
    context = volumes.Context(pod=CLAIM_POD, claims={"claim-a": str(claim_dir)})
    pod = {"spec": {"volumes": [_claim_volume("ws"), _claim_volume("ro")]}}
    rw, ro = tmp_path / "mnt" / "rw", tmp_path / "mnt" / "ro"
    container = {
        "volumeMounts": [
            {"name": "ws", "mountPath": str(rw)},
            {"name": "ro", "mountPath": str(ro)},
        ]
    }
    mounts = volumes.materialise(pod, container, tmp_path / "v", {}, {}, context)
    done = subprocess.run(
        [sys.executable, "-c", PVC_PROBE, str(ro), str(rw)],
        preexec_fn=lambda: volumes.enter_mounts(mounts),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == ["refused 30", f"wrote {rw}"]  # EROFS, then written
    assert (claim_dir / "new").read_text() == "x"  # Straight into the claim's directory.


def test_covers_hide_other_volumes_but_never_a_mount_target() -> None:
    mounts = [volumes.Mount("/vols/pvc-1", "/workspace", False)]
    covers = volumes.plan_covers(mounts, ["/state/pods", "/vols/", "/vols"])
    assert covers == [
        volumes.Mount("/state/pods", "/state/pods", True, cover=True),
        volumes.Mount("/vols", "/vols", True, cover=True),
    ]
    inside = [volumes.Mount("/vols/pvc-1", "/vols/mnt", False)]
    assert volumes.plan_covers(inside, ["/vols", "/vol"]) == [
        volumes.Mount("/vol", "/vol", True, cover=True)
    ]
    assert volumes.describe(mounts + covers) == "/workspace"


COVER_PROBE = """
import os, sys
print(sorted(os.listdir(sys.argv[1])), sorted(os.listdir(sys.argv[2])))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
def test_a_process_sees_its_claim_but_not_the_other_claims(tmp_path: Path) -> None:
    root = tmp_path / "vols"
    for name in ("pvc-1", "pvc-2"):
        (root / name).mkdir(parents=True)
        (root / name / f"{name}.txt").write_text(name)
    context = volumes.Context(pod=CLAIM_POD, claims={"claim-a": str(root / "pvc-1")})
    pod = {"spec": {"volumes": [_claim_volume("ws")]}}
    target = tmp_path / "mnt" / "ws"
    container = {"volumeMounts": [{"name": "ws", "mountPath": str(target)}]}
    pods_dir = tmp_path / "pods"
    hide = [pods_dir, root]
    mounts = volumes.materialise(pod, container, pods_dir / "p1", {}, {}, context, hide)
    assert [m.target for m in mounts if m.cover] == [str(pods_dir), str(root)]
    done = subprocess.run(
        [sys.executable, "-c", COVER_PROBE, str(target), str(root)],
        preexec_fn=lambda: volumes.enter_mounts(mounts),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "['pvc-1.txt'] []\n"
    assert sorted(p.name for p in root.iterdir()) == ["pvc-1", "pvc-2"]  # The node's view.
