"""The harness's hostPath provisioner (``e2e/controlplane/provisioner.py``): its decisions.

Aspects covered:
- the StorageClass: default, Immediate binding, reclaim Delete, our provisioner name;
- which claims get a volume: our class (by field or beta annotation) only, unbound,
  pending, not being deleted, filesystem mode;
- the volume made for a claim: name from the uid, capacity = request, access modes,
  claimRef with the uid, a directory of its own under the root (distinct per claim);
- which volumes are reclaimed: ours, Released, policy Delete, not already deleting; and
  the directory removed is only ever one directly under the root;
- the Event recorded on a claim.
The watch loop and the API calls run in the e2e tests (e2e/test_volumes.py, and every
workspace's claim in e2e/test_workspaces.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e.controlplane import provisioner as prov
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path("/work/volumes")


def _claim(name: str = "ws", uid: str = "u1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {
            "storageClassName": prov.CLASS_NAME,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "2Gi"}},
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def test_the_storage_class_is_the_default_one_binding_at_once() -> None:
    cls = prov.storage_class()
    assert cls["metadata"]["annotations"] == {prov.ANN_DEFAULT_CLASS: "true"}
    assert (cls["provisioner"], cls["volumeBindingMode"], cls["reclaimPolicy"]) == (
        prov.PROVISIONER,
        "Immediate",
        "Delete",
    )


def test_a_pending_claim_of_our_class_wants_a_volume() -> None:
    assert prov.wants_volume(_claim())
    beta = _claim(storageClassName=None)
    beta["metadata"]["annotations"] = {prov.ANN_BETA_CLASS: prov.CLASS_NAME}
    assert prov.wants_volume(beta)


@pytest.mark.parametrize(
    "change",
    [
        {"spec": {"storageClassName": "other"}},
        {"spec": {"storageClassName": None}},
        {"spec": {"volumeName": "pvc-x"}},
        {"status": {"phase": "Bound"}},
        {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}},
        {"spec": {"volumeMode": "Block"}},
    ],
)
def test_other_claims_are_left_alone(change: dict[str, dict[str, Any]]) -> None:
    claim = _claim()
    for part, values in change.items():
        claim[part].update(values)
    assert not prov.wants_volume(claim)


def test_the_volume_is_pre_bound_to_the_claim_with_its_request() -> None:
    claim = _claim(accessModes=["ReadWriteOnce", "ReadOnlyMany"])
    volume = prov.volume_for(claim, ROOT)
    assert volume["metadata"] == {
        "name": "pvc-u1",
        "annotations": {prov.ANN_PROVISIONED_BY: prov.PROVISIONER},
    }
    spec = volume["spec"]
    assert spec["capacity"] == {"storage": "2Gi"}
    assert spec["accessModes"] == ["ReadWriteOnce", "ReadOnlyMany"]
    assert spec["storageClassName"] == prov.CLASS_NAME
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert spec["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "ws",
        "uid": "u1",
    }
    assert spec["hostPath"] == {"path": "/work/volumes/pvc-u1_ns_ws", "type": "Directory"}
    assert prov.directory_of(volume, ROOT) == ROOT / "pvc-u1_ns_ws"


@given(st.lists(st.uuids(), min_size=2, max_size=8, unique=True))
def test_every_claim_gets_a_directory_of_its_own(uids: list[Any]) -> None:
    # The same name in the same namespace, re-created: still distinct directories.
    paths = {prov.volume_for(_claim(uid=str(u)), ROOT)["spec"]["hostPath"]["path"] for u in uids}
    assert len(paths) == len(uids)


def _volume(phase: str = "Released", **changes: Any) -> dict[str, Any]:
    volume: dict[str, Any] = dict(prov.volume_for(_claim(), ROOT))
    volume["status"] = {"phase": phase}
    volume.update(changes)
    return volume


def test_a_released_volume_of_ours_is_reclaimed() -> None:
    assert prov.should_delete(_volume())
    assert not prov.should_delete(_volume("Bound"))
    assert not prov.should_delete(_volume(metadata={"name": "pv", "annotations": {}}))
    deleting = _volume()
    deleting["metadata"] = {**deleting["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
    assert not prov.should_delete(deleting)
    retained = _volume()
    retained["spec"] = {**retained["spec"], "persistentVolumeReclaimPolicy": "Retain"}
    assert not prov.should_delete(retained)


@pytest.mark.parametrize(
    "path", ["/work/volumes", "/work/volumes/../etc", "/etc", "/work/volumes/a/b", ""]
)
def test_only_a_directory_directly_under_the_root_is_ever_removed(path: str) -> None:
    volume = _volume(spec={"hostPath": {"path": path}})
    assert prov.directory_of(volume, ROOT) is None


def test_the_event_names_the_claim_and_the_provisioner() -> None:
    event = prov.event_for(_claim(), "Normal", "ProvisioningSucceeded", "m" * 5000, 0.0)
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "ws",
        "uid": "u1",
    }
    assert event["metadata"] == {"generateName": "ws.", "namespace": "ns"}
    assert (event["type"], event["reason"], event["source"]) == (
        "Normal",
        "ProvisioningSucceeded",
        {"component": prov.PROVISIONER},
    )
    assert len(event["message"]) == 1024 and event["firstTimestamp"] == "1970-01-01T00:00:00Z"
