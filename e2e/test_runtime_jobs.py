"""Jobs whose AiAgent names a CLI runtime, run through the operator with the real CLI.

One table row per runtime (Claude Code, OpenCode, Gemini CLI): the same tests run for
each, since what the operator promises does not depend on the CLI. Each job runs in its
runtime's reference image on the real node (``images/agent/Dockerfile``; the operator is
told the images, ``AGENTCHAIN_RUNTIME_IMAGE_*``, by ``e2e/runtime_node.py``), with the
image's runner and CLI. The AiAgent's ``baseUrl`` is the stand-in model server, which
checks every request and answer against the provider's official SDK types. Everything
between is the product's: the pod built from ``spec.runtime`` (credentials through
``secretKeyRef``), the runner's CLI config with ``agentchain mcp`` and the job's token,
usage reported with that token, the exit code as the job's reason.

Aspects covered, for every runtime:
- a scripted call of ``agentchain mcp``'s store_set tool (each CLI names it its own way)
  goes through the CLI and the MCP server to the job API: the entry is read back through
  the API, the tool's answer reaches the model, and the job succeeds with the final
  answer as its result and the run's tokens, cost and turns as its usage;
- a key the provider refuses (401) ends the job ``Failed`` with reason
  ``ModelAuthFailed``, shown by ``kubectl get aj -o wide``, after one request, with the
  runner's one-line message as the job's message.

Each CLI's own behaviour (turn limits, rate-limit storms, workspace settings) is tested
through the runner alone, in ``e2e/test_agent_runner.py``, ``e2e/test_runtime_opencode.py``
and ``e2e/test_runtime_gemini.py``.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.models import DEFAULT_API_KEY, ModelStandIn, text, tool
from e2e.runtime_node import reference_images

JOB_TIMEOUT_SECONDS = 60
Obj = dict[str, Any]


def _anthropic_tool_results(body: Obj) -> list[Any]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def _chat_tool_results(body: Obj) -> list[Any]:
    return [m["content"] for m in body["messages"] if m.get("role") == "tool"]


def _gemini_tool_results(body: Obj) -> list[Any]:
    return [
        part["functionResponse"]
        for content in body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]


@dataclass(frozen=True)
class Runtime:
    """How one CLI runtime is declared and what it sends the stand-in."""

    type: str  # spec.runtime.type, and the CLI's name in the npm cache
    api: str  # the stand-in API the CLI speaks
    model: str
    provider: str  # the credential Secret's name
    tool: str  # the name the CLI gives agentchain mcp's store_set tool
    tool_results: Callable[[Obj], list[Any]]
    usage: Obj  # status.usage of the scripted store write (tool call, then answer)
    base_path: str = ""  # appended to the stand-in's URL for spec.runtime.baseUrl


SPLIT = {"inputTokens": 200, "outputTokens": 40}
"""The scripted answers' input and output tokens, which every CLI reports apart."""

RUNTIMES = [
    Runtime(
        "claude-code",
        "anthropic",
        "claude-sonnet-4-5",
        "anthropic",
        "mcp__agentchain__store_set",
        _anthropic_tool_results,
        # Claude Code prices claude-sonnet-4-5 at $3 / $15 per million input / output tokens.
        {"tokens": 240, "cost": pytest.approx(0.0012), "turns": 2, **SPLIT},
    ),
    Runtime(
        "opencode",
        "chat",
        "gpt-5",
        "openai",
        "agentchain_store_set",
        _chat_tool_results,
        # OpenCode reports no cost for a model it has no price for; the tokens still count.
        {"tokens": 240, "cost": 0.0, "turns": 2, **SPLIT},
        base_path="/v1",
    ),
    Runtime(
        "gemini",
        "gemini",
        "gemini-2.5-pro",
        "gemini",
        "mcp_agentchain_store_set",
        _gemini_tool_results,
        # The Gemini API reports tokens, not prices: the budget counts tokens.
        {"tokens": 240, "cost": 0.0, "turns": 2, **SPLIT},
    ),
]


