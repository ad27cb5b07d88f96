"""The in-pod runner (``agentchain agent run``) driving the real Claude Code and codex CLIs.

No operator: the runner runs in its runtime's reference image, in an idle runner pod on
the real node (``e2e/runtime_node.py``, ``kubectl exec``), with the image's CLI pointed
at the stand-in model server (``ANTHROPIC_BASE_URL``), and
reports usage to a small job-API endpoint that checks the body with the operator's own
``UsageReport`` schema and the job's token. Every request the CLI sends and every answer
the stand-in gives is checked against the official SDKs' types (``e2e/models``).

Aspects covered:
- a text answer: stdout is exactly the answer, the transcript is on stderr, the model
  and turn limit reach the CLI, tokens (their total, and the input and output they split
  into) and cost are reported once with the job's token,
  and the answer alone is handed over once, with the job's token, for its attempt;
  a failed run hands nothing over;
- a bad key (401), a 429 storm after the CLI's retries, a provider 500 and a turn limit
  each end with their own exit code and a one-line message as the last line of stderr,
  nothing on stdout; usage already spent before a turn limit is still reported;
- an unreachable usage API does not change the outcome of a run;
- a tool call round trip (Claude Code's ``Bash``, codex's ``exec_command``): the CLI runs
  the command, sends its output back, and the next answer is the final one;
- codex (``codex exec --json``, a provider declared with ``base_url`` and
  ``wire_api = "responses"``): the answer alone on stdout, its tokens reported (it reports
  no cost), and a bad key, a 429 storm and a 500 each with their own exit code;
- codex waits for the registered MCP servers: its first request already lists
  ``agentchain mcp``'s tools.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pydantic
import pytest
from aiohttp import web

from agentchain.core.rules import runnerexits as exits
from agentchain.web.schemas import AnswerHandover, UsageReport
from e2e.github.threaded import ThreadedSite
from e2e.models import DEFAULT_API_KEY, Failure, ModelStandIn, Reply, failure, text, tool
from e2e.runtime_node import AgentDir, agent_host

JOB_TOKEN = "job-token-of-triage-1"
NAMESPACE, JOB = "team-a", "triage-1"
MODEL = "claude-sonnet-4-5"
RUN_TIMEOUT_SECONDS = 120


class UsageSink:
    """The job API's usage and answer routes as the runner sees them: token, path and
    body checked."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.reports: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        app = web.Application()
        app.router.add_post("/api/jobs/{namespace}/{name}/usage", self._usage)
        app.router.add_put("/api/jobs/{namespace}/{name}/answer", self._answer)
        self._site = ThreadedSite(app, "usage-sink", host=host)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._site.port}"

    async def _usage(self, request: web.Request) -> web.Response:
        where = (request.match_info["namespace"], request.match_info["name"])
        if request.headers.get("Authorization") != f"Bearer {JOB_TOKEN}" or where != (
            NAMESPACE,
            JOB,
        ):
            return web.json_response({"error": "forbidden"}, status=403)
        body = await request.json()
        try:
            report = UsageReport.model_validate(body)
        except pydantic.ValidationError as error:
            return web.json_response({"error": str(error)}, status=422)
        with self._lock:
            self.reports.append(body)
        job = {"tokens": report.tokens, "cost": report.cost, "turns": report.turns}
        return web.json_response(
            {"job": job, "chain": dict(job, attempts=1), "currency": "USD", "budgetExceeded": None}
        )

    async def _answer(self, request: web.Request) -> web.Response:
        where = (request.match_info["namespace"], request.match_info["name"])
        if request.headers.get("Authorization") != f"Bearer {JOB_TOKEN}" or where != (
            NAMESPACE,
            JOB,
        ):
            return web.json_response({"error": "forbidden"}, status=403)
        body = await request.json()
        try:
            AnswerHandover.model_validate(body, strict=True)
        except pydantic.ValidationError as error:
            return web.json_response({"error": str(error)}, status=422)
        with self._lock:
            self.answers.append(body)
        return web.json_response({"id": JOB, "namespace": NAMESPACE, "stored": True})

    def __enter__(self) -> UsageSink:
        self._site.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._site.stop()


