"""Gemini CLI in the runner's pure side (``runtimes/rules/clis.py``): its command, its
settings file, and the reading of ``gemini -p --output-format stream-json``.

``recorded/gemini-*.jsonl`` are the real ``gemini`` 0.61.0's output (``images/versions.env``)
against the stand-in model server (``e2e/models``): a shell tool call then the answer,
a refused key, and a turn limit reached after one tool call.

Aspects covered:
- ``gemini -p "" --output-format stream-json`` with the prompt on stdin, its home moved to
  the runner's directory (``GEMINI_CLI_HOME``, nothing else of the agent's moves), the
  workspace not trusted (``--skip-trust``: its settings are not loaded); an effort is
  ignored with a warning;
- the settings file: the API key as the auth method (a base URL would otherwise make it a
  "gateway", which a headless run refuses), the model, the turn limit as
  ``maxSessionTurns``, the retries as ``maxAttempts`` (capped at the CLI's 10), the
  allowed tools, the MCP servers with the pod's values, agentchain's alone trusted; no
  update check, no usage statistics; the standing instructions as the home's GEMINI.md;
- the answer is the text of the last turn, the tokens the result's (its total, and its
  input and output); a refused key maps to
  ``ModelAuthFailed`` by the status in Google's error body, a 429 after the CLI's retries
  by its words; ``FatalTurnLimitedError`` is
  ``TurnLimitReached`` with its usage; no result is ``AgentFailed``;
- each event becomes one log line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentchain.core.rules import runnerexits as exits
from agentchain.runtimes.rules import clis

RECORDED = Path(__file__).with_name("recorded")
HOME = "/run/x/gemini-home/.gemini"


def _lines(name: str) -> list[str]:
    return (RECORDED / f"gemini-{name}.jsonl").read_text().splitlines()


def _settings(**env: str) -> clis.Settings:
    return clis.settings_from({"AGENTCHAIN_RUNTIME": "gemini", **env}, "do it")


def _outcome(lines: list[str], returncode: int = 0) -> clis.Outcome:
    transcript = clis.Transcript("gemini")
    for line in lines:
        transcript.feed(line)
    return clis.outcome(transcript, returncode, "")


def test_gemini_command_and_its_environment() -> None:
    command = clis.command_for(_settings(AGENT_EFFORT="low"), {}, "/run/x/")
    assert command.argv == ["gemini", "-p", "", "--output-format", "stream-json", "--skip-trust"]
    assert command.env == {"GEMINI_CLI_HOME": "/run/x/gemini-home"}
    assert command.warnings == ["AGENT_EFFORT is ignored: gemini has no effort setting"]
    assert json.loads(command.files[f"{HOME}/settings.json"]) == {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
    }


def test_gemini_settings_with_every_setting() -> None:
    servers = json.dumps(
        {
            "agentchain": {"command": "agentchain", "args": ["mcp"], "env": ["AGENT_TOKEN"]},
            "tracker": {"command": "tracker-mcp", "args": [], "env": ["T", "UNSET"]},
        }
    )
    settings = _settings(
        AGENT_MODEL="gemini-2.5-pro",
        AGENTCHAIN_MAX_TURNS="4",
        AGENTCHAIN_MODEL_RETRIES="30",
        AGENTCHAIN_ALLOWED_TOOLS="run_shell_command(git), read_file",
        AGENTCHAIN_INSTRUCTIONS="Be brief.",
        AGENTCHAIN_MCP_SERVERS=servers,
    )
    command = clis.command_for(settings, {"AGENT_TOKEN": "tok", "T": "sek"}, "/run/x")
    assert command.files[f"{HOME}/GEMINI.md"] == "Be brief."
    config: dict[str, Any] = json.loads(command.files[f"{HOME}/settings.json"])
    assert config["model"] == {"name": "gemini-2.5-pro", "maxSessionTurns": 4}
    assert config["general"]["maxAttempts"] == 10  # The CLI's own cap.
    assert config["tools"] == {"allowed": ["run_shell_command(git)", "read_file"]}
    assert config["mcpServers"] == {
        "agentchain": {
            "command": "agentchain",
            "args": ["mcp"],
            "env": {"AGENT_TOKEN": "tok"},
            "trust": True,
        },
        "tracker": {"command": "tracker-mcp", "args": [], "env": {"T": "sek"}, "trust": False},
    }
    retries = clis.command_for(_settings(AGENTCHAIN_MODEL_RETRIES="0"), {}, "/run/x")
    assert json.loads(retries.files[f"{HOME}/settings.json"])["general"]["maxAttempts"] == 1


def test_gemini_answer_and_usage_from_a_recorded_run() -> None:
    assert _outcome(_lines("tool-call")) == clis.Outcome(
        0, answer="Checked.", tokens=240, turns=2, input_tokens=200, output_tokens=40
    )


def test_gemini_answer_is_the_last_turn_s_text_in_its_deltas() -> None:
    events = [
        {"type": "message", "role": "assistant", "content": "Let me check.", "delta": True},
        {"type": "tool_use", "tool_name": "read_file", "tool_id": "t", "parameters": {}},
        {"type": "tool_result", "tool_id": "t", "status": "success", "output": "x"},
        {"type": "message", "role": "assistant", "content": "Forty", "delta": True},
        {"type": "message", "role": "assistant", "content": "-two.", "delta": True},
        {"type": "result", "status": "success", "stats": {"input_tokens": 5, "output_tokens": 2}},
    ]
    outcome = _outcome([json.dumps(e) for e in events])
    assert outcome == clis.Outcome(
        0, answer="Forty-two.", tokens=7, turns=2, input_tokens=5, output_tokens=2
    )


def test_gemini_total_is_never_below_its_split() -> None:
    stats = {"total_tokens": 5, "input_tokens": 5, "output_tokens": 2}
    events = [
        {"type": "message", "role": "assistant", "content": "Done.", "delta": True},
        {"type": "result", "status": "success", "stats": stats},
    ]
    outcome = _outcome([json.dumps(e) for e in events])
    assert (outcome.tokens, outcome.input_tokens, outcome.output_tokens) == (7, 5, 2)


def test_gemini_bad_key_from_a_recorded_run() -> None:
    outcome = _outcome(_lines("bad-key"), returncode=145)
    assert outcome.exit_code == exits.EXIT_MODEL_AUTH
    assert outcome.message.startswith("the model provider refused the credentials: [API Error:")
    assert '"code":401' in outcome.message


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (429, exits.EXIT_MODEL_RATE_LIMITED),
        (503, exits.EXIT_MODEL_UNAVAILABLE),
        (400, exits.EXIT_MODEL_REQUEST_REJECTED),
    ],
)
def test_gemini_api_errors_map_by_the_code_in_google_s_body(status: int, code: int) -> None:
    lines = [line.replace('\\"code\\":401', f'\\"code\\":{status}') for line in _lines("bad-key")]
    assert _outcome(lines, returncode=145).exit_code == code


def test_gemini_rate_limit_after_its_retries_is_worded_without_the_body() -> None:
    # Gemini CLI 0.61's result after its last try of a 429: Google's body is gone.
    said = (
        "[API Error: Number of requests has exceeded your rate limit.]\nPlease wait and try "
        "again later. To increase your limits, request a quota increase through AI Studio, "
        "or switch to another /auth method"
    )
    result = {"type": "result", "status": "error", "error": {"type": "unknown", "message": said}}
    outcome = _outcome([json.dumps(result)], returncode=1)
    assert outcome.exit_code == exits.EXIT_MODEL_RATE_LIMITED


def test_gemini_turn_limit_from_a_recorded_run() -> None:
    outcome = _outcome(_lines("turn-limit"), returncode=53)
    assert outcome == clis.Outcome(
        exits.EXIT_TURN_LIMIT,
        message="the agent reached its turn limit: Reached max session turns for this "
        "session. Increase the number of turns by specifying maxSessionTurns in settings.json.",
        tokens=120,
        turns=1,
        input_tokens=100,
        output_tokens=20,
    )


def test_gemini_without_a_result_is_agent_failed() -> None:
    outcome = clis.outcome(clis.Transcript("gemini"), 41, "Invalid auth method selected.\n")
    assert outcome.message == (
        "the agent CLI failed without an answer: gemini exited 41: Invalid auth method selected."
    )


def test_gemini_log_lines() -> None:
    lines = [clis.log_line("gemini", json.loads(line)) for line in _lines("tool-call")]
    assert lines == [
        "[system] session started, model gemini-2.5-pro",
        None,
        '[tool call] run_shell_command {"command": "echo chec\\"\\"king"}',
        '[tool result] success "checking"',
        "[assistant] Checked.",
        "[result] success null",
    ]
