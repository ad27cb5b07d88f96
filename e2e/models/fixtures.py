"""Helpers for the pinned agent CLIs (the ``model_standin`` fixture is e2e/conftest.py's:
it listens where the session's agents reach it, which only the session's cluster knows).

``agent_cli(runtime)`` is the path of a CLI e2e/setup.sh fetched: without
it a test skips with the reason locally, but fails in CI (``CI=true``), where setup.sh
must have fetched it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The pins the reference images (images/) build from, shared with e2e/setup.sh.
_VERSIONS = Path(__file__).resolve().parents[2] / "images" / "versions.env"
# runtime -> (versions.env key, package directory, the CLI in it: npm_fetch unpacks a
# package's files under package/)
_CLIS = {
    "claude-code": (
        "CLAUDE_CODE_VERSION",
        "anthropic-ai-claude-code-linux-x64-{}",
        "package/claude",
    ),
    "codex": (
        "CODEX_VERSION",
        "openai-codex-{}-linux-x64",
        "package/vendor/x86_64-unknown-linux-musl/bin/codex",
    ),
    "opencode": ("OPENCODE_VERSION", "opencode-linux-x64-{}", "package/bin/opencode"),
    # A Node program: setup.sh's launcher beside the package runs its bundle with the
    # pinned Node (Debian bookworm's is 18, below the CLI's minimum of 20).
    "gemini": ("GEMINI_CLI_VERSION", "google-gemini-cli-{}", "gemini"),
}


def pinned(key: str) -> str:
    for line in _VERSIONS.read_text().splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError(f"{key} missing from {_VERSIONS}")


def cli_path(runtime: str) -> Path:
    """Where e2e/setup.sh put the runtime's CLI (Gemini CLI: the launcher of its bundle)."""
    key, directory, binary = _CLIS[runtime]
    return _npm_cache() / directory.format(pinned(key)) / binary


def _npm_cache() -> Path:
    return Path(os.environ.get("AGENTCHAIN_CACHE", Path.home() / ".cache/agentchain")) / "npm"


def agent_cli(runtime: str) -> Path:
    """The pinned CLI's path; skip (fail under ``CI=true``) when it was not fetched."""
    path = cli_path(runtime)
    if not os.access(path, os.X_OK):
        missing = f"{runtime} CLI not at {path} (run e2e/setup.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}; CI must have it")
        pytest.skip(missing)
    return path