@pytest.fixture
def usage_sink(request: pytest.FixtureRequest) -> Iterator[UsageSink]:
    """The job API's stand-in, listening where the runner reaches it."""
    with UsageSink(agent_host(request)) as sink:
        yield sink


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def last_line(self) -> str:
        return self.stderr.rstrip("\n").rsplit("\n", 1)[-1]


def _runtime_env(runtime: str, home: str, models: ModelStandIn) -> dict[str, str]:
    """How each CLI is pointed at the stand-in: its documented base-URL settings."""
    if runtime == "codex":
        return {
            "CODEX_HOME": f"{home}/.codex",
            "OPENAI_BASE_URL": f"{models.url}/v1",
            "OPENAI_API_KEY": DEFAULT_API_KEY,
            "AGENT_MODEL": "gpt-5",
        }
    return {
        "ANTHROPIC_BASE_URL": models.url,
        "ANTHROPIC_API_KEY": DEFAULT_API_KEY,
        "AGENT_MODEL": MODEL,
    }


def run_agent(
    where: AgentDir,
    models: ModelStandIn,
    api_url: str,
    runtime: str = "claude-code",
    **settings: str,
) -> Run:
    """The runner with ``runtime``'s CLI in ``where``: the reference image's, in a runner
    pod."""
    (where.path / "home" / ".codex").mkdir(parents=True, exist_ok=True)
    (where.path / "prompt").write_text("What is six times seven?\n")
    # The run's directory as the runner sees it: the pod's copy of ``where.path``.
    base = "{dir}"
    env = {
        "HOME": f"{base}/home",
        **_runtime_env(runtime, f"{base}/home", models),
        "AGENTCHAIN_RUNTIME": runtime,
        "AGENTCHAIN_MODEL_RETRIES": "0",
        "AGENT_PROMPT_FILE": f"{base}/prompt",
        "AGENT_PROMPT": "(see the file)",
        "AGENT_API_URL": api_url,
        "AGENT_TOKEN": JOB_TOKEN,
        "AGENT_NAMESPACE": NAMESPACE,
        "AGENT_JOB": JOB,
        **settings,
    }
    ran, _ = where.pods.run(runtime, where.path, env, RUN_TIMEOUT_SECONDS)
    return Run(ran.code, ran.stdout, ran.stderr)


