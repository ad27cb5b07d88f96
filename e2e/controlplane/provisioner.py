"""A dynamic provisioner of hostPath PersistentVolumes for the local control plane.

Real clusters bind PersistentVolumeClaims through a provisioner (kind: rancher's
local-path-provisioner); the local control plane runs this one, a small stand-in doing
what an external provisioner does and nothing else, so that binding, protection and
reclaiming stay with the real kube-controller-manager:

* at start it makes sure the StorageClass ``agentchain-local`` exists, annotated as the
  cluster's default, so a claim without ``storageClassName`` gets it (the API server's
  DefaultStorageClass admission writes it in) and volume binding is ``Immediate``;
* for each pending claim of that class it creates a directory under its ``--root`` (one
  per claim, mode 0777 like an emptyDir) and a ``hostPath`` PersistentVolume for it:
  capacity = the claim's request, the claim's access modes, ``claimRef`` to the claim
  (with its uid), reclaim policy ``Delete``, annotated ``pv.kubernetes.io/provisioned-by``.
  The PV controller (``persistentvolume-binder-controller``) then binds the two;
* when the PV controller has marked such a volume ``Released`` (its claim is gone), it
  removes the directory and deletes the PersistentVolume (the protection controller then
  lets it go). The PV controller leaves a volume provisioned by an external name to
  that provisioner, exactly as with a CSI driver;
* it records ProvisioningSucceeded / ProvisioningFailed Events on the claim, as
  external provisioners do, so ``kubectl describe pvc`` tells what happened.

Capacity is recorded, not enforced (hostPath has no quota); block volumes and claims of
other classes are left alone. The real node's kubelet mounts a bound claim's hostPath
volume as it would any. Two claims never share a directory.

Two threads list+watch claims and volumes; each event is handled on its own and every
action is idempotent (a PV that already exists, a directory already gone), so a re-list
after a dropped watch, or a provisioner restarted mid-way, only repeats harmless work.
The decisions are pure functions (``wants_volume``, ``volume_for``, ``should_delete``),
unit-tested without a cluster.

    python -m e2e.controlplane.provisioner --kubeconfig KCFG --root DIR
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch import watch as _watch

log = logging.getLogger("provisioner")

CLASS_NAME = "agentchain-local"
PROVISIONER = "agentchain.local/hostpath"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
WATCH_SECONDS = 60
RELIST_BACKOFF_SECONDS = 1.0
Json = Mapping[str, Any]

_iter_lines: Any = _watch.iter_resp_lines  # untyped in the client


# --- decisions (pure) --------------------------------------------------------------------


def storage_class() -> Json:
    """The harness's default StorageClass."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CLASS_NAME, "annotations": {ANN_DEFAULT_CLASS: "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def claim_class(claim: Json) -> str:
    """The claim's class name ("" when none), the beta annotation winning as in the API."""
    meta, spec = claim.get("metadata") or {}, claim.get("spec") or {}
    beta = (meta.get("annotations") or {}).get(ANN_BETA_CLASS)
    return str(beta or spec.get("storageClassName") or "")


def wants_volume(claim: Json) -> bool:
    """A claim of our class, not bound, not being deleted, asking for a filesystem."""
    meta, spec = claim.get("metadata") or {}, claim.get("spec") or {}
    return (
        claim_class(claim) == CLASS_NAME
        and not spec.get("volumeName")
        and not meta.get("deletionTimestamp")
        and (claim.get("status") or {}).get("phase", "Pending") == "Pending"
        and spec.get("volumeMode", "Filesystem") == "Filesystem"
    )


def volume_name(claim: Json) -> str:
    """``pvc-<uid>``, as external provisioners name them: one volume per claim, ever."""
    return f"pvc-{claim['metadata']['uid']}"


def volume_dir(root: Path, claim: Json) -> Path:
    meta = claim["metadata"]
    return root / f"{volume_name(claim)}_{meta['namespace']}_{meta['name']}"


def volume_for(claim: Json, root: Path) -> Json:
    """The hostPath PersistentVolume that satisfies ``claim``, pre-bound to it."""
    meta, spec = claim["metadata"], claim["spec"]
    request = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": volume_name(claim),
            "annotations": {ANN_PROVISIONED_BY: PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": str(request)},
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": CLASS_NAME,
            "volumeMode": "Filesystem",
            "hostPath": {"path": str(volume_dir(root, claim)), "type": "Directory"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }


def ours(volume: Json) -> bool:
    annotations = (volume.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANN_PROVISIONED_BY) == PROVISIONER


def should_delete(volume: Json) -> bool:
    """Ours, released by its claim (the PV controller says so), reclaim policy Delete."""
    spec = volume.get("spec") or {}
    return (
        ours(volume)
        and not (volume.get("metadata") or {}).get("deletionTimestamp")
        and (volume.get("status") or {}).get("phase") == "Released"
        and spec.get("persistentVolumeReclaimPolicy") == "Delete"
    )


def directory_of(volume: Json, root: Path) -> Path | None:
    """The volume's directory when it lies directly under ``root`` (never anything else)."""
    path = ((volume.get("spec") or {}).get("hostPath") or {}).get("path")
    if not path:
        return None
    candidate = Path(os.path.normpath(str(path)))
    return candidate if candidate.parent == root and candidate.name else None


def event_for(claim: Json, kind: str, reason: str, message: str, now: float) -> Json:
    """A core/v1 Event about ``claim`` from this provisioner."""
    meta = claim["metadata"]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        },
        "type": kind,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": PROVISIONER},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


