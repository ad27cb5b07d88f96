"""Fetch an agent CLI's native binary from the npm registry at its pinned version.

``python3 npm_fetch.py RUNTIME DEST`` downloads the linux-x64 package of ``RUNTIME``'s
CLI (``claude-code`` or ``codex``) at the version ``versions.env`` (beside this file)
pins, refuses it unless the tarball's SHA256 is the pinned one, and writes the one
binary it needs to ``DEST/<command>``, executable. Python's standard library only: the
reference images build it in ``python:3.11-slim``, with no Node and no npm, and the
binaries need neither at run time.

``NPM_REGISTRY`` names another registry (a mirror); the tarball must still match the
pinned digest. TLS trusts ``/etc/ssl/certs/ca-certificates.crt`` when present (what a
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
from pathlib import Path

# runtime -> (versions.env prefix, npm package, version suffix, member, command)
PACKAGES = {
    "claude-code": (
        "CLAUDE_CODE", "@anthropic-ai/claude-code-linux-x64", "", "package/claude", "claude",
    ),
    "codex": (
        "CODEX", "@openai/codex", "-linux-x64",
        "package/vendor/x86_64-unknown-linux-musl/bin/codex", "codex",
    ),
}  # fmt: skip
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CHUNK = 1 << 20


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


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in PACKAGES:
        print(f"usage: {argv[0]} {{{','.join(PACKAGES)}}} DEST", file=sys.stderr)
        return 2
    prefix, package, suffix, member, command = PACKAGES[argv[1]]
    pinned = pins(Path(__file__).with_name("versions.env"))
    version = pinned[f"{prefix}_VERSION"] + suffix
    expected = pinned[f"{prefix}_SHA256"]
    url = tarball_url(os.environ.get("NPM_REGISTRY", "https://registry.npmjs.org"), package,
                      version)  # fmt: skip
    context = ssl.create_default_context(cafile=str(CA_BUNDLE) if CA_BUNDLE.is_file() else None)
    dest = Path(argv[2])
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as tgz:
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, context=context, timeout=60) as response:
            while chunk := response.read(CHUNK):
                digest.update(chunk)
                tgz.write(chunk)
        if digest.hexdigest() != expected:
            print(f"{url}: SHA256 {digest.hexdigest()}, pinned {expected}", file=sys.stderr)
            return 1
        tgz.seek(0)
        with tarfile.open(fileobj=tgz, mode="r:gz") as archive:
            source = archive.extractfile(member)
            if source is None:
                print(f"{url}: no file {member}", file=sys.stderr)
                return 1
            with source, (dest / command).open("wb") as out:
                shutil.copyfileobj(source, out, CHUNK)
    (dest / command).chmod(0o755)
    print(f"{package}@{version} -> {dest / command}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