def test_text_answer_is_the_only_stdout_and_usage_is_reported(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.script(text("Six times seven is 42.", input_tokens=1000, output_tokens=200))
    run = run_agent(agent_dir, model_standin, usage_sink.url, AGENTCHAIN_MAX_TURNS="3")
    assert (run.code, run.stdout) == (0, "Six times seven is 42.\n"), run.stderr
    assert "[assistant] Six times seven is 42." in run.stderr
    [request] = model_standin.exchanges("anthropic")
    assert request.body["model"] == MODEL and request.query == "beta=true"
    assert "What is six times seven?" in str(request.body["messages"])
    # Claude Code prices claude-sonnet-4-5 at $3 / $15 per million input / output tokens.
    split = {"inputTokens": 1000, "outputTokens": 200}  # The GenAI conventions' two counts.
    assert usage_sink.reports == [
        {"tokens": 1200, "cost": pytest.approx(0.006), "turns": 1, **split}
    ]
    assert usage_sink.answers == [{"answer": "Six times seven is 42.", "attempt": 1}]
    assert "[runner] answer handed over" in run.stderr


def test_bad_key_ends_with_model_auth_failed(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    run = run_agent(agent_dir, model_standin, usage_sink.url, ANTHROPIC_API_KEY="sk-wrong")
    assert (run.code, run.stdout) == (exits.EXIT_MODEL_AUTH, ""), run.stderr
    assert run.last_line.startswith("the model provider refused the credentials: ")
    assert "HTTP 401 authentication_error: " in run.last_line
    assert [e.status for e in model_standin.exchanges()] == [401]
    assert usage_sink.reports == []  # Nothing was used: nothing to report.
    assert usage_sink.answers == []  # No answer: the log says why.


def test_rate_limit_storm_ends_with_model_rate_limited_after_the_retries(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.always(failure(429, retry_after=0))
    run = run_agent(agent_dir, model_standin, usage_sink.url, AGENTCHAIN_MODEL_RETRIES="2")
    assert (run.code, run.stdout) == (exits.EXIT_MODEL_RATE_LIMITED, ""), run.stderr
    assert run.last_line.startswith(
        "the model provider kept rate-limiting the agent: HTTP 429 rate_limit_error: "
    )
    assert [e.status for e in model_standin.exchanges()] == [429, 429, 429]


def test_provider_error_ends_with_model_unavailable(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.always(failure(500, "Internal server error"))
    run = run_agent(agent_dir, model_standin, usage_sink.url)
    assert (run.code, run.stdout) == (exits.EXIT_MODEL_UNAVAILABLE, ""), run.stderr
    assert run.last_line.startswith("the model provider failed or could not be reached: ")
    assert "HTTP 500 api_error: " in run.last_line


def test_turn_limit_ends_with_turn_limit_reached_and_reports_what_it_used(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.script(
        tool("Bash", {"command": "echo checking", "description": "Check"}),
        text("never asked for"),
    )
    run = run_agent(
        agent_dir,
        model_standin,
        usage_sink.url,
        AGENTCHAIN_MAX_TURNS="1",
        AGENTCHAIN_ALLOWED_TOOLS="Bash(echo:*)",
    )
    assert (run.code, run.stdout) == (exits.EXIT_TURN_LIMIT, ""), run.stderr
    assert run.last_line == (
        "the agent reached its turn limit: Reached maximum number of turns (1)"
    )
    assert '[tool call] Bash {"command": "echo checking"' in run.stderr
    assert len(model_standin.exchanges()) == 1
    # Claude Code counts the turn it was refused as one more (2 with --max-turns 1).
    split = {"inputTokens": 100, "outputTokens": 20}
    assert usage_sink.reports == [
        {"tokens": 120, "cost": pytest.approx(0.0006), "turns": 2, **split}
    ]


def test_unreachable_usage_api_does_not_change_the_outcome(
    agent_dir: AgentDir, model_standin: ModelStandIn
) -> None:
    model_standin.script(text("Still 42."))
    run = run_agent(agent_dir, model_standin, "http://127.0.0.1:9")
    assert (run.code, run.stdout) == (0, "Still 42.\n"), run.stderr
    assert "[runner] usage not reported after 3 attempts" in run.stderr


def test_codex_text_answer_is_the_only_stdout_and_tokens_are_reported(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    model_standin.script(text("Forty-two.", input_tokens=300, output_tokens=40))
    run = run_agent(agent_dir, model_standin, usage_sink.url, "codex")
    assert (run.code, run.stdout) == (0, "Forty-two.\n"), run.stderr
    [request] = model_standin.exchanges("responses")
    assert request.body["model"] == "gpt-5" and request.body["stream"] is True
    assert "What is six times seven?" in str(request.body["input"])
    # codex reports tokens but no cost: the budget's tokens still count.
    split = {"inputTokens": 300, "outputTokens": 40}
    assert usage_sink.reports == [{"tokens": 340, "cost": 0.0, "turns": 1, **split}]


@pytest.mark.parametrize(
    ("answer", "retries", "code", "requests"),
    [
        (None, "0", exits.EXIT_MODEL_AUTH, 1),  # the key is wrong
        (failure(429, retry_after=0), "1", exits.EXIT_MODEL_RATE_LIMITED, 2),
        (failure(500), "0", exits.EXIT_MODEL_UNAVAILABLE, 1),
    ],
    ids=["401", "429-storm", "500"],
)
def test_codex_provider_errors_end_with_their_codes(
    agent_dir: AgentDir,
    model_standin: ModelStandIn,
    usage_sink: UsageSink,
    answer: Failure | None,
    retries: str,
    code: int,
    requests: int,
) -> None:
    model_standin.always(answer)
    key = {"OPENAI_API_KEY": "sk-wrong"} if answer is None else {}
    run = run_agent(
        agent_dir, model_standin, usage_sink.url, "codex", AGENTCHAIN_MODEL_RETRIES=retries, **key
    )
    assert (run.code, run.stdout) == (code, ""), run.stderr
    reason = exits.reason_of_exit(code)
    assert reason is not None and run.last_line.startswith(f"{reason.summary}: ")
    assert len(model_standin.exchanges()) == requests


def _tool_outputs(body: dict[str, Any]) -> list[Any]:
    """What a request sends back of tool calls: Anthropic's ``tool_result`` blocks or the
    Responses API's ``function_call_output`` items."""
    outputs = [
        item.get("output")
        for item in body.get("input") or []
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    for message in body.get("messages") or []:
        content = message.get("content")
        outputs += [
            block.get("content")
            for block in content
            if isinstance(content, list) and block.get("type") == "tool_result"
        ]
    return outputs


@pytest.mark.parametrize(
    ("runtime", "call"),
    [
        ("claude-code", tool("Bash", {"command": 'echo chec""king', "description": "Check"})),
        ("codex", tool("exec_command", {"cmd": 'echo chec""king'})),
    ],
)
def test_a_tool_call_round_trip_then_the_answer(
    agent_dir: AgentDir,
    model_standin: ModelStandIn,
    usage_sink: UsageSink,
    runtime: str,
    call: Reply,
) -> None:
    model_standin.script(call, text("Checked: all good."))
    run = run_agent(
        agent_dir,
        model_standin,
        usage_sink.url,
        runtime,
        AGENTCHAIN_MAX_TURNS="3",
        AGENTCHAIN_ALLOWED_TOOLS="Bash(echo:*)",
    )
    assert (run.code, run.stdout) == (0, "Checked: all good.\n"), run.stderr
    _, second = model_standin.exchanges()
    # The second request carries the tool's output back: the CLI really ran it (the call
    # itself says chec""king, only the shell's output says checking).
    assert "checking" in str(_tool_outputs(second.body))
    [report] = usage_sink.reports
    assert report["tokens"] == 240


def test_codex_waits_for_its_mcp_servers_before_the_first_request(
    agent_dir: AgentDir, model_standin: ModelStandIn, usage_sink: UsageSink
) -> None:
    """codex exec does not wait for an MCP server still starting: without ``required``
    the first request (often the only one) went out without ``agentchain mcp``'s tools."""
    model_standin.script(text("Nothing to do."))
    names = ["AGENT_API_URL", "AGENT_TOKEN", "AGENT_NAMESPACE", "AGENT_JOB", "AGENT_CHAIN_ID"]
    server: dict[str, Any] = {"command": "agentchain", "args": ["mcp"], "env": names}
    run = run_agent(
        agent_dir,
        model_standin,
        usage_sink.url,
        "codex",
        AGENT_CHAIN_ID="chain-1",
        AGENTCHAIN_MCP_SERVERS=json.dumps({"agentchain": server}),
    )
    assert (run.code, run.stdout) == (0, "Nothing to do.\n"), run.stderr
    [request] = model_standin.exchanges("responses")
    [namespace] = [t for t in request.body["tools"] if t.get("name") == "mcp__agentchain"]
    assert {"store_get", "anchor_set", "delegate"} <= {t["name"] for t in namespace["tools"]}
