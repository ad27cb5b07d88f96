"""Pod volumes on the local node, really mounted: `secret`, `configMap`, `emptyDir`,
`persistentVolumeClaim`, `projected` and `downwardAPI`.

A container process sees a volume at its `mountPath` and nowhere else, as in a real
container: the node writes each volume's files under the pod's own directory, and the
process starts in a mount namespace of its own (`unshare(CLONE_NEWNS)`, propagation
private, so nothing leaks back to the node) with each volume bind-mounted at its
`mountPath`. `items` (key → path, per-item mode), `defaultMode`, `optional` and a mount's
`subPath` are honoured. Other volume types (hostPath, ephemeral, …) are not mounted: the
process sees nothing there.

* `persistentVolumeClaim`: the node resolves claim → bound PersistentVolume → its
  `hostPath` (or `local`) directory, made by the harness's provisioner
  (`provisioner.py`), and bind-mounts that directory itself, so what one pod writes the
  next pod of the claim sees. A claim not bound yet keeps the container waiting (the
  scheduler does not place such a pod anyway). A `subPath` must stay inside the volume
  after symlinks are resolved: a pod cannot plant a link that escapes for the next one.
* `projected`: its `secret`, `configMap`, `downwardAPI` (`fieldRef`: metadata.name,
  namespace, uid, labels, annotations, the env's other fields) and `serviceAccountToken`
  sources in one directory; the node asks the TokenRequest API for each token when the
  container starts and does not refresh it (pods here live minutes, tokens an hour). So
  the service-account volume the API server adds to pods (`kube-api-access-…`) is there
  too. `downwardAPI` volumes take the same items.
* Read-only is real: `readOnly` mounts (and a claim's `readOnly`) are remounted
  read-only in the container's namespace, so a write fails with EROFS; `secret`,
  `configMap`, `downwardAPI` and `projected` volumes are always read-only, as the kubelet
  mounts them.
* Other pods' volumes are out of sight: the node's directory of pod volumes (Secrets'
  files) and the provisioner's directory of claims' volumes (`--hide`) are covered with
  an empty read-only tmpfs in the container's namespace, after its own volumes are bound
  (`plan_covers`).
  Best effort, not a sandbox: the process runs as the node's user (root) on the node's
  filesystem and could unmount the cover; it keeps honest workloads, and tests, from
  seeing another pod's workspace or secrets through the node's paths.

Mount points that do not exist on the node are created there (an empty directory, or
an empty file for a `subPath` file): the one trace a pod leaves outside its directory.

The planning is pure (`plan_volume`, `plan_mounts`, `plan_covers`, `bound_directory`);
`materialise` writes the files and mount points, and `enter_mounts` runs in the child
between fork and exec.
"""

from __future__ import annotations

import base64
import binascii
import ctypes
import json
import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.controlplane.localnode_env import EnvError, field_value

Json = Mapping[str, Any]
ObjectData = Mapping[str, Mapping[str, str]]

CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
DEFAULT_MODE = 0o644

_LIBC = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class VolumePlan:
    """What one volume holds: files (relative path → bytes, mode), an empty dir, or a
    directory of the node (a claim's volume)."""

    name: str
    files: Mapping[str, tuple[bytes, int]] = field(default_factory=dict)
    keep: bool = False
    """emptyDir: created once, kept across container restarts, never rewritten."""
    read_only: bool = False
    """Every mount of it is read-only, whatever the volumeMount says."""
    host_path: str | None = None
    """A bound claim's directory: mounted as it is, never written by the node."""


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool
    volume: str = field(default="", compare=False)
    """The volume's directory: a subPath must resolve inside it."""
    cover: bool = False
    """Not a volume: an empty read-only tmpfs over ``target`` (a directory of the node
    the container must not see), made after the volumes are bound."""


TokenKey = tuple[str, int]
"""A projected service-account token: (audience, "" for the API server's; expirationSeconds)."""


