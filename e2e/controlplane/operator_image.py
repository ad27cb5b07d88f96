"""The operator image, built from the top-level ``Dockerfile`` with no registry and no
Docker engine, cached by its inputs, as an OCI archive the real node imports.

Two steps, each cached under ``$AGENTCHAIN_CACHE`` by a digest of what it is made of:

* **The base image stand-in.** The Dockerfile builds ``FROM python:3.11-slim``, which
  no registry here can serve. The stand-in has the official image's layout: a Debian
  bookworm root filesystem from ``mmdebstrap`` (minbase, plus ``ca-certificates``,
  ``netbase``, ``tzdata`` and the shared libraries CPython links to, found with ``ldd``
  and ``dpkg-query --search`` as the official image's own build finds them), and a
  CPython 3.11 under ``/usr/local`` with pip from ``ensurepip``. The CPython is a copy of
  one already built on this machine from upstream's sources (pyenv's; Debian's own
  ``python3.11`` lives under ``/usr`` with Debian's patches to pip's install scheme,
  which is exactly what the official image does not have). It is committed to buildah's
  storage under the name the Dockerfile asks for, so the Dockerfile is built unchanged.
* **The Dockerfile itself**, with ``buildah bud --layers`` (Debian's ``buildah``, vfs
  storage under the cache directory, so nothing is mounted on the host once it exits).
  The context holds only what ``.dockerignore`` lets in. The build's pip installs from a
  wheelhouse the host's pip downloads first from the same index (PyPI is reached here
  through a TLS-intercepting CA, which the host trusts and the image must not): its
  configuration is mounted for the build's ``RUN`` steps only and is in no layer. The
  result is pushed to an OCI archive tagged ``agentchain.local/agentchain:<key>``.

The key of the final archive is a digest of the Dockerfile, the context's files and the
base image's key, so a rebuild with nothing changed only hashes files; after a code
change buildah's layer cache reuses every step up to ``COPY operator/``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e.controlplane import realnode_images

REGISTRY = realnode_images.REGISTRY
IMAGE_NAME = "agentchain"
# The one base image there is a stand-in for (the Dockerfile's FROM).
STAND_IN = "python:3.11-slim"
SUITE = "bookworm"
MIRRORS = (
    f"deb http://deb.debian.org/debian {SUITE} main",
    f"deb http://deb.debian.org/debian {SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main",
)
# What the official slim image installs besides the libraries Python links to.
BASE_PACKAGES = ("ca-certificates", "netbase", "tzdata")
# Left out of the copied CPython, as the official slim image leaves them out (tests, Tk)
# or because they are this machine's (site-packages holds the host's installed packages).
PYTHON_EXCLUDES = (
    "site-packages", "test", "tests", "idle_test", "__pycache__", "tkinter", "idlelib",
    "turtledemo", "_tkinter*", "*.pyc", "*.pyo", "libpython*.a", "ensurepip/_bundled/*.whl~",
)  # fmt: skip
# The slim image's dpkg configuration: no documentation or translations.
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*",
                 "/usr/share/info/*")  # fmt: skip
# Bumped when the way the base image is assembled changes, so the cache is not reused.
BASE_RECIPE = "4"
# Bumped when the build's own options change (they are not among the hashed inputs).
BUILD_RECIPE = "4"
BUILD_TIMEOUT_SECONDS = 1800
# overlay, not vfs: see Buildah.
STORAGE_DRIVER = "overlay"
# Where a Debian image (the base stand-in too) keeps the CA bundle its TLS clients trust.
IMAGE_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
WHEELHOUSE_MAX_AGE_SECONDS = 24 * 3600


class BuildError(RuntimeError):
    """The image cannot be built here (a missing tool, a failed step)."""


@dataclass(frozen=True)
class Built:
    """A built image: its reference, archive and how long the build took."""

    ref: str
    archive: Path
    seconds: float
    cached: bool


# --- pure parts --------------------------------------------------------------------------


def base_images(dockerfile: str) -> list[str]:
    """The images the Dockerfile's stages build ``FROM``, with ``ARG`` defaults
    substituted (build arguments given on the command line are not considered), and
    stage names left out: what must exist in local storage before the build."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    images: list[str] = []
    for line in _logical_lines(dockerfile):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG" and not images:
            name, _, default = rest.strip().partition("=")
            args[name.strip()] = default.strip().strip('"')
        elif keyword == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            image = re.sub(
                r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), ""), words[0]
            )
            if len(words) >= 3 and words[1].upper() == "AS":
                stages.add(words[2].lower())
            if image.lower() not in stages and image != "scratch" and image not in images:
                images.append(image)
    return images


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append((pending + line).strip())
        pending = ""
    return lines


