"""The OpenCode CLI driven by the in-pod runner alone (a host process, as in
``e2e/test_agent_runner.py``), against the stand-in model server's Chat Completions API.

Runs through the operator (a store write through ``agentchain mcp``, a refused key) are
``e2e/test_runtime_jobs.py``'s, with the other runtimes. Aspects covered here, where
OpenCode behaves its own way:
- a run that needs more turns than its limit gets OpenCode's forced summary step and ends
  with ``TurnLimitReached``, its usage still reported;
- a 429 storm ends, after OpenCode's own five retries, with ``ModelRateLimited``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agentchain.core.rules import runnerexits as exits
from e2e.models import DEFAULT_API_KEY, ModelStandIn, failure, text, tool
from e2e.runtime_node import AgentDir, agent_host
from e2e.test_agent_runner import UsageSink, run_agent

MODEL = "gpt-5"


@pytest.fixture
def usage_sink(request: pytest.FixtureRequest) -> Iterator[UsageSink]:
    with UsageSink(agent_host(request)) as sink:
        yield sink


def _run_opencode(agent_dir: AgentDir, standin: ModelStandIn, sink: UsageSink, **env: str) -> Any:
    provider = {
        "OPENAI_BASE_URL": f"{standin.url}/v1",
        "OPENAI_API_KEY": DEFAULT_API_KEY,
        "AGENT_MODEL": MODEL,
    }
    return run_agent(agent_dir, standin, sink.url, "opencode", **provider, **env)


def test_an_opencode_run_past_its_turn_limit_ends_turn_limit_reached(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.script(
        tool("bash", {"command": "echo checking", "description": "Check"}),
        text("Out of steps: the check ran, nothing else did."),
    )
    run = _run_opencode(agent_dir, model_standin, usage_sink, AGENTCHAIN_MAX_TURNS="1")
    assert (run.code, run.stdout) == (exits.EXIT_TURN_LIMIT, ""), run.stderr
    assert run.last_line == (
        "the agent reached its turn limit: used 1 turns without finishing: "
        "Out of steps: the check ran, nothing else did."
    )
    _, summary = model_standin.exchanges("chat")
    assert "MAXIMUM STEPS REACHED" in json.dumps(summary.body["messages"])
    split = {"inputTokens": 200, "outputTokens": 40}
    assert usage_sink.reports == [{"tokens": 240, "cost": 0.0, "turns": 2, **split}]
    assert usage_sink.answers == []


def test_an_opencode_rate_limit_storm_ends_model_rate_limited(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.always(failure(429, retry_after=0))
    run = _run_opencode(agent_dir, model_standin, usage_sink)
    assert (run.code, run.stdout) == (exits.EXIT_MODEL_RATE_LIMITED, ""), run.stderr
    assert run.last_line.startswith("the model provider kept rate-limiting the agent: HTTP 429")
    # OpenCode retries five times, as the provider's retry-after (0 here) says.
    assert [e.status for e in model_standin.exchanges()] == [429] * 6