@dataclass(frozen=True)
class Context:
    """What volumes need beyond Secrets and ConfigMaps, fetched by the node beforehand."""

    pod: Json = field(default_factory=dict)
    claims: Mapping[str, str] = field(default_factory=dict)
    """Claim name → its bound volume's directory (claims not bound are absent)."""
    tokens: Mapping[TokenKey, str] = field(default_factory=dict)


NO_CONTEXT = Context()

# The kubelet mounts these read-only whatever the volumeMount says.
_ALWAYS_READ_ONLY = ("secret", "configmap", "downwardapi", "projected")
_KINDS = {
    "secret": "secret",
    "configMap": "configmap",
    "emptyDir": "emptydir",
    "persistentVolumeClaim": "claim",
    "projected": "projected",
    "downwardAPI": "downwardapi",
}


# --- planning (pure) -------------------------------------------------------------------------


def _source(volume: Json) -> tuple[str, Json] | None:
    """(kind, its spec), or None for volume types not supported."""
    for key, kind in _KINDS.items():
        if key in volume:
            return kind, volume[key] or {}
    return None


def _object_name(kind: str, spec: Json) -> str:
    return str(spec.get("secretName" if kind == "secret" else "name", ""))


def _projections(volume: Json) -> list[tuple[str, Json]]:
    """The (kind, spec) of every source of a volume: its own, or a projected one's."""
    source = _source(volume)
    if source is None:
        return []
    if source[0] != "projected":
        return [source]
    found: list[tuple[str, Json]] = []
    for item in source[1].get("sources") or []:
        for key in ("secret", "configMap", "downwardAPI", "serviceAccountToken"):
            if key in item:
                # A projected secret names its object `name`, a secret volume `secretName`.
                spec = dict(item[key] or {})
                if key == "secret":
                    spec["secretName"] = spec.get("name", "")
                found.append((_KINDS.get(key, "token"), spec))
    return found


def referenced_objects(pod: Json, container: Json) -> tuple[set[str], set[str]]:
    """Secrets and ConfigMaps behind the volumes ``container`` mounts."""
    secrets: set[str] = set()
    config_maps: set[str] = set()
    for volume in mounted_volumes(pod, container):
        for kind, spec in _projections(volume):
            if kind in ("secret", "configmap"):
                target = secrets if kind == "secret" else config_maps
                target.add(_object_name(kind, spec))
    return secrets, config_maps


def referenced_claims(pod: Json, container: Json) -> set[str]:
    """PersistentVolumeClaims behind the volumes ``container`` mounts."""
    return {
        str(spec.get("claimName", ""))
        for volume in mounted_volumes(pod, container)
        for kind, spec in _projections(volume)
        if kind == "claim"
    }


def token_key(spec: Json) -> TokenKey:
    return str(spec.get("audience") or ""), int(spec.get("expirationSeconds") or 3600)


def referenced_tokens(pod: Json, container: Json) -> set[TokenKey]:
    """Service-account tokens the projected volumes ``container`` mounts hold."""
    return {
        token_key(spec)
        for volume in mounted_volumes(pod, container)
        for kind, spec in _projections(volume)
        if kind == "token"
    }


def bound_directory(claim: Json | None, volume: Json | None) -> str | None:
    """The directory of the volume bound to ``claim``; None while unbound or not a
    hostPath/local volume (nothing the node can mount)."""
    if claim is None or volume is None:
        return None
    bound = (claim.get("status") or {}).get("phase") == "Bound"
    name = (claim.get("spec") or {}).get("volumeName")
    if not bound or name != (volume.get("metadata") or {}).get("name"):
        return None
    spec = volume.get("spec") or {}
    path = (spec.get("hostPath") or spec.get("local") or {}).get("path")
    return str(path) if path else None


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