def ignore_rules(dockerignore: str) -> list[tuple[bool, str]]:
    """``.dockerignore`` as ``(excluded, pattern)`` rules; the last match wins."""
    rules = []
    for raw in dockerignore.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        pattern = line[1:] if keep else line
        rules.append((not keep, pattern.strip().strip("/")))
    return rules


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    # Docker's rules: ``*`` and ``?`` stay within one path element, ``**`` spans any
    # number of them (``**/`` at the start: none too).
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            negated = body.startswith(("!", "^"))
            body = re.escape(body[1:] if negated else body).replace("\\-", "-")
            out, i = out + ("[^/" if negated else "[") + body + "]", end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def _matches(pattern: str, path: str) -> bool:
    """Whether ``pattern`` matches ``path`` or one of its parent directories."""
    regex = _pattern_regex(pattern)
    parts = path.split("/")
    return any(regex.fullmatch("/".join(parts[: i + 1])) for i in range(len(parts)))


def included(path: str, rules: Sequence[tuple[bool, str]]) -> bool:
    """Whether ``path`` (relative, ``/``-separated) is in the build context."""
    excluded = False
    for exclude, pattern in rules:
        if _matches(pattern, path):
            excluded = exclude
    return not excluded


def context_files(root: Path, rules: Sequence[tuple[bool, str]]) -> list[str]:
    """The files of ``root`` that the build context holds, sorted."""
    found = []
    for directory, subdirs, files in os.walk(root):
        relative_dir = Path(directory).relative_to(root)
        subdirs[:] = sorted(d for d in subdirs if d != ".git")
        for name in files:
            relative = (relative_dir / name).as_posix()
            if included(relative, rules):
                found.append(relative)
    return sorted(found)


def cache_key(parts: Iterable[tuple[str, bytes]]) -> str:
    """A digest of named inputs, each name and content length-prefixed so no two
    different input sets can produce the same byte stream."""
    digest = hashlib.sha256()
    for name, data in parts:
        encoded = name.encode()
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()[:16]


# --- I/O ---------------------------------------------------------------------------------


# An archive used (built or found) this recently is kept: another checkout on the machine
# (a second worktree, a CI clone) may be about to import it.
ARCHIVE_IN_USE_SECONDS = 3600.0


def stale_archives(directory: Path, name: str, key: str, now: float | None = None) -> list[Path]:
    """The archives of image ``name`` in ``directory`` other than ``key``'s and not used
    for ``ARCHIVE_IN_USE_SECONDS``: exactly ``<name>-<key-sized hex>.tar``, because
    ``agentchain-*`` alone would also match the agent images'
    ``agentchain-claude-code-<key>.tar``. A use sets the archive's modification time."""
    pattern = re.compile(rf"{re.escape(name)}-[0-9a-f]{{{len(key)}}}\.tar")
    since = (time.time() if now is None else now) - ARCHIVE_IN_USE_SECONDS
    return sorted(
        path for path in directory.glob(f"{name}-*.tar")
        if pattern.fullmatch(path.name) and path.name != f"{name}-{key}.tar"
        and path.stat().st_mtime < since
    )  # fmt: skip