# --- the API --------------------------------------------------------------------------------


def _json(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


class Provisioner:
    """Creates volumes for claims and reclaims released ones; see the module docstring."""

    def __init__(self, kubeconfig: str, root: Path) -> None:
        configuration = client.Configuration()
        load: Any = config.load_kube_config  # untyped in the client
        load(config_file=kubeconfig, client_configuration=configuration)
        api = client.ApiClient(configuration)
        # Any: with `_preload_content=False` the methods take and return raw JSON.
        self.core: Any = client.CoreV1Api(api)
        self.storage: Any = client.StorageV1Api(api)
        self.root = root.resolve()

    def ensure_class(self) -> None:
        try:
            self.storage.create_storage_class(storage_class(), _preload_content=False)
            log.info("created the default StorageClass %s", CLASS_NAME)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def on_claim(self, claim: Json) -> None:
        if not wants_volume(claim):
            return
        directory = volume_dir(self.root, claim)
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o777)
        try:
            self.core.create_persistent_volume(volume_for(claim, self.root), _preload_content=False)
        except ApiException as exc:
            if exc.status == 409:  # Already provisioned (a repeated event or a re-list).
                return
            self._event(claim, "Warning", "ProvisioningFailed", f"creating the volume: {exc}")
            raise
        meta = claim["metadata"]
        log.info("provisioned %s for %s/%s", volume_name(claim), meta["namespace"], meta["name"])
        message = f"Successfully provisioned volume {volume_name(claim)} at {directory}"
        self._event(claim, "Normal", "ProvisioningSucceeded", message)

    def _event(self, claim: Json, kind: str, reason: str, message: str) -> None:
        """An Event on the claim, as external provisioners record (best effort)."""
        meta = claim["metadata"]
        body = event_for(claim, kind, reason, message, time.time())
        try:
            self.core.create_namespaced_event(meta["namespace"], body, _preload_content=False)
        except ApiException:
            log.warning("could not record %s on %s/%s", reason, meta["namespace"], meta["name"])

    def on_volume(self, volume: Json) -> None:
        if not should_delete(volume):
            return
        directory = directory_of(volume, self.root)
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        name = volume["metadata"]["name"]
        try:
            self.core.delete_persistent_volume(name, _preload_content=False)
        except ApiException as exc:
            if exc.status != 404:
                raise
        log.info("reclaimed %s (%s)", name, directory)

    def follow(self, list_call: Callable[..., Any], handle: Callable[[Json], None]) -> None:
        """List, handle every object, then watch and handle every change; forever."""
        while True:
            try:
                listed = _json(list_call(_preload_content=False, _request_timeout=30))
                for item in listed.get("items") or []:
                    self._handle(handle, item)
                version = str(listed["metadata"]["resourceVersion"])
                for kind, obj in self._watch(list_call, version):
                    if kind in ("ADDED", "MODIFIED"):
                        self._handle(handle, obj)
            except Exception as exc:
                log.info("watch ended (%s); listing again", exc)
                time.sleep(RELIST_BACKOFF_SECONDS)

    @staticmethod
    def _handle(handle: Callable[[Json], None], obj: Json) -> None:
        try:
            handle(obj)
        except Exception:
            log.exception("could not handle %s", (obj.get("metadata") or {}).get("name"))

    @staticmethod
    def _watch(list_call: Callable[..., Any], version: str) -> Iterator[tuple[str, Json]]:
        # The watch ends after WATCH_SECONDS; the re-list that follows repairs anything
        # a failed handler left undone.
        response = list_call(
            watch=True,
            resource_version=version,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=(10, WATCH_SECONDS + 30),
        )
        try:
            lines: Iterator[str] = _iter_lines(response)
            for line in lines:
                if line:
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        raise RuntimeError(str(event["object"].get("message")))
                    yield str(event["type"]), event["object"]
        finally:
            response.close()
            response.release_conn()

    def run(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.ensure_class()
        claims = self.core.list_persistent_volume_claim_for_all_namespaces
        threading.Thread(target=self.follow, args=(claims, self.on_claim), daemon=True).start()
        self.follow(self.core.list_persistent_volume, self.on_volume)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.controlplane.provisioner")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--root", required=True, type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    Provisioner(args.kubeconfig, args.root).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