@pytest.fixture(params=RUNTIMES, ids=[r.type for r in RUNTIMES])
def runtime(request: pytest.FixtureRequest) -> Runtime:
    chosen: Runtime = request.param
    return chosen


@pytest.fixture
def runtime_operator(
    runtime: Runtime, operator_paused: None, cluster_info: ClusterInfo
) -> Iterator[operating.OperatorProcess]:
    """An operator whose runtime pods run the runtime's reference image."""
    extra = reference_images(cluster_info, (runtime.type,))
    with operating.running(cluster_info, extra) as op:
        yield op


def _agent(runtime: Runtime, secret: str, standin: ModelStandIn, *, mcp: bool) -> Obj:
    """The spec fields of an agent running ``runtime`` against ``standin``, keyed by
    Secret ``secret``. It names no image: the operator's reference image for the runtime
    is the one it runs in."""
    env = [
        # A refused key or a broken request fails at once, not after ten tries.
        {"name": "AGENTCHAIN_MODEL_RETRIES", "value": "0"},
        # Claude Code's MCP tools in the tool list itself, not behind its ToolSearch.
        {"name": "ENABLE_TOOL_SEARCH", "value": "false"},
    ]
    return {
        "defaultModel": runtime.model,
        "env": env,
        "runtime": {
            "type": runtime.type,
            "maxTurns": 3,
            "baseUrl": f"{standin.url}{runtime.base_path}",
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


def test_a_job_writes_the_store_through_agentchain_mcp(
    runtime: Runtime,
    runtime_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
) -> None:
    value = f"from {runtime.type}"
    entry = {"namespace": "notes", "key": "plan", "value": value, "ttl_seconds": 600}
    model_standin.script(tool(runtime.tool, entry), text("Stored the plan."))
    chaining.apply(
        cluster_info,
        namespace,
        _secret(runtime.provider, DEFAULT_API_KEY),
        chaining.ai_agent(
            "agent",
            triggers=chaining.MANUAL,
            **_agent(runtime, runtime.provider, model_standin, mcp=True),
        ),
    )
    chaining.apply(cluster_info, namespace, chaining.root_job("plan-1", "agent"))
    status = chaining.wait_phase(cluster_info, namespace, "plan-1", timeout=JOB_TIMEOUT_SECONDS)
    assert status["phase"] == "Succeeded", status
    assert "Stored the plan." in status["result"]
    assert status["usage"] == runtime.usage, status
    first, second = model_standin.exchanges(runtime.api)
    assert runtime.tool in json.dumps(first.body["tools"])
    [result] = runtime.tool_results(second.body)
    assert value in json.dumps(result), result
    assert not (isinstance(result, dict) and result.get("is_error")), result
    stored = _api_get(runtime_operator, "/api/store/notes/plan", tenant=namespace)
    assert stored["value"] == value, stored


def test_a_job_with_a_refused_key_says_why(
    runtime: Runtime,
    runtime_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
) -> None:
    chaining.apply(
        cluster_info,
        namespace,
        _secret("wrong", "sk-wrong"),
        chaining.ai_agent(
            "agent-bad",
            triggers=chaining.MANUAL,
            **_agent(runtime, "wrong", model_standin, mcp=False),
        ),
    )
    chaining.apply(cluster_info, namespace, chaining.root_job("ask-bad", "agent-bad"))
    status = chaining.wait_phase(cluster_info, namespace, "ask-bad", timeout=JOB_TIMEOUT_SECONDS)
    assert (status["phase"], status["reason"]) == ("Failed", "ModelAuthFailed"), status
    assert status["exitCode"] == 80
    assert status["message"].startswith("the model provider refused the credentials: ")
    assert "401" in status["message"], status
    assert [e.status for e in model_standin.exchanges()] == [401]
    wide = cluster_info.kubectl("get", "aj", "ask-bad", "-n", namespace, "-o", "wide").stdout
    assert wide.splitlines()[1].split()[-1] == "ModelAuthFailed", wide
