"""A job whose AiAgent names ``runtime: {type: claude-code}``, run through the operator.

The stand-in node runs the container's command as a host process (it ignores the image),
so the operator is started with the runner's command pointing at this tree
(``AGENTCHAIN_RUNTIME_COMMAND``) and the CLI setting at the cached Claude Code binary
(``AGENTCHAIN_RUNTIME_CLI_PATH``); the AiAgent's ``baseUrl`` is the stand-in model server.
Everything between is the product's: the operator builds the pod from ``spec.runtime``
(credentials from the Secret through ``secretKeyRef``), the real CLI calls the stand-in,
the runner reports usage to the job API with the job's token, and its exit code becomes
the job's reason.

Aspects covered:
- a run's tokens, cost and turns reach the job's ``status.usage``; the job succeeds with
  the answer in its result;
- a key the provider refuses (401) ends the job ``Failed`` with reason
  ``ModelAuthFailed``, shown by ``kubectl get aj -o wide``, and the runner's one-line
  message as the job's message;
- with ``mcp: true`` the CLI starts ``agentchain mcp`` from the runner's generated config
  (the job's own token in it) and a scripted call of its store_set tool is answered with
  the stored entry.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.models import DEFAULT_API_KEY, ModelStandIn, text, tool
from e2e.models.fixtures import agent_cli

ROOT = Path(__file__).resolve().parents[1]
MODEL = "claude-sonnet-4-5"
Obj = dict[str, Any]


@pytest.fixture
def runtime_operator(
    operator_paused: None, cluster_info: ClusterInfo
) -> Iterator[operating.OperatorProcess]:
    """An operator whose runtime pods run this tree's runner and the cached claude."""
    command = ["env", f"PYTHONPATH={ROOT / 'operator'}", sys.executable, "-m", "agentchain"]
    extra = {
        "AGENTCHAIN_RUNTIME_COMMAND": ",".join([*command, "agent", "run"]),
        "AGENTCHAIN_RUNTIME_CLI_PATH": str(agent_cli("claude-code")),
    }
    with operating.running(cluster_info, extra) as op:
        yield op


def _claude_code(secret: str, standin: ModelStandIn, home: Path, *, mcp: bool = False) -> Obj:
    """The spec fields of an agent running Claude Code against ``standin``, keyed by
    Secret ``secret``."""
    return {
        "defaultModel": MODEL,
        # A home of its own for the CLI's files, and no retries of a refused key.
        "env": [
            {"name": "HOME", "value": str(home)},
            {"name": "AGENTCHAIN_MODEL_RETRIES", "value": "0"},
            # MCP tools in the tool list itself, not behind Claude Code's ToolSearch.
            {"name": "ENABLE_TOOL_SEARCH", "value": "false"},
        ],
        "runtime": {
            "type": "claude-code",
            "maxTurns": 3,
            "baseUrl": standin.url,
            "credentials": {"secretName": secret, "key": "api-key"},
            "mcp": mcp,
        },
    }


def _secret(name: str, key: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "stringData": {"api-key": key},
    }


def test_a_claude_code_job_reports_usage_and_a_refused_key_says_why(
    runtime_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
    tmp_path: Path,
) -> None:
    model_standin.script(text("Six times seven is 42.", input_tokens=1000, output_tokens=200))
    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    chaining.apply(
        cluster_info,
        namespace,
        _secret("anthropic", DEFAULT_API_KEY),
        _secret("anthropic-wrong", "sk-wrong"),
        chaining.ai_agent(
            "claude",
            triggers=chaining.MANUAL,
            **_claude_code("anthropic", model_standin, tmp_path / "good"),
        ),
        chaining.ai_agent(
            "claude-bad",
            triggers=chaining.MANUAL,
            **_claude_code("anthropic-wrong", model_standin, tmp_path / "bad"),
        ),
    )
    chaining.apply(cluster_info, namespace, chaining.root_job("ask-1", "claude"))
    status = chaining.wait_phase(cluster_info, namespace, "ask-1", timeout=180)
    assert status["phase"] == "Succeeded", status
    assert "Six times seven is 42." in status["result"]
    # Claude Code prices claude-sonnet-4-5 at $3 / $15 per million input / output tokens.
    assert status["usage"] == {"tokens": 1200, "cost": pytest.approx(0.006), "turns": 1}

    chaining.apply(cluster_info, namespace, chaining.root_job("ask-2", "claude-bad"))
    status = chaining.wait_phase(cluster_info, namespace, "ask-2", timeout=180)
    assert (status["phase"], status["reason"]) == ("Failed", "ModelAuthFailed"), status
    assert status["exitCode"] == 80
    assert status["message"].startswith("the model provider refused the credentials: HTTP 401")
    wide = cluster_info.kubectl("get", "aj", "ask-2", "-n", namespace, "-o", "wide").stdout
    assert wide.splitlines()[1].split()[-1] == "ModelAuthFailed", wide


def test_a_claude_code_job_calls_the_agentchain_mcp_tools(
    runtime_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
    tmp_path: Path,
) -> None:
    entry = {"namespace": "notes", "key": "plan", "value": "from claude", "ttl_seconds": 600}
    model_standin.script(tool("mcp__agentchain__store_set", entry), text("Stored the plan."))
    chaining.apply(
        cluster_info,
        namespace,
        _secret("anthropic", DEFAULT_API_KEY),
        chaining.ai_agent(
            "claude-mcp",
            triggers=chaining.MANUAL,
            **_claude_code("anthropic", model_standin, tmp_path, mcp=True),
        ),
    )
    chaining.apply(cluster_info, namespace, chaining.root_job("ask-3", "claude-mcp"))
    status = chaining.wait_phase(cluster_info, namespace, "ask-3", timeout=180)
    assert status["phase"] == "Succeeded", status
    assert status["usage"]["turns"] == 2, status
    first, second = model_standin.exchanges("anthropic")
    assert "mcp__agentchain__store_set" in json.dumps(first.body["tools"])
    [result] = [
        block
        for message in second.body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert not result.get("is_error"), result
    assert "from claude" in json.dumps(result["content"])