def say(message: str) -> None:
    print(f"[image] {message}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    return realnode_images.cache_dir().parent


class Buildah:
    """buildah with its storage under the cache directory, each call in a mount namespace
    of its own.

    The overlay driver makes a container's file system from its image's layers with one
    mount, where vfs copies all of them, and a layer is only its own changes, so a step
    and its commit cost what the step changed, not the size of the image. It mounts, so
    each call runs under ``unshare --mount`` with private propagation: the driver's own
    bind mount of its directory and every overlay mount stay in that namespace and are
    gone when the call exits. The run root (where the driver records what is mounted) is
    new for each call for the same reason; the storage's locks are in the root, shared."""

    def __init__(self, root: Path, driver: str = STORAGE_DRIVER) -> None:
        self.root = root
        self.driver = driver
        # vfs keeps the directory it always had, so its cache stays warm.
        self.storage = root / ("storage" if driver == "vfs" else f"storage-{driver}")

    @contextlib.contextmanager
    def _argv(self, args: Sequence[str]) -> Iterator[list[str]]:
        runs = self.root / "runroots"
        runs.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=runs) as runroot:
            yield [
                "unshare", "--mount", "--propagation", "private",
                "buildah", "--root", str(self.storage), "--runroot", runroot,
                "--storage-driver", self.driver, *args,
            ]  # fmt: skip

    def __call__(self, *args: str, timeout: float = 600) -> str:
        with self._argv(args) as argv:
            result = subprocess.run(argv, capture_output=True, text=True, check=False,
                                    timeout=timeout, env=_tool_env())  # fmt: skip
        if result.returncode != 0:
            raise BuildError(f"buildah {' '.join(args)}: {result.stderr or result.stdout}")
        return result.stdout

    def logged(self, log: Path, *args: str, timeout: float = BUILD_TIMEOUT_SECONDS) -> None:
        """Run with its output in ``log``, each line stamped with the seconds since the
        start, which is where the step times in the README come from."""
        started = time.monotonic()
        with self._argv(args) as argv, log.open("w") as out, subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_tool_env(),
        ) as process:  # fmt: skip
            assert process.stdout is not None
            for line in process.stdout:
                out.write(f"{time.monotonic() - started:7.1f} {line}")
                if time.monotonic() - started > timeout:
                    process.kill()
            code = process.wait()
        if code != 0:
            tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
            raise BuildError(f"buildah {args[0]} failed (exit {code}); {log}:\n{tail}")

    def has_image(self, ref: str) -> bool:
        with self._argv(["inspect", "--type", "image", ref]) as argv:
            result = subprocess.run(argv, capture_output=True, check=False, env=_tool_env())
        return result.returncode == 0


def _tool_env() -> dict[str, str]:
    # No BUILDAH_* or container settings of the caller leak into the build.
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    return {k: v for k, v in os.environ.items() if k in keep}


