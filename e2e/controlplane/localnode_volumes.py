"""Pod volumes on the local node: `secret`, `configMap` and `emptyDir`, really mounted.

A container process sees a volume at its `mountPath` and nowhere else, as in a real
container: the node writes each volume's files under the pod's own directory, and the
process starts in a mount namespace of its own (`unshare(CLONE_NEWNS)`, propagation
private, so nothing leaks back to the node) with each volume bind-mounted at its
`mountPath`, read-only when `readOnly` says so. `items` (key → path, per-item mode),
`defaultMode`, `optional` and a mount's `subPath` are honoured. Other volume types
are not mounted (the process sees nothing there), as before volumes were supported.

Mount points that do not exist on the node are created there (an empty directory, or
an empty file for a `subPath` file): the one trace a pod leaves outside its directory.

The planning is pure (`plan_volume`, `plan_mounts`); `materialise` writes the files and
mount points, and `enter_mounts` runs in the child between fork and exec.
"""

from __future__ import annotations

import base64
import binascii
import ctypes
import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.controlplane.localnode_env import EnvError

Json = Mapping[str, Any]
ObjectData = Mapping[str, Mapping[str, str]]

CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
DEFAULT_MODE = 0o644

_LIBC = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class VolumePlan:
    """What one volume holds: files (relative path → bytes, mode), or an empty dir."""

    name: str
    files: Mapping[str, tuple[bytes, int]] = field(default_factory=dict)
    keep: bool = False
    """emptyDir: created once, kept across container restarts, never rewritten."""


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool


# --- planning (pure) -------------------------------------------------------------------------


def _source(volume: Json) -> tuple[str, Json] | None:
    """("secret"|"configmap"|"emptydir", its spec), or None for types not supported."""
    if "secret" in volume:
        return "secret", volume["secret"] or {}
    if "configMap" in volume:
        return "configmap", volume["configMap"] or {}
    if "emptyDir" in volume:
        return "emptydir", volume["emptyDir"] or {}
    return None


def _object_name(kind: str, spec: Json) -> str:
    return str(spec.get("secretName" if kind == "secret" else "name", ""))


def referenced_objects(pod: Json, container: Json) -> tuple[set[str], set[str]]:
    """Secrets and ConfigMaps behind the volumes ``container`` mounts."""
    secrets: set[str] = set()
    config_maps: set[str] = set()
    for volume in mounted_volumes(pod, container):
        source = _source(volume)
        if source is not None and source[0] != "emptydir":
            target = secrets if source[0] == "secret" else config_maps
            target.add(_object_name(*source))
    return secrets, config_maps


def mounted_volumes(pod: Json, container: Json) -> list[Json]:
    names = {str(m.get("name")) for m in container.get("volumeMounts") or []}
    return [v for v in pod["spec"].get("volumes") or [] if v.get("name") in names]


def _decoded(kind: str, data: Json) -> dict[str, bytes]:
    """A Secret's data is base64 (as the API returns it), a ConfigMap's plain text."""
    if kind != "secret":
        return {k: str(v).encode() for k, v in data.items()}
    try:
        return {k: base64.b64decode(v, validate=True) for k, v in data.items()}
    except (binascii.Error, ValueError) as exc:
        raise EnvError(f"secret data is not valid base64: {exc}") from exc


def _relative(path: str) -> str:
    clean = posixpath.normpath(path)
    if not path or clean == ".." or clean.startswith("../") or posixpath.isabs(clean):
        raise EnvError(f"volume path {path!r} leaves the volume")
    return clean