def _object_files(
    kind: str, spec: Json, mode: int, name: str, secrets: ObjectData, config_maps: ObjectData
) -> dict[str, tuple[bytes, int]]:
    """The files of a Secret or ConfigMap (whole, or its ``items``)."""
    obj_name = _object_name(kind, spec)
    store = secrets if kind == "secret" else config_maps
    if obj_name not in store:
        if spec.get("optional"):
            return {}
        raise EnvError(f'{kind} "{obj_name}" not found (volume {name})')
    data = _decoded(kind, store[obj_name])
    items = spec.get("items")
    if items is None:
        return {key: (value, mode) for key, value in data.items()}
    files: dict[str, tuple[bytes, int]] = {}
    for item in items:
        key = str(item["key"])
        if key not in data:
            if spec.get("optional"):
                continue
            raise EnvError(f'couldn\'t find key {key} in {kind} "{obj_name}" (volume {name})')
        files[_relative(str(item["path"]))] = (data[key], int(item.get("mode", mode)))
    return files


def _format_map(values: Json) -> str:
    """Labels or annotations as the kubelet writes them: sorted ``key="value"`` lines."""
    lines = (f"{key}={json.dumps(str(values[key]), ensure_ascii=False)}" for key in sorted(values))
    return "\n".join(lines)


def _downward_files(spec: Json, mode: int, pod: Json) -> dict[str, tuple[bytes, int]]:
    files: dict[str, tuple[bytes, int]] = {}
    meta = pod.get("metadata") or {}
    for item in spec.get("items") or []:
        path = str((item.get("fieldRef") or {}).get("fieldPath", ""))
        if "fieldRef" not in item:
            raise EnvError(f"downwardAPI item {item.get('path')!r}: only fieldRef is supported")
        if path in ("metadata.labels", "metadata.annotations"):
            value = _format_map(meta.get(path.split(".")[1]) or {})
        else:
            value = field_value(pod, path)
        files[_relative(str(item["path"]))] = (value.encode(), int(item.get("mode", mode)))
    return files


def _token_file(spec: Json, mode: int, context: Context, name: str) -> dict[str, tuple[bytes, int]]:
    key = token_key(spec)
    if key not in context.tokens:
        raise EnvError(f"no service account token for audience {key[0]!r} yet (volume {name})")
    return {_relative(str(spec.get("path", ""))): (context.tokens[key].encode(), mode)}


def _files(
    kind: str, spec: Json, mode: int, name: str,
    secrets: ObjectData, config_maps: ObjectData, context: Context,
) -> dict[str, tuple[bytes, int]]:  # fmt: skip
    if kind in ("secret", "configmap"):
        return _object_files(kind, spec, mode, name, secrets, config_maps)
    if kind == "downwardapi":
        return _downward_files(spec, mode, context.pod)
    return _token_file(spec, mode, context, name)


def plan_volume(
    volume: Json, secrets: ObjectData, config_maps: ObjectData, context: Context = NO_CONTEXT
) -> VolumePlan | None:
    """The files of one volume; EnvError while a required object or key is missing, or
    a claim is not bound yet."""
    source = _source(volume)
    name = str(volume["name"])
    if source is None:
        return None
    kind, spec = source
    if kind == "emptydir":
        return VolumePlan(name, keep=True)
    if kind == "claim":
        claim = str(spec.get("claimName", ""))
        if claim not in context.claims:
            raise EnvError(
                f'persistentvolumeclaim "{claim}" is not bound to a hostPath or local volume'
                f" (volume {name})"
            )
        read_only = bool(spec.get("readOnly"))
        return VolumePlan(name, read_only=read_only, host_path=context.claims[claim])
    mode = int(spec.get("defaultMode", DEFAULT_MODE))
    files: dict[str, tuple[bytes, int]] = {}
    for part_kind, part in _projections(volume):
        files.update(_files(part_kind, part, mode, name, secrets, config_maps, context))
    return VolumePlan(name, files, read_only=kind in _ALWAYS_READ_ONLY)


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def plan_covers(mounts: Sequence[Mount], hide: Iterable[str]) -> list[Mount]:
    """Covers for the node's directories of other pods' volumes (``hide``), except one
    holding a mount target of this container (covering it would hide the volume)."""
    targets = [m.target for m in mounts]
    return [
        Mount(directory, directory, True, cover=True)
        for directory in sorted({posixpath.normpath(h) for h in hide})
        if not any(_within(target, directory) for target in targets)
    ]


