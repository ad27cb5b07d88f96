"""The reference agent images' build inputs (``images/``, ``e2e/controlplane/
agent_images.py``): what each Dockerfile builds from and lets into its context, the one
place the CLI versions are pinned, the npm fetcher's refusal of a tarball that is not
the pinned one, and which old archives a build deletes."""

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
    base_images,
    context_files,
    ignore_rules,
    stale_archives,
)
from e2e.models.fixtures import pinned

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "images" / "npm_fetch.py"


@pytest.mark.parametrize("runtime", agent_images.RUNTIMES)
def test_each_reference_dockerfile_builds_from_the_slim_python_image_only(runtime: str) -> None:
    dockerfile = (ROOT / agent_images.dockerfile(runtime)).read_text()
    assert base_images(dockerfile) == ["python:3.11-slim"]
    # The runner is the image's default command, run by a numeric non-root user.
    assert 'ENTRYPOINT ["agentchain"]\nCMD ["agent", "run"]' in dockerfile
    assert "USER 10001:10001" in dockerfile
    assert f"AGENTCHAIN_RUNTIME={runtime}" in dockerfile
    assert f"npm_fetch.py {runtime} " in dockerfile


@pytest.mark.parametrize("runtime", agent_images.RUNTIMES)
def test_the_context_holds_the_package_and_the_pins_and_nothing_else(
    runtime: str, tmp_path: Path
) -> None:
    names = ("pyproject.toml", "README.md", "operator/pkg/a.py", "operator/pkg/a.pyc",
             "images/versions.env", "images/npm_fetch.py", "images/README.md",
             "images/codex/Dockerfile", "e2e/models/server.py", ".git/HEAD", "Dockerfile",
             ".env")  # fmt: skip
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    ignore = ROOT / f"{agent_images.dockerfile(runtime)}.dockerignore"
    assert context_files(tmp_path, ignore_rules(ignore.read_text())) == [
        "README.md", "images/npm_fetch.py", "images/versions.env", "operator/pkg/a.py",
        "pyproject.toml",
    ]  # fmt: skip


def test_the_cli_versions_the_images_build_are_the_ones_the_runner_tests_run() -> None:
    text = (ROOT / "images" / "claude-code" / "Dockerfile").read_text()
    text += (ROOT / "images" / "codex" / "Dockerfile").read_text()
    # No version in a Dockerfile: images/versions.env is the one place.
    assert pinned("CLAUDE_CODE_VERSION") not in text and pinned("CODEX_VERSION") not in text
    setup = (ROOT / "e2e" / "setup.sh").read_text()
    assert ". images/versions.env" in setup


class _Registry(BaseHTTPRequestHandler):
    tarball: ClassVar[bytes] = b""
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.tarball)))
        self.end_headers()
        self.wfile.write(self.tarball)

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


def _tarball(member: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(member)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_the_fetcher_refuses_a_tarball_that_is_not_the_pinned_one(
    registry: str, tmp_path: Path
) -> None:
    tarball = _tarball("package/claude", b"#!/bin/sh\necho not claude\n")
    _Registry.tarball, _Registry.paths = tarball, []
    env = {**os.environ, "NPM_REGISTRY": registry}
    result = subprocess.run(
        [sys.executable, str(FETCH), "claude-code", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    version = pinned("CLAUDE_CODE_VERSION")
    assert _Registry.paths == [
        f"/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-{version}.tgz"
    ]
    digest = hashlib.sha256(tarball).hexdigest()
    assert f"SHA256 {digest}, pinned {pinned('CLAUDE_CODE_SHA256')}" in result.stderr
    assert not (tmp_path / "out" / "claude").exists()


def test_a_build_deletes_only_its_own_older_archives(tmp_path: Path) -> None:
    names = ["agentchain-0123456789abcdef.tar", "agentchain-fedcba9876543210.tar",
             "agentchain-claude-code-0123456789abcdef.tar", "agentchain-codex-1111222233334444.tar",
             "agentchain-notes.tar"]  # fmt: skip
    for name in names:
        (tmp_path / name).write_bytes(b"")
    assert stale_archives(tmp_path, "agentchain", "fedcba9876543210") == [
        tmp_path / "agentchain-0123456789abcdef.tar"
    ]
    assert stale_archives(tmp_path, "agentchain-claude-code", "aaaabbbbccccdddd") == [
        tmp_path / "agentchain-claude-code-0123456789abcdef.tar"
    ]