def plan_volume(volume: Json, secrets: ObjectData, config_maps: ObjectData) -> VolumePlan | None:
    """The files of one volume; EnvError while a required object or key is missing."""
    source = _source(volume)
    name = str(volume["name"])
    if source is None:
        return None
    kind, spec = source
    if kind == "emptydir":
        return VolumePlan(name, keep=True)
    obj_name = _object_name(kind, spec)
    store = secrets if kind == "secret" else config_maps
    if obj_name not in store:
        if spec.get("optional"):
            return VolumePlan(name)
        raise EnvError(f'{kind} "{obj_name}" not found (volume {name})')
    data = _decoded(kind, store[obj_name])
    mode = int(spec.get("defaultMode", DEFAULT_MODE))
    items = spec.get("items")
    if items is None:
        return VolumePlan(name, {key: (value, mode) for key, value in data.items()})
    files: dict[str, tuple[bytes, int]] = {}
    for item in items:
        key = str(item["key"])
        if key not in data:
            if spec.get("optional"):
                continue
            raise EnvError(f'couldn\'t find key {key} in {kind} "{obj_name}" (volume {name})')
        files[_relative(str(item["path"]))] = (data[key], int(item.get("mode", mode)))
    return VolumePlan(name, files)


def plan_mounts(container: Json, volume_dirs: Mapping[str, Path]) -> list[Mount]:
    """Bind mounts for the container's volumeMounts of the volumes that exist here."""
    mounts = []
    for mount in container.get("volumeMounts") or []:
        directory = volume_dirs.get(str(mount.get("name")))
        if directory is None:
            continue
        sub = str(mount.get("subPath") or "")
        source = directory / _relative(sub) if sub else directory
        target = posixpath.normpath(str(mount["mountPath"]))
        mounts.append(Mount(str(source), target, bool(mount.get("readOnly"))))
    return mounts


# --- the node side: files and mount points ---------------------------------------------------


def _write(directory: Path, plan: VolumePlan) -> None:
    if plan.keep:
        directory.mkdir(parents=True, exist_ok=True)
        return
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o755)
    for rel, (content, mode) in plan.files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(content)
        os.chmod(temporary, mode)
        os.replace(temporary, path)  # A running container never sees half a file.


def _mount_point(mount: Mount) -> None:
    target = Path(mount.target)
    if Path(mount.source).is_dir():
        target.mkdir(parents=True, exist_ok=True)
    elif not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()


def materialise(
    pod: Json, container: Json, root: Path, secrets: ObjectData, config_maps: ObjectData
) -> list[Mount]:
    """Write the container's volumes under ``root``; the mounts to make for it.

    EnvError (the container waits and the node retries) while an object is missing
    or the node cannot write a file or mount point."""
    try:
        return _materialise(pod, container, root, secrets, config_maps)
    except OSError as exc:
        raise EnvError(f"setting up volumes failed: {exc}") from exc


def _materialise(
    pod: Json, container: Json, root: Path, secrets: ObjectData, config_maps: ObjectData
) -> list[Mount]:
    dirs: dict[str, Path] = {}
    for volume in mounted_volumes(pod, container):
        plan = plan_volume(volume, secrets, config_maps)
        if plan is not None:
            dirs[plan.name] = root / plan.name
            _write(dirs[plan.name], plan)
    mounts = plan_mounts(container, dirs)
    for mount in mounts:
        # A missing subPath becomes a directory, as the kubelet makes it.
        if not Path(mount.source).exists():
            Path(mount.source).mkdir(parents=True)
        _mount_point(mount)
    return mounts


# --- the child side: between fork and exec ----------------------------------------------------


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, flags: int) -> None:
    src = source.encode() if source is not None else None
    _check(_LIBC.mount(src, target.encode(), None, flags, None), f"mount {target}")


def enter_mounts(mounts: Sequence[Mount]) -> None:
    """In the forked child: a private mount namespace with ``mounts`` bound in it."""
    _check(_LIBC.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(None, "/", MS_REC | MS_PRIVATE)
    for mount in mounts:
        _mount(mount.source, mount.target, MS_BIND | MS_REC)
        if mount.read_only:
            _mount(None, mount.target, MS_REMOUNT | MS_BIND | MS_RDONLY)


def describe(mounts: Iterable[Mount]) -> str:
    return ", ".join(f"{m.target}{' (ro)' if m.read_only else ''}" for m in mounts)