def plan_mounts(
    container: Json, volume_dirs: Mapping[str, Path], read_only: Iterable[str] = ()
) -> list[Mount]:
    """Bind mounts for the container's volumeMounts of the volumes that exist here;
    ``read_only`` names the volumes mounted read-only whatever the mount says."""
    forced = set(read_only)
    mounts = []
    for mount in container.get("volumeMounts") or []:
        name = str(mount.get("name"))
        directory = volume_dirs.get(name)
        if directory is None:
            continue
        sub = str(mount.get("subPath") or "")
        source = directory / _relative(sub) if sub else directory
        target = posixpath.normpath(str(mount["mountPath"]))
        ro = bool(mount.get("readOnly")) or name in forced
        mounts.append(Mount(str(source), target, ro, str(directory)))
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
    pod: Json,
    container: Json,
    root: Path,
    secrets: ObjectData,
    config_maps: ObjectData,
    context: Context = NO_CONTEXT,
    hide: Iterable[Path] = (),
) -> list[Mount]:
    """Write the container's volumes under ``root``; the mounts to make for it, then
    covers over ``hide``.

    EnvError (the container waits and the node retries) while an object is missing,
    a claim is unbound, or the node cannot write a file or mount point."""
    try:
        mounts = _materialise(pod, container, root, secrets, config_maps, context)
    except OSError as exc:
        raise EnvError(f"setting up volumes failed: {exc}") from exc
    return mounts + plan_covers(mounts, [str(path) for path in hide])


def _materialise(
    pod: Json,
    container: Json,
    root: Path,
    secrets: ObjectData,
    config_maps: ObjectData,
    context: Context,
) -> list[Mount]:
    dirs: dict[str, Path] = {}
    read_only: set[str] = set()
    for volume in mounted_volumes(pod, container):
        plan = plan_volume(volume, secrets, config_maps, context)
        if plan is None:
            continue
        if plan.read_only:
            read_only.add(plan.name)
        if plan.host_path is not None:
            dirs[plan.name] = Path(plan.host_path)
            if not dirs[plan.name].is_dir():
                raise EnvError(f"volume {plan.name}: directory {plan.host_path} is missing")
        else:
            dirs[plan.name] = root / plan.name
            _write(dirs[plan.name], plan)
    mounts = plan_mounts(container, dirs, read_only)
    for mount in mounts:
        # A missing subPath becomes a directory, as the kubelet makes it.
        if not Path(mount.source).exists():
            Path(mount.source).mkdir(parents=True)
        _inside(mount)
        _mount_point(mount)
    return mounts


def _inside(mount: Mount) -> None:
    """A subPath must not lead out of its volume through a symlink an earlier pod left
    in a shared volume (the kubelet refuses those too)."""
    real, volume = os.path.realpath(mount.source), os.path.realpath(mount.volume)
    if real != volume and not real.startswith(volume + os.sep):
        raise EnvError(f"subPath of {mount.target} leads out of its volume ({real})")


# --- the child side: between fork and exec ----------------------------------------------------


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, flags: int, fstype: bytes | None = None) -> None:
    src = source.encode() if source is not None else None
    _check(_LIBC.mount(src, target.encode(), fstype, flags, None), f"mount {target}")


def enter_mounts(mounts: Sequence[Mount]) -> None:
    """In the forked child: a private mount namespace with ``mounts`` bound in it."""
    _check(_LIBC.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(None, "/", MS_REC | MS_PRIVATE)
    for mount in mounts:
        if mount.cover:
            if os.path.isdir(mount.target):
                flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
                _mount("tmpfs", mount.target, flags, b"tmpfs")
            continue
        _mount(mount.source, mount.target, MS_BIND | MS_REC)
        if mount.read_only:
            _mount(None, mount.target, MS_REMOUNT | MS_BIND | MS_RDONLY)


def describe(mounts: Iterable[Mount]) -> str:
    return ", ".join(f"{m.target}{' (ro)' if m.read_only else ''}" for m in mounts if not m.cover)
