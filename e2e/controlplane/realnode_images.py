"""Container images for the real node, built on this machine with no registry.

* ``pause``: Kubernetes' own ``build/pause/linux/pause.c`` (from the pinned
  ``k8s.io/kubernetes`` module, which the control-plane build downloads anyway), compiled
  ``-static`` with Debian's gcc: the sandbox image every pod starts with.
* ``test``: Debian's statically linked busybox (package busybox-static) as ``/bin/sh``
  and friends, enough for a pod that prints and exits.

Each image is written as an OCI image layout in a tar (one uncompressed layer, a config
and a manifest, named by sha256 digests), which ``ctr -n k8s.io images import`` reads;
that is all an OCI image is, so no image tool is needed. Everything is cached under
``$AGENTCHAIN_CACHE/images`` by a digest of its inputs, and tags are that digest, so a
changed input gives a new tag and a stale image is never run by mistake.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

REGISTRY = "agentchain.local"
BUSYBOX = Path("/bin/busybox")
# The applets the test image links to busybox: a shell and what a test script uses.
# (Not wget: Debian's static busybox wget crashes with a segmentation fault; nc works.)
BUSYBOX_APPLETS = ("sh", "echo", "cat", "sleep", "ls", "env", "id", "hostname", "nc", "nslookup")
_LAYER = "application/vnd.oci.image.layer.v1.tar"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


class ImageError(RuntimeError):
    """An image cannot be built (a missing input or tool)."""


@dataclass(frozen=True)
class File:
    """One entry of an image's single layer: a regular file or a symlink."""

    path: str  # inside the image, without the leading slash
    data: bytes = b""
    mode: int = 0o644
    link: str | None = None  # symlink target


@dataclass(frozen=True)
class Image:
    """A built image: its reference and the OCI archive that holds it."""

    ref: str
    archive: Path


def cache_dir() -> Path:
    base = Path(os.environ.get("AGENTCHAIN_CACHE") or Path.home() / ".cache" / "agentchain")
    return base / "images"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _layer(files: list[File]) -> bytes:
    """A reproducible tar: fixed owner, mode and time, parents before children."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directories = sorted({str(p) for f in files for p in Path(f.path).parents} - {"."})
        for directory in directories:
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for entry in sorted(files, key=lambda f: f.path):
            info = tarfile.TarInfo(entry.path)
            info.mode = entry.mode
            if entry.link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, entry.link
                tar.addfile(info)
            else:
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
    return buffer.getvalue()


def oci_archive(name: str, files: list[File], entrypoint: list[str], target: Path) -> Image:
    """Write ``files`` as a one-layer OCI image archive at ``target``; return its ref.

    The tag is the first 16 hex digits of the manifest digest, so the reference names
    this exact content. containerd's importer takes the name from the
    ``io.containerd.image.name`` annotation of the index.
    """
    layer = _layer(files)
    layer_digest = _sha256(layer)
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
    }
    config_bytes = json.dumps(image_config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": _MANIFEST,
        "config": {"mediaType": _CONFIG, "digest": f"sha256:{_sha256(config_bytes)}",
                   "size": len(config_bytes)},
        "layers": [{"mediaType": _LAYER, "digest": f"sha256:{layer_digest}",
                    "size": len(layer)}],
    }  # fmt: skip
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    manifest_digest = _sha256(manifest_bytes)
    ref = f"{REGISTRY}/{name}:{manifest_digest[:16]}"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": _MANIFEST, "digest": f"sha256:{manifest_digest}",
            "size": len(manifest_bytes),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": ref,
                            "org.opencontainers.image.ref.name": manifest_digest[:16]},
        }],
    }  # fmt: skip
    blobs = {
        layer_digest: layer,
        _sha256(config_bytes): config_bytes,
        manifest_digest: manifest_bytes,
    }
    entries = [
        File("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode()),
        File("index.json", json.dumps(index, sort_keys=True).encode()),
        *(File(f"blobs/sha256/{digest}", data) for digest, data in blobs.items()),
    ]
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(_layer(entries))
    partial.rename(target)
    return Image(ref, target)


def _cached(name: str, inputs: bytes, files: list[File], entrypoint: list[str]) -> Image:
    key = _sha256(inputs + json.dumps(entrypoint).encode())[:16]
    target = cache_dir() / f"{name}-{key}.tar"
    ref_file = target.with_suffix(".ref")
    if target.is_file() and ref_file.is_file():
        return Image(ref_file.read_text().strip(), target)
    image = oci_archive(name, files, entrypoint, target)
    ref_file.write_text(image.ref + "\n")
    return image


def kubernetes_source(version: str) -> Path:
    """The ``k8s.io/kubernetes`` module directory at ``version`` (Go module cache)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
            capture_output=True, text=True, check=False, env=env, cwd=scratch, timeout=600,
        )  # fmt: skip
    if result.returncode != 0:
        raise ImageError(f"go mod download k8s.io/kubernetes@{version}: {result.stderr}")
    return Path(json.loads(result.stdout)["Dir"])


def pause_binary(kubernetes_version: str) -> Path:
    """Kubernetes' pause, built ``-static`` with gcc; cached by source and compiler."""
    source = kubernetes_source(kubernetes_version) / "build" / "pause" / "linux" / "pause.c"
    if not source.is_file():
        raise ImageError(f"{source} is missing from the k8s.io/kubernetes module")
    compiler = subprocess.run(
        ["gcc", "--version"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]
    key = _sha256(source.read_bytes() + compiler.encode())[:16]
    binary = cache_dir() / f"pause-{key}" / "pause"
    if not binary.is_file():
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(".partial")
        # pause.c prints VERSION for -v; the module's version is the honest one.
        subprocess.run(
            ["gcc", "-Os", "-Wall", "-Werror", "-static", f'-DVERSION="{kubernetes_version}"',
             "-o", str(partial), str(source)],
            check=True, capture_output=True,
        )  # fmt: skip
        partial.rename(binary)
    return binary


def pause_image(kubernetes_version: str) -> Image:
    binary = pause_binary(kubernetes_version).read_bytes()
    files = [File("pause", binary, 0o755)]
    return _cached("pause", binary, files, ["/pause"])


def test_image() -> Image:
    """busybox-static as /bin/busybox with a few applets: a shell for test pods."""
    if not BUSYBOX.is_file():
        raise ImageError(f"{BUSYBOX} is missing: apt-get install busybox-static")
    busybox = BUSYBOX.read_bytes()
    files = [File("bin/busybox", busybox, 0o755)]
    files += [File(f"bin/{applet}", link="busybox") for applet in BUSYBOX_APPLETS]
    files += [File("etc/passwd", b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n")]
    files += [File("etc/group", b"root:x:0:\nnobody:x:65534:\n")]
    inputs = busybox + json.dumps([f.path for f in files]).encode()
    return _cached("busybox", inputs, files, ["/bin/sh"])


def import_image(ctr: Path, socket: Path, image: Image) -> None:
    """Import ``image`` into containerd's ``k8s.io`` namespace, where the CRI looks."""
    result = subprocess.run(
        [str(ctr), "--address", str(socket), "-n", "k8s.io", "images", "import",
         str(image.archive)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    if result.returncode != 0:
        raise ImageError(f"ctr images import {image.archive}: {result.stderr or result.stdout}")
