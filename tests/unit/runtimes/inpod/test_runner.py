"""The runner's process side (``runtimes/inpod/runner.py``), as ``python -m agentchain agent run``.

Aspects covered (the real CLIs against a stand-in model are in e2e/test_agent_runner.py):
- an unknown runtime, an empty prompt or a CLI that cannot be started end with
  ``RunnerMisconfigured`` (86) and one line on stderr, nothing on stdout;
- a stop of the pod (SIGTERM to the runner) reaches the CLI: the runner ends within
  seconds, as ``AgentFailed``, instead of waiting for the CLI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentchain.core.rules import runnerexits as exits

RUNNER = [sys.executable, "-m", "agentchain", "agent", "run"]


def _env(**settings: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "AGENTCHAIN_"))}
    return {**base, "AGENT_PROMPT": "Say hi.", **settings}


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"AGENTCHAIN_RUNTIME": "cursor"}, "unknown runtime 'cursor'"),
        ({"AGENTCHAIN_RUNTIME": "codex", "AGENT_PROMPT": " "}, "the prompt is empty"),
        (
            {"AGENTCHAIN_RUNTIME": "claude-code", "AGENTCHAIN_AGENT_CLI": "/nonexistent/claude"},
            "cannot start /nonexistent/claude",
        ),
    ],
)
def test_bad_settings_end_with_runner_misconfigured(settings: dict[str, str], said: str) -> None:
    done = subprocess.run(
        RUNNER, env=_env(**settings), capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (exits.EXIT_RUNNER_MISCONFIGURED, "")
    last = done.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("the agent runner's settings are invalid: ") and said in last


def test_a_stop_of_the_pod_reaches_the_cli(tmp_path: Path) -> None:
    cli = tmp_path / "claude"
    cli.write_text("#!/bin/sh\nexec sleep 60\n")
    cli.chmod(0o755)
    env = _env(AGENTCHAIN_RUNTIME="claude-code", AGENTCHAIN_AGENT_CLI=str(cli))
    runner = subprocess.Popen(
        RUNNER, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(2)  # Python's start-up, then the CLI's.
    started = time.monotonic()
    runner.send_signal(signal.SIGTERM)
    stdout, stderr = runner.communicate(timeout=30)
    assert time.monotonic() - started < 10
    assert (runner.returncode, stdout) == (exits.EXIT_AGENT_FAILED, "")
    assert "claude exited -15 with no result" in stderr.rstrip("\n").rsplit("\n", 1)[-1]


RESULT = json.dumps(
    {
        "type": "result",
        "subtype": "success",
        "result": "done",
        "num_turns": 1,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
)


def test_the_mcp_config_file_is_owner_only_and_gone_after_the_run(tmp_path: Path) -> None:
    cli = tmp_path / "claude"
    seen = tmp_path / "seen"
    # The fake CLI keeps a copy of the file it was given, with its mode, and answers.
    cli.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != "--mcp-config" ]; do shift; done\n'
        f'stat -c %a "$2" > {seen}.mode; cat "$2" > {seen}; echo "$2" > {seen}.path\n'
        f"echo '{RESULT}'\n"
    )
    cli.chmod(0o755)
    servers = {"tracker": {"command": "t", "args": [], "env": ["TRACKER_TOKEN"]}}
    env = _env(
        AGENTCHAIN_RUNTIME="claude-code",
        AGENTCHAIN_AGENT_CLI=str(cli),
        AGENTCHAIN_MCP_SERVERS=json.dumps(servers),
        TRACKER_TOKEN="sek-$(X)",
    )
    done = subprocess.run(RUNNER, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    assert (tmp_path / "seen.mode").read_text().strip() == "600"
    config = json.loads(seen.read_text())
    assert config["mcpServers"]["tracker"]["env"] == {"TRACKER_TOKEN": "sek-$(X)"}
    assert not Path((tmp_path / "seen.path").read_text().strip()).exists()
