"""Gemini CLI driven by the in-pod runner alone (in a runner pod of its reference image, as
in ``e2e/test_agent_runner.py``), against the stand-in's Gemini API (``GOOGLE_GEMINI_BASE_URL``;
Gemini CLI takes http for ``127.0.0.1`` only), which validates every request and answer
against the ``google-genai`` types.

Runs through the operator (a store write through ``agentchain mcp``, a refused key) are
``e2e/test_runtime_jobs.py``'s, with the other runtimes. Aspects covered here, where
Gemini CLI behaves its own way:
- the workspace's own ``.gemini/settings.json`` (the repository's) is not loaded;
- a run that needs more turns than its limit ends ``TurnLimitReached`` with its usage
  reported;
- a 429 storm ends ``ModelRateLimited`` after exactly the tries ``AGENTCHAIN_MODEL_RETRIES``
  allows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentchain.core.rules import runnerexits as exits
from e2e.models import DEFAULT_API_KEY, ModelStandIn, failure, text, tool
from e2e.runtime_node import AgentDir, agent_host
from e2e.test_agent_runner import UsageSink, run_agent

MODEL = "gemini-2.5-pro"


@pytest.fixture
def usage_sink(request: pytest.FixtureRequest) -> Iterator[UsageSink]:
    with UsageSink(agent_host(request)) as sink:
        yield sink


def _run_gemini(agent_dir: AgentDir, standin: ModelStandIn, sink: UsageSink, **env: str) -> Any:
    provider = {
        "GOOGLE_GEMINI_BASE_URL": standin.url,
        "GEMINI_API_KEY": DEFAULT_API_KEY,
        "AGENT_MODEL": MODEL,
    }
    return run_agent(agent_dir, standin, sink.url, "gemini", **provider, **env)


def test_a_gemini_run_past_its_turn_limit_ends_turn_limit_reached(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.script(
        tool("run_shell_command", {"command": "echo checking"}), text("never asked for")
    )
    # The repository's settings would pick another model: they are not read.
    (agent_dir.path / ".gemini").mkdir()
    (agent_dir.path / ".gemini" / "settings.json").write_text('{"model": {"name": "theirs"}}')
    run = _run_gemini(
        agent_dir,
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
    split = {"inputTokens": 100, "outputTokens": 20}
    assert usage_sink.reports == [{"tokens": 120, "cost": 0.0, "turns": 1, **split}]


def test_a_gemini_rate_limit_storm_ends_model_rate_limited_after_its_tries(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.always(failure(429, retry_after=0))
    run = _run_gemini(agent_dir, model_standin, usage_sink, AGENTCHAIN_MODEL_RETRIES="1")
    assert (run.code, run.stdout) == (exits.EXIT_MODEL_RATE_LIMITED, ""), run.stderr
    assert run.last_line.startswith("the model provider kept rate-limiting the agent: ")
    assert [e.status for e in model_standin.exchanges()] == [429, 429]