def _require(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise BuildError(f"missing {', '.join(missing)}: apt-get install buildah mmdebstrap")


def host_python() -> Path:
    """The prefix of a CPython 3.11 built from upstream's sources on this machine."""
    configured = os.environ.get("AGENTCHAIN_BASE_PYTHON")
    candidates = [Path(configured)] if configured else []
    pyenv = Path.home() / ".pyenv" / "versions"
    if pyenv.is_dir():
        candidates += sorted(pyenv.glob("3.11.*"), reverse=True)
    for prefix in candidates:
        if (prefix / "bin" / "python3.11").is_file() and (prefix / "lib" / "python3.11").is_dir():
            return prefix
    raise BuildError(
        "no CPython 3.11 under /usr/local layout found (set AGENTCHAIN_BASE_PYTHON to the "
        "prefix of one built from source, e.g. `pyenv install 3.11`)"
    )


def _python_libraries(prefix: Path) -> list[str]:
    """The Debian packages holding the shared libraries this CPython links to."""
    objects = [prefix / "bin" / "python3.11", *prefix.glob("lib/libpython3.11.so*"),
               *(prefix / "lib" / "python3.11" / "lib-dynload").glob("*.so")]  # fmt: skip
    paths: set[str] = set()
    # ldd names libraries by their real paths; the prefix may be reached through a link
    # (a pyenv under a linked home), and its own libraries are not Debian's.
    own = os.path.realpath(prefix)
    for obj in objects:
        if obj.name.startswith("_tkinter"):
            continue
        out = subprocess.run(["ldd", str(obj)], capture_output=True, text=True, check=False)
        for match in re.finditer(r"=> (/\S+)", out.stdout):
            real = os.path.realpath(match.group(1))
            if not real.startswith(own + os.sep):
                paths.add(real)
    packages: set[str] = set()
    for path in sorted(paths):
        found = subprocess.run(
            ["dpkg-query", "--search", path], capture_output=True, text=True, check=False
        )
        if found.returncode != 0:
            # usrmerge: dpkg knows /lib/x86_64-linux-gnu/..., ldd reports /usr/lib/...
            alternative = path.removeprefix("/usr") if path.startswith("/usr/lib") else path
            found = subprocess.run(
                ["dpkg-query", "--search", alternative], capture_output=True, text=True,
                check=False,
            )  # fmt: skip
        if found.returncode != 0:
            raise BuildError(f"no Debian package holds {path}, which CPython links to")
        packages.update(line.split(":")[0] for line in found.stdout.splitlines())
    return sorted(packages)


def _python_version(prefix: Path) -> str:
    code = "import platform; print(platform.python_version())"
    return subprocess.run(
        [str(prefix / "bin" / "python3.11"), "-c", code], capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip


def _stage_python(prefix: Path, target: Path) -> None:
    """Copy the CPython at ``prefix`` into ``target`` (the future ``/usr/local``)."""
    ignore = shutil.ignore_patterns(*PYTHON_EXCLUDES)
    (target / "bin").mkdir(parents=True)
    shutil.copy2(prefix / "bin" / "python3.11", target / "bin" / "python3.11")
    (target / "lib").mkdir()
    for library in prefix.glob("lib/libpython3*.so*"):
        shutil.copy2(library, target / "lib" / library.name, follow_symlinks=False)
    shutil.copytree(prefix / "lib" / "python3.11", target / "lib" / "python3.11", ignore=ignore,
                    symlinks=True)  # fmt: skip
    (target / "lib" / "python3.11" / "site-packages").mkdir()
    if (prefix / "include" / "python3.11").is_dir():
        shutil.copytree(prefix / "include" / "python3.11", target / "include" / "python3.11")


_CUSTOMIZE = r"""
set -e
cp -a {stage}/. "$1/usr/local/"
chroot "$1" ldconfig
chroot "$1" /usr/local/bin/python3.11 -m ensurepip --default-pip
cd "$1/usr/local/bin"
ln -sfT python3.11 python3
ln -sfT python3 python
ln -sfT pip3 pip
find "$1/usr/local" -depth \( -name __pycache__ -o -name '*.pyc' \) -exec rm -rf {{}} +
chroot "$1" python3 -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, uuid, readline'
chroot "$1" python3 -m pip --version
"""


def base_key(prefix: Path) -> str:
    """The stand-in's cache key: the recipe, the Debian suite and mirrors, and the
    CPython copied in (the packages it needs follow from its binaries). Cheap, so a
    rebuild with nothing changed is decided without asking buildah or dpkg anything."""
    binaries = [prefix / "bin" / "python3.11", *sorted(prefix.glob("lib/libpython3.11.so*"))]
    return cache_key([
        ("recipe", BASE_RECIPE.encode()), ("suite", SUITE.encode()),
        ("mirrors", "\n".join(MIRRORS).encode()),
        *((f"python/{b.name}", b.read_bytes()) for b in binaries if not b.is_symlink()),
    ])  # fmt: skip


def base_image(buildah: Buildah, tags: Sequence[str], key: str) -> None:
    """Build (or reuse) the ``python:3.11-slim`` stand-in with ``key``; tag it ``tags``."""
    prefix = host_python()
    local = f"localhost/agentchain-python-base:{key}"
    if not buildah.has_image(local):
        version = _python_version(prefix)
        packages = sorted({*BASE_PACKAGES, *_python_libraries(prefix)})
        _require("mmdebstrap")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=buildah.root) as scratch:
            stage = Path(scratch) / "usr-local"
            _stage_python(prefix, stage)
            rootfs = Path(scratch) / "rootfs.tar"
            command = [
                "mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar",
                f"--include={','.join(packages)}",
                *(f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES),
                f"--customize-hook={_CUSTOMIZE.format(stage=shlex.quote(str(stage)))}",
                SUITE, str(rootfs), *MIRRORS,
            ]  # fmt: skip
            result = subprocess.run(command, capture_output=True, text=True, check=False,
                                    timeout=BUILD_TIMEOUT_SECONDS)  # fmt: skip
            if result.returncode != 0:
                raise BuildError(f"mmdebstrap: {result.stderr[-4000:]}")
            container = buildah("from", "--name", f"agentchain-base-{key}", "scratch").strip()
            try:
                buildah("add", container, str(rootfs), "/")
                # The official image's configuration (docker.io/library/python).
                buildah(
                    "config",
                    "--env", "PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "--env", "LANG=C.UTF-8", "--env", f"PYTHON_VERSION={version}",
                    "--cmd", '["python3"]', "--os", "linux", "--arch", "amd64",
                    container,
                )  # fmt: skip
                buildah("commit", "--rm", container, local, timeout=BUILD_TIMEOUT_SECONDS)
            except BaseException:
                buildah("rm", container)
                raise
        say(f"base image {local} (CPython {version}) in {time.monotonic() - started:.0f} s")
    for tag in tags:
        buildah("tag", local, tag)


def _qualified(image: str) -> list[str]:
    """The names buildah looks up for a Dockerfile's short name."""
    if "/" not in image.split(":")[0]:
        return [f"docker.io/library/{image}", f"localhost/{image}"]
    return [image]


def _build_home(home: Path) -> Path:
    """A home directory for root during the build's ``RUN`` steps, holding pip's user
    configuration: install from the wheelhouse mounted at ``/root/wheels``, not the
    index (see ``_wheelhouse``). It is mounted over ``/root``, which every Debian image
    has, so the mount point adds no entry to a layer; a file mounted at a new path such
    as ``/etc/pip.conf`` leaves an empty file behind in the image."""
    config = home / ".config" / "pip"
    config.mkdir(parents=True)
    (config / "pip.conf").write_text("[global]\nno-index = true\nfind-links = /root/wheels\n")
    return home


def _wheelhouse(context: Path, wheels: Path) -> Path:
    """The files ``pip install .`` of ``context`` resolves to now, and its build
    backend's, downloaded from the index by the host's pip into ``wheels`` (kept across
    builds, so only new versions are downloaded).

    pip in the build installs from here with ``no-index``: the Dockerfile turns pip's
    cache off, and with the index also offered pip's resolver takes the index's copy of
    an equal version, downloading every dependency again after each code change. Right
    after this download the directory's newest versions are what the index resolves to,
    so the build installs the same packages it would have fetched itself."""
    wheels.mkdir(parents=True, exist_ok=True)
    # Resolved again when pyproject.toml changes or a day has passed; code changes alone
    # keep the resolution, as a lock file would.
    resolved = cache_key([("pyproject", (context / "pyproject.toml").read_bytes())])
    marker = wheels / f".resolved-{resolved}"
    if marker.is_file() and time.time() - marker.stat().st_mtime < WHEELHOUSE_MAX_AGE_SECONDS:
        return wheels
    pyproject = tomllib.loads((context / "pyproject.toml").read_text())
    backend = pyproject.get("build-system", {}).get("requires", [])
    python = host_python() / "bin" / "python3.11"
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    for what in ([str(context)], [*backend, "pip"]):
        result = subprocess.run(
            [str(python), "-m", "pip", "download", "--quiet", "--dest", str(wheels),
             *what],
            capture_output=True, text=True, check=False, env=env, timeout=BUILD_TIMEOUT_SECONDS,
        )  # fmt: skip
        if result.returncode != 0:
            raise BuildError(f"pip download {' '.join(what)}: {result.stderr[-2000:]}")
    marker.touch()
    return wheels


@dataclass(frozen=True)
class Recipe:
    """What an image is built from, read once (the build gets the very bytes its key was
    computed from, even if a file is edited while it runs), and that key."""

    dockerfile: str
    contents: dict[str, bytes]
    bases: list[str]
    stand_in: str
    args: dict[str, str]
    key: str

    @classmethod
    def of(cls, root: Path, dockerfile: str, build_args: Mapping[str, str] | None) -> Recipe:
        text = (root / dockerfile).read_text()
        own_ignore = root / f"{dockerfile}.dockerignore"
        dockerignore = own_ignore if own_ignore.is_file() else root / ".dockerignore"
        rules = ignore_rules(dockerignore.read_text()) if dockerignore.is_file() else []
        contents = {path: (root / path).read_bytes() for path in context_files(root, rules)}
        bases = base_images(text)
        if any(b != STAND_IN for b in bases):
            raise BuildError(f"{dockerfile} builds FROM {bases}; only {STAND_IN} has a stand-in")
        stand_in = base_key(host_python())
        args = dict(build_args or {})
        key = cache_key([
            ("recipe", BUILD_RECIPE.encode()), ("Dockerfile", text.encode()),
            ("base", stand_in.encode()),
            *((f"build-arg/{arg}", value.encode()) for arg, value in sorted(args.items())),
            *((f"context/{path}", data) for path, data in contents.items()),
        ])  # fmt: skip
        return cls(text, contents, bases, stand_in, args, key)


def build(
    root: Path, dockerfile: str = "Dockerfile", name: str = IMAGE_NAME, *,
    trust_host_ca: bool = False, archives: Path | None = None,
    build_args: Mapping[str, str] | None = None,
) -> Built:  # fmt: skip
    """Build the image of ``root``'s ``dockerfile`` (a path relative to ``root``, the
    context) as ``agentchain.local/<name>:<key>`` (cached); return its OCI archive.

    The context is what ``<dockerfile>.dockerignore`` lets in, else ``.dockerignore`` at
    the root, as Docker decides. ``trust_host_ca`` mounts this machine's CA bundle over
    the image's own (``/etc/ssl/certs/ca-certificates.crt``) for the build's ``RUN``
    steps, for a step that downloads through the TLS-intercepting proxy itself (the
    reference agent images fetch their CLI from npm); it is in no layer, because the
    file it covers is the base image's and is left as it was. ``archives`` is the
    directory of the OCI archive (default: the real node's image cache). ``build_args``
    are the Dockerfile's ``ARG`` values (``--build-arg``), part of the key: one
    Dockerfile builds each reference agent image, told which runtime."""
    started = time.monotonic()
    recipe = Recipe.of(root, dockerfile, build_args)
    key = recipe.key
    store = cache_root() / "buildah"
    ref = f"{REGISTRY}/{name}:{key}"
    directory = archives or realnode_images.cache_dir()
    archive = directory / f"{name}-{key}.tar"
    if archive.is_file():
        os.utime(archive)  # in use: see ``stale_archives``
        return Built(ref, archive, time.monotonic() - started, cached=True)
    built = realnode_images.cache_dir() / archive.name
    if archives is not None and built.is_file():  # The same image, built for the node.
        directory.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        try:  # Linked: each directory deletes its own stale names, never the other's.
            os.link(built, partial)
        except OSError:  # Another file system.
            shutil.copyfile(built, partial)
        partial.rename(archive)
        return Built(ref, archive, time.monotonic() - started, cached=True)
    _require("buildah")
    store.mkdir(parents=True, exist_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    buildah = Buildah(store)
    base_image(buildah, [t for b in recipe.bases for t in _qualified(b)], recipe.stand_in)
    ca_bundle = Path(os.environ.get("SSL_CERT_FILE") or IMAGE_CA_BUNDLE)
    if trust_host_ca and not ca_bundle.is_file():
        raise BuildError(f"no CA bundle at {ca_bundle} to trust during the build")
    trust = ["--volume", f"{ca_bundle}:{IMAGE_CA_BUNDLE}:ro"] if trust_host_ca else []
    log = store / ("last-build.log" if name == IMAGE_NAME else f"last-build-{name}.log")
    with tempfile.TemporaryDirectory(dir=store) as scratch:
        context = Path(scratch) / "context"
        for path, data in recipe.contents.items():
            (context / path).parent.mkdir(parents=True, exist_ok=True)
            (context / path).write_bytes(data)
        (context / "Dockerfile").write_text(recipe.dockerfile)
        home = _build_home(Path(scratch) / "home")
        wheels = _wheelhouse(context, store / "wheels")
        buildah.logged(
            log,
            "bud", "--layers", "--pull=never", "--network=host", "--isolation=chroot",
            "--volume", f"{home}:/root", "--volume", f"{wheels}:/root/wheels:ro", *trust,
            *(f"--build-arg={arg}={value}" for arg, value in sorted(recipe.args.items())),
            "--tag", ref, "--file", str(context / "Dockerfile"), str(context),
        )  # fmt: skip
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        # Uncompressed: compressing every layer again on each push cost more than the
        # import of a bigger archive from the local disk.
        buildah("push", "--disable-compression", ref, f"oci-archive:{partial}:{ref}",
                timeout=BUILD_TIMEOUT_SECONDS)  # fmt: skip
        partial.rename(archive)
    for old in stale_archives(directory, name, key):
        old.unlink()  # an archive per build would fill the disk
    seconds = time.monotonic() - started
    say(f"built {ref} in {seconds:.0f} s")
    return Built(ref, archive, seconds, cached=False)


def main() -> int:
    root = Path(__file__).resolve().parents[2]
    built = build(root)
    state = "cached" if built.cached else "built"
    print(f"{built.ref} {built.archive} ({state} in {built.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
