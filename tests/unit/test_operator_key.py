"""The operator fails closed without its key (issue 14).

Aspects covered: ``agentchain run`` with no ``AGENTCHAIN_OPERATOR_KEY(_FILE)`` exits 2 at
once, before touching Kubernetes or Redis, saying which setting is missing and how to
make a key; ``Runtime.create`` refuses the same; the key is read from a file (one per
line, the first current) as the chart mounts it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentchain.core.runtime import MissingOperatorKeyError, Runtime
from agentchain.settings import Settings


def test_run_refuses_to_start_without_a_key() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCHAIN_OPERATOR_KEY")}
    result = subprocess.run(
        [sys.executable, "-m", "agentchain", "run"],
        env={**env, "KUBECONFIG": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "AGENTCHAIN_OPERATOR_KEY_FILE" in result.stderr and "openssl rand" in result.stderr


def test_runtime_create_refuses_without_a_key() -> None:
    with pytest.raises(MissingOperatorKeyError):
        Runtime.create(Settings())


def test_keys_and_the_redis_password_come_from_mounted_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "key").write_text("current\nprevious\n")
    (tmp_path / "password").write_text("s3cret, with a comma\n")
    monkeypatch.setenv("AGENTCHAIN_OPERATOR_KEY_FILE", str(tmp_path / "key"))
    monkeypatch.setenv("AGENTCHAIN_REDIS_PASSWORD_FILE", str(tmp_path / "password"))
    settings = Settings()
    assert settings.operator_key == ("current", "previous")
    assert settings.redis_password == "s3cret, with a comma"
