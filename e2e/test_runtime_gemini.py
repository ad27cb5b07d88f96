"""A job whose AiAgent names ``runtime: {type: gemini}``, run through the operator with
the real Gemini CLI.

As in ``e2e/test_runtime_opencode.py``: the stand-in node runs the container's command as
a host process (the image, which a gemini AiAgent must name while Gemini CLI has no
reference image, is not run), the runner is this tree's and the CLI the pinned
``@google/gemini-cli`` bundle e2e/setup.sh fetched (a Node program: Debian's node runs
it). The AiAgent's ``baseUrl`` is the stand-in's Gemini API (``GOOGLE_GEMINI_BASE_URL``;
Gemini CLI takes http for ``127.0.0.1`` only), which validates every request and answer
against the ``google-genai`` types.

Aspects covered:
- a scripted call of ``agentchain mcp``'s store_set tool (``mcp_agentchain_store_set`` to
  Gemini CLI) goes through the CLI and the MCP server to the job API: the entry is read
  back through the API; the job succeeds with the final answer as its result and the
  run's tokens and turns as its usage;
- a key the provider refuses (401) ends the job ``Failed`` with reason
  ``ModelAuthFailed``, shown by ``kubectl get aj -o wide``, with the runner's one-line
  message;
- the runner alone (a host process, as in ``e2e/test_agent_runner.py``): the workspace's
  own ``.gemini/settings.json`` (the repository's) is not loaded; a run that needs
  more turns than its limit ends ``TurnLimitReached`` with its usage reported; a 429
  storm ends ``ModelRateLimited`` after exactly the tries ``AGENTCHAIN_MODEL_RETRIES``
  allows.
"""

from __future__ import annotations

import json
import shutil
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentchain.core.rules import runnerexits as exits
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.models import DEFAULT_API_KEY, ModelStandIn, failure, text, tool
from e2e.models.fixtures import agent_cli
from e2e.test_agent_runner import UsageSink, run_agent

ROOT = Path(__file__).resolve().parents[1]
MODEL = "gemini-2.5-pro"
JOB_TIMEOUT_SECONDS = 35
Obj = dict[str, Any]


@pytest.fixture
def gemini_operator(
    operator_paused: None, cluster_info: ClusterInfo
) -> Iterator[operating.OperatorProcess]:
    """An operator whose runtime pods run this tree's runner and the pinned gemini."""
    if shutil.which("node") is None:
        pytest.skip("no node on PATH (run e2e/setup.sh)")
    command = ["env", f"PYTHONPATH={ROOT / 'operator'}", sys.executable, "-m", "agentchain"]
    extra = {
        "AGENTCHAIN_RUNTIME_COMMAND": ",".join([*command, "agent", "run"]),
        "AGENTCHAIN_RUNTIME_CLI_PATH": str(agent_cli("gemini")),
    }
    with operating.running(cluster_info, extra) as op:
        yield op


