"""OpenCode in the runner's pure side (``runtimes/rules/clis.py``): its command, its config
file, and the reading of ``opencode run --format json``.

The event lines below are recorded from the real ``opencode`` 1.18.33 (``images/versions.env``)
run against the stand-in model server (``e2e/models``).

Aspects covered:
- ``opencode run --format json`` with the prompt left to stdin, the effort as its
  ``--variant``, its config file named by ``OPENCODE_CONFIG``, the repository's own config
  ignored, no update check, and a warning that the retries setting does not apply;
- the config file: a provider of its own at ``OPENAI_BASE_URL`` (key from
  ``OPENAI_API_KEY``, never its value) and its model, or the model as OpenCode's
  ``provider/model`` without one; no title request; the turn limit as the build agent's
  steps (one more: the last is OpenCode's forced summary); the allowed tools as the only
  permitted ones; the MCP servers with the pod's values; the standing instructions as a file;
- the answer is the last step's text, tokens and cost summed over the steps (the tokens
  split into input, the cache's included, and output, reasoning included); a provider
  error maps to its exit code by its status; a run that used the summary step past its
  limit is ``TurnLimitReached``, with its usage; no answer is ``AgentFailed``;
- each event becomes one log line.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentchain.core.rules import runnerexits as exits
from agentchain.runtimes.rules import clis

SESSION = "ses_de1373e16ffe2GY44UgGZzwMAl"
# A text answer: one step.
ANSWER_RUN = [
    '{"type":"step_start","timestamp":1795812811284,"sessionID":"ses_de1373e16ffe2GY44UgGZzwMAl","part":{"id":"prt_21ec8e1440013LeoOXaJPE5sAr","messageID":"msg_21ec8d19a001tDIBdZz5a82JLJ","sessionID":"ses_de1373e16ffe2GY44UgGZzwMAl","type":"step-start"}}',
    '{"type":"text","timestamp":1795812811285,"sessionID":"ses_de1373e16ffe2GY44UgGZzwMAl","part":{"id":"prt_21ec8e155001eLbLxTayeTT0W8","messageID":"msg_21ec8d19a001tDIBdZz5a82JLJ","sessionID":"ses_de1373e16ffe2GY44UgGZzwMAl","type":"text","text":"Forty-two.","time":{"start":1795812811093,"end":1795812811116}}}',
    '{"type":"step_finish","timestamp":1795812811285,"sessionID":"ses_de1373e16ffe2GY44UgGZzwMAl","part":{"id":"prt_21ec8e183001gU5Dskk7YRTvI9","reason":"stop","messageID":"msg_21ec8d19a001tDIBdZz5a82JLJ","sessionID":"ses_de1373e16ffe2GY44UgGZzwMAl","type":"step-finish","tokens":{"total":340,"input":300,"output":40,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}',
]
# A tool call (bash), then the answer: two steps. With steps 1 the second step is the
# summary OpenCode forces once the limit is reached.
TOOL_RUN = [
    '{"type":"step_start","timestamp":1795812836538,"sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","part":{"id":"prt_21ec94429001lefmeyCZz9OHCh","messageID":"msg_21ec9129e0010Fg7qH5Dz1uRl3","sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","type":"step-start"}}',
    '{"type":"tool_use","timestamp":1795812837286,"sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","part":{"type":"tool","tool":"bash","callID":"call_9e8d65ba2a10e199","state":{"status":"completed","input":{"command":"echo chec\\"\\"king","description":"Check"},"output":"checking\\n","metadata":{"output":"checking\\n","exit":0,"truncated":false},"title":"echo chec\\"\\"king","time":{"start":1795812836465,"end":1795812837002}},"id":"prt_21ec94442001QJeki8I9qklELR","sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","messageID":"msg_21ec9129e0010Fg7qH5Dz1uRl3"}}',  # noqa: E501
    '{"type":"step_finish","timestamp":1795812837286,"sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","part":{"id":"prt_21ec946c30019jDvXVDHwX7NZi","reason":"tool-calls","messageID":"msg_21ec9129e0010Fg7qH5Dz1uRl3","sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","type":"step-finish","tokens":{"total":120,"input":100,"output":20,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}',
    '{"type":"step_start","timestamp":1795812837687,"sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","part":{"id":"prt_21ec948d5001AZlr5zxxNN7wKo","messageID":"msg_21ec94776001pyuaeOJh4PzidU","sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","type":"step-start"}}',
    '{"type":"text","timestamp":1795812837687,"sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","part":{"id":"prt_21ec948da001F56NtF4LI0ER5f","messageID":"msg_21ec94776001pyuaeOJh4PzidU","sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","type":"text","text":"never","time":{"start":1795812837594,"end":1795812837600}}}',
    '{"type":"step_finish","timestamp":1795812837687,"sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","part":{"id":"prt_21ec948e6001s2z0EV86HQnmze","reason":"stop","messageID":"msg_21ec94776001pyuaeOJh4PzidU","sessionID":"ses_de136f5c9ffetXciLUrebQL9jA","type":"step-finish","tokens":{"total":120,"input":100,"output":20,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}',
]
# A refused key: no step, one error event, exit 1.
BAD_KEY_RUN = [
    '{"type":"error","timestamp":1795812903095,"sessionID":"ses_de135ce01ffehjUJgk7pu6g0g4","error":{"name":"APIError","data":{"message":"invalid x-api-key","statusCode":401,"isRetryable":false,"responseHeaders":{"content-length":"118","content-type":"application/json; charset=utf-8"},"responseBody":"{\\"error\\": {\\"message\\": \\"invalid x-api-key\\", \\"type\\": \\"invalid_request_error\\", \\"param\\": null, \\"code\\": \\"invalid_api_key\\"}}","metadata":{"url":"http://127.0.0.1:36087/v1/chat/completions"}}}}',  # noqa: E501
]


def _settings(**env: str) -> clis.Settings:
    return clis.settings_from({"AGENTCHAIN_RUNTIME": "opencode", **env}, "do it")


def _config(command: clis.Command) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(command.files["/run/x/opencode.json"])
    return config


def _outcome(lines: list[str], returncode: int = 0, max_turns: int | None = None) -> clis.Outcome:
    transcript = clis.Transcript("opencode", max_turns=max_turns)
    for line in lines:
        transcript.feed(line)
    return clis.outcome(transcript, returncode, "")


def test_opencode_command_and_its_environment() -> None:
    settings = _settings(AGENT_EFFORT="high", AGENTCHAIN_MODEL_RETRIES="0")
    command = clis.command_for(settings, {}, "/run/x/")
    assert command.argv == ["opencode", "run", "--format", "json", "--variant", "high"]
    assert command.env == {
        "OPENCODE_CONFIG": "/run/x/opencode.json",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    }
    assert command.warnings == [
        "AGENTCHAIN_MODEL_RETRIES is ignored: opencode retries a failed model request 5 "
        "times, as the provider's retry-after says"
    ]
    assert _config(command) == {
        "autoupdate": False,
        "share": "disabled",
        "agent": {"title": {"disable": True}},
    }


def test_opencode_config_with_a_model_server_and_every_setting() -> None:
    servers = json.dumps(
        {"agentchain": {"command": "agentchain", "args": ["mcp"], "env": ["AGENT_TOKEN", "NO"]}}
    )
    settings = _settings(
        AGENT_MODEL="gpt-5",
        OPENAI_BASE_URL="http://models.svc/v1",
        AGENTCHAIN_MAX_TURNS="3",
        AGENTCHAIN_ALLOWED_TOOLS="read, bash\nagentchain_*",
        AGENTCHAIN_INSTRUCTIONS="Be brief.",
        AGENTCHAIN_MCP_SERVERS=servers,
    )
    command = clis.command_for(settings, {"AGENT_TOKEN": "tok", "OPENAI_API_KEY": "sk-x"}, "/run/x")
    assert command.argv == ["opencode", "run", "--format", "json"]
    assert command.env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    assert command.files["/run/x/instructions.md"] == "Be brief."
    assert _config(command) == {
        "autoupdate": False,
        "share": "disabled",
        "agent": {"title": {"disable": True}, "build": {"steps": 4}},
        "provider": {
            "agentchain": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "agentchain",
                "options": {"baseURL": "http://models.svc/v1", "apiKey": "{env:OPENAI_API_KEY}"},
                "models": {"gpt-5": {"name": "gpt-5"}},
            }
        },
        "model": "agentchain/gpt-5",
        "permission": {"*": "deny", "read": "allow", "bash": "allow", "agentchain_*": "allow"},
        "instructions": ["/run/x/instructions.md"],
        "mcp": {
            "agentchain": {
                "type": "local",
                "command": ["agentchain", "mcp"],
                "environment": {"AGENT_TOKEN": "tok"},
            }
        },
    }
    # The key stays in the pod's environment: the file names it.
    assert "sk-x" not in "".join(command.files.values()) + " ".join(command.argv)


def test_opencode_without_a_model_server_uses_its_own_provider_model() -> None:
    settings = _settings(AGENT_MODEL="anthropic/claude-sonnet-4-5")
    command = clis.command_for(settings, {}, "/run/x")
    assert _config(command)["model"] == "anthropic/claude-sonnet-4-5"
    assert "provider" not in _config(command)
    assert "OPENCODE_DISABLE_MODELS_FETCH" not in command.env


def test_opencode_answer_and_usage_from_a_recorded_run() -> None:
    assert _outcome(ANSWER_RUN) == clis.Outcome(
        0, "Forty-two.", tokens=340, turns=1, input_tokens=300, output_tokens=40
    )
    # The last step's text is the answer; each step's tokens count.
    assert _outcome(TOOL_RUN, max_turns=2) == clis.Outcome(
        0, "never", tokens=240, turns=2, input_tokens=200, output_tokens=40
    )


def test_opencode_splits_its_tokens_with_the_cache_as_input_and_reasoning_as_output() -> None:
    line = TOOL_RUN[-1].replace(
        '"reasoning":0,"cache":{"write":0,"read":0}', '"reasoning":7,"cache":{"write":3,"read":5}'
    )
    outcome = _outcome([*TOOL_RUN[:-1], line], max_turns=2)
    assert (outcome.input_tokens, outcome.output_tokens) == (208, 47)
    assert outcome.tokens == 255


def test_opencode_cost_is_summed_over_the_steps() -> None:
    priced = [line.replace('"cost":0}', '"cost":0.0025}') for line in TOOL_RUN]
    assert _outcome(priced).cost == pytest.approx(0.005)


def test_opencode_turn_limit_is_the_summary_step_past_it() -> None:
    outcome = _outcome(TOOL_RUN, max_turns=1)
    assert outcome.exit_code == exits.EXIT_TURN_LIMIT
    assert outcome.message == (
        "the agent reached its turn limit: used 1 turns without finishing: never"
    )
    assert (outcome.tokens, outcome.turns, outcome.answer) == (240, 2, "")


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, exits.EXIT_MODEL_AUTH),
        (429, exits.EXIT_MODEL_RATE_LIMITED),
        (500, exits.EXIT_MODEL_UNAVAILABLE),
        (400, exits.EXIT_MODEL_REQUEST_REJECTED),
    ],
)
def test_opencode_provider_errors_map_by_their_status(status: int, code: int) -> None:
    line = BAD_KEY_RUN[0].replace('"statusCode":401', f'"statusCode":{status}')
    outcome = _outcome([line], returncode=1)
    assert outcome.exit_code == code
    assert f"HTTP {status}: invalid x-api-key" in outcome.message


def test_opencode_bad_key_from_a_recorded_run() -> None:
    outcome = _outcome(BAD_KEY_RUN, returncode=1)
    assert outcome == clis.Outcome(
        exits.EXIT_MODEL_AUTH,
        message="the model provider refused the credentials: HTTP 401: invalid x-api-key",
    )


def test_opencode_without_an_answer_is_agent_failed() -> None:
    outcome = _outcome(TOOL_RUN[:3], returncode=0)
    assert outcome.exit_code == exits.EXIT_AGENT_FAILED
    assert outcome.message.startswith("the agent CLI failed without an answer: opencode exited 0")
    assert outcome.tokens == 120


def test_opencode_log_lines() -> None:
    lines = [clis.log_line("opencode", json.loads(line)) for line in TOOL_RUN]
    assert lines == [
        None,
        '[tool call] bash {"command": "echo chec\\"\\"king", "description": "Check"}'
        ' | [tool result] "checking\\n"',
        '[step] tool-calls, tokens {"total": 120, "input": 100, "output": 20, "reasoning": 0,'
        ' "cache": {"write": 0, "read": 0}}',
        None,
        "[assistant] never",
        '[step] stop, tokens {"total": 120, "input": 100, "output": 20, "reasoning": 0,'
        ' "cache": {"write": 0, "read": 0}}',
    ]
    assert clis.log_line("opencode", json.loads(BAD_KEY_RUN[0])) is not None
