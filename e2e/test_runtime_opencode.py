"""A job whose AiAgent names ``runtime: {type: opencode}``, run through the operator with
the real OpenCode CLI.

As in ``e2e/test_runtime_jobs.py``, the stand-in node runs the container's command as a
host process (it ignores the image, which an opencode AiAgent must name while OpenCode has
no reference image): the operator's runner command points at this tree and its CLI setting
at the pinned ``opencode`` binary e2e/setup.sh fetched. The AiAgent's ``baseUrl`` is the
stand-in model server's Chat Completions API, which validates every request and answer
against the ``openai`` SDK's types. Everything between is the product's: the pod built
from ``spec.runtime``, the runner's OpenCode config (its own provider, ``agentchain mcp``
with the job's token), usage reported with the job's token, the exit code as the reason.

Aspects covered:
- a scripted call of ``agentchain mcp``'s store_set tool goes through OpenCode and the MCP
  server to the job API: the entry is in the store, read back through the API; the job
  succeeds with the final answer as its result and the run's tokens and turns as its usage;
- a key the provider refuses (401) ends the job ``Failed`` with reason
  ``ModelAuthFailed``, shown by ``kubectl get aj -o wide``, with the runner's one-line
  message;
- the runner alone (a host process, as in ``e2e/test_agent_runner.py``): a run that needs
  more turns than its limit gets OpenCode's forced summary step and ends with
  ``TurnLimitReached``, its usage still reported; a 429 storm ends, after OpenCode's own
  five retries, with ``ModelRateLimited``.
"""

from __future__ import annotations

import json
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
MODEL = "gpt-5"
JOB_TIMEOUT_SECONDS = 35
Obj = dict[str, Any]


@pytest.fixture
def opencode_operator(
    operator_paused: None, cluster_info: ClusterInfo
) -> Iterator[operating.OperatorProcess]:
    """An operator whose runtime pods run this tree's runner and the pinned opencode."""
    command = ["env", f"PYTHONPATH={ROOT / 'operator'}", sys.executable, "-m", "agentchain"]
    extra = {
        "AGENTCHAIN_RUNTIME_COMMAND": ",".join([*command, "agent", "run"]),
        "AGENTCHAIN_RUNTIME_CLI_PATH": str(agent_cli("opencode")),
    }
    with operating.running(cluster_info, extra) as op:
        yield op


def _opencode(secret: str, standin: ModelStandIn, home: Path, *, mcp: bool) -> Obj:
    """The spec fields of an agent running OpenCode against ``standin``."""
    return {
        "image": "agentchain-opencode:e2e",  # The stand-in node runs no image.
        "defaultModel": MODEL,
        # A home of its own for the CLI's database and logs.
        "env": [{"name": "HOME", "value": str(home)}],
        "runtime": {
            "type": "opencode",
            "maxTurns": 3,
            "baseUrl": f"{standin.url}/v1",
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


def test_an_opencode_job_writes_the_store_through_agentchain_mcp(
    opencode_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
    tmp_path: Path,
) -> None:
    entry = {"namespace": "notes", "key": "plan", "value": "from opencode", "ttl_seconds": 600}
    model_standin.script(tool("agentchain_store_set", entry), text("Stored the plan."))
    chaining.apply(
        cluster_info,
        namespace,
        _secret("openai", DEFAULT_API_KEY),
        chaining.ai_agent(
            "opencode",
            triggers=chaining.MANUAL,
            **_opencode("openai", model_standin, tmp_path, mcp=True),
        ),
    )
    chaining.apply(cluster_info, namespace, chaining.root_job("plan-1", "opencode"))
    status = chaining.wait_phase(cluster_info, namespace, "plan-1", timeout=JOB_TIMEOUT_SECONDS)
    assert status["phase"] == "Succeeded", status
    assert "Stored the plan." in status["result"]
    # OpenCode reports no cost for a model it has no price for; the tokens still count.
    assert status["usage"] == {"tokens": 240, "cost": 0.0, "turns": 2}, status
    first, second = model_standin.exchanges("chat")
    assert "agentchain_store_set" in json.dumps(first.body["tools"])
    [result] = [m for m in second.body["messages"] if m.get("role") == "tool"]
    assert "from opencode" in json.dumps(result["content"]), result
    stored = _api_get(opencode_operator, "/api/store/notes/plan", tenant=namespace)
    assert stored["value"] == "from opencode", stored


def test_an_opencode_job_with_a_refused_key_says_why(
    opencode_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
    tmp_path: Path,
) -> None:
    chaining.apply(
        cluster_info,
        namespace,
        _secret("openai-wrong", "sk-wrong"),
        chaining.ai_agent(
            "opencode-bad",
            triggers=chaining.MANUAL,
            **_opencode("openai-wrong", model_standin, tmp_path, mcp=False),
        ),
    )
    chaining.apply(cluster_info, namespace, chaining.root_job("ask-bad", "opencode-bad"))
    status = chaining.wait_phase(cluster_info, namespace, "ask-bad", timeout=JOB_TIMEOUT_SECONDS)
    assert (status["phase"], status["reason"]) == ("Failed", "ModelAuthFailed"), status
    assert status["exitCode"] == 80
    assert status["message"] == (
        "the model provider refused the credentials: HTTP 401: invalid x-api-key"
    )
    assert [e.status for e in model_standin.exchanges()] == [401]
    wide = cluster_info.kubectl("get", "aj", "ask-bad", "-n", namespace, "-o", "wide").stdout
    assert wide.splitlines()[1].split()[-1] == "ModelAuthFailed", wide


@pytest.fixture
def usage_sink() -> Iterator[UsageSink]:
    with UsageSink() as sink:
        yield sink


def _run_opencode(tmp_path: Path, standin: ModelStandIn, sink: UsageSink, **env: str) -> Any:
    provider = {
        "OPENAI_BASE_URL": f"{standin.url}/v1",
        "OPENAI_API_KEY": DEFAULT_API_KEY,
        "AGENT_MODEL": MODEL,
    }
    return run_agent(tmp_path, standin, sink.url, "opencode", **provider, **env)


def test_an_opencode_run_past_its_turn_limit_ends_turn_limit_reached(
    tmp_path: Path, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.script(
        tool("bash", {"command": "echo checking", "description": "Check"}),
        text("Out of steps: the check ran, nothing else did."),
    )
    run = _run_opencode(tmp_path, model_standin, usage_sink, AGENTCHAIN_MAX_TURNS="1")
    assert (run.code, run.stdout) == (exits.EXIT_TURN_LIMIT, ""), run.stderr
    assert run.last_line == (
        "the agent reached its turn limit: used 1 turns without finishing: "
        "Out of steps: the check ran, nothing else did."
    )
    _, summary = model_standin.exchanges("chat")
    assert "MAXIMUM STEPS REACHED" in json.dumps(summary.body["messages"])
    assert usage_sink.reports == [{"tokens": 240, "cost": 0.0, "turns": 2}]
    assert usage_sink.answers == []


def test_an_opencode_rate_limit_storm_ends_model_rate_limited(
    tmp_path: Path, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.always(failure(429, retry_after=0))
    run = _run_opencode(tmp_path, model_standin, usage_sink)
    assert (run.code, run.stdout) == (exits.EXIT_MODEL_RATE_LIMITED, ""), run.stderr
    assert run.last_line.startswith("the model provider kept rate-limiting the agent: HTTP 429")
    # OpenCode retries five times, as the provider's retry-after (0 here) says.
    assert [e.status for e in model_standin.exchanges()] == [429] * 6