def _gemini(secret: str, standin: ModelStandIn, home: Path, *, mcp: bool) -> Obj:
    return {
        "image": "agentchain-gemini:e2e",  # The stand-in node runs no image.
        "defaultModel": MODEL,
        "env": [
            {"name": "HOME", "value": str(home)},
            # A refused key or a broken request fails at once, not after ten tries.
            {"name": "AGENTCHAIN_MODEL_RETRIES", "value": "0"},
        ],
        "runtime": {
            "type": "gemini",
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


def _api_get(op: operating.OperatorProcess, path: str, **query: str) -> Obj:
    """A job API read with the admin token."""
    url = f"{op.url}{path}?{urllib.parse.urlencode(query)}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {op.admin_token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: Obj = json.load(response)
    return answer


def test_a_gemini_job_writes_the_store_through_agentchain_mcp(
    gemini_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
    tmp_path: Path,
) -> None:
    entry = {"namespace": "notes", "key": "plan", "value": "from gemini", "ttl_seconds": 600}
    model_standin.script(tool("mcp_agentchain_store_set", entry), text("Stored the plan."))
    chaining.apply(
        cluster_info,
        namespace,
        _secret("gemini", DEFAULT_API_KEY),
        chaining.ai_agent(
            "gemini",
            triggers=chaining.MANUAL,
            **_gemini("gemini", model_standin, tmp_path, mcp=True),
        ),
    )
    chaining.apply(cluster_info, namespace, chaining.root_job("plan-1", "gemini"))
    status = chaining.wait_phase(cluster_info, namespace, "plan-1", timeout=JOB_TIMEOUT_SECONDS)
    assert status["phase"] == "Succeeded", status
    assert "Stored the plan." in status["result"]
    # The Gemini API reports tokens, not prices: the budget counts tokens.
    assert status["usage"] == {"tokens": 240, "cost": 0.0, "turns": 2}, status
    first, second = model_standin.exchanges("gemini")
    assert "mcp_agentchain_store_set" in json.dumps(first.body["tools"])
    responses = [
        part["functionResponse"]
        for content in second.body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]
    assert "from gemini" in json.dumps(responses), responses
    stored = _api_get(gemini_operator, "/api/store/notes/plan", tenant=namespace)
    assert stored["value"] == "from gemini", stored


def test_a_gemini_job_with_a_refused_key_says_why(
    gemini_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
    tmp_path: Path,
) -> None:
    chaining.apply(
        cluster_info,
        namespace,
        _secret("gemini-wrong", "sk-wrong"),
        chaining.ai_agent(
            "gemini-bad",
            triggers=chaining.MANUAL,
            **_gemini("gemini-wrong", model_standin, tmp_path, mcp=False),
        ),
    )
    chaining.apply(cluster_info, namespace, chaining.root_job("ask-bad", "gemini-bad"))
    status = chaining.wait_phase(cluster_info, namespace, "ask-bad", timeout=JOB_TIMEOUT_SECONDS)
    assert (status["phase"], status["reason"]) == ("Failed", "ModelAuthFailed"), status
    assert status["exitCode"] == 80
    assert status["message"].startswith("the model provider refused the credentials: ")
    assert '"code":401' in status["message"]
    assert [e.status for e in model_standin.exchanges()] == [401]
    wide = cluster_info.kubectl("get", "aj", "ask-bad", "-n", namespace, "-o", "wide").stdout
    assert wide.splitlines()[1].split()[-1] == "ModelAuthFailed", wide


@pytest.fixture
def usage_sink() -> Iterator[UsageSink]:
    with UsageSink() as sink:
        yield sink


def _run_gemini(tmp_path: Path, standin: ModelStandIn, sink: UsageSink, **env: str) -> Any:
    if shutil.which("node") is None:
        pytest.skip("no node on PATH (run e2e/setup.sh)")
    provider = {
        "GOOGLE_GEMINI_BASE_URL": standin.url,
        "GEMINI_API_KEY": DEFAULT_API_KEY,
        "AGENT_MODEL": MODEL,
    }
    return run_agent(tmp_path, standin, sink.url, "gemini", **provider, **env)


def test_a_gemini_run_past_its_turn_limit_ends_turn_limit_reached(
    tmp_path: Path, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.script(
        tool("run_shell_command", {"command": "echo checking"}), text("never asked for")
    )
    # The repository's settings would pick another model: they are not read.
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text('{"model": {"name": "theirs"}}')
    run = _run_gemini(
        tmp_path,
        model_standin,
        usage_sink,
        AGENTCHAIN_MAX_TURNS="1",
        AGENTCHAIN_ALLOWED_TOOLS="run_shell_command(echo)",
    )
    assert (run.code, run.stdout) == (exits.EXIT_TURN_LIMIT, ""), run.stderr
    assert run.last_line.startswith("the agent reached its turn limit: Reached max session turns")
    assert '[tool result] success "checking"' in run.stderr
    [request] = model_standin.exchanges()
    assert request.path == f"/v1beta/models/{MODEL}:streamGenerateContent"
    assert usage_sink.reports == [{"tokens": 120, "cost": 0.0, "turns": 1}]


def test_a_gemini_rate_limit_storm_ends_model_rate_limited_after_its_tries(
    tmp_path: Path, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.always(failure(429, retry_after=0))
    run = _run_gemini(tmp_path, model_standin, usage_sink, AGENTCHAIN_MODEL_RETRIES="1")
    assert (run.code, run.stdout) == (exits.EXIT_MODEL_RATE_LIMITED, ""), run.stderr
    assert run.last_line.startswith("the model provider kept rate-limiting the agent: ")
    assert [e.status for e in model_standin.exchanges()] == [429, 429]
