"""An agent CLI's own spans under its job's span, received by a real OpenTelemetry Collector.

The runner alone: the operator's side of the trace (the chain's root span and the job's
span, with the ids ``traces/rules/spans`` derives) is sent by the operator's own exporter
code; the in-pod runner then runs the CLI against the stand-in model server, with the
variables an agent's pod gets when the operator traces (``spans.agent_env``:
``TRACEPARENT`` and the OTLP endpoint); the collector is the core distribution's
(``e2e/collecting``), listening where agents reach it. The runner and the CLI are the
runtime's reference image's, in a runner pod on the real node (``e2e/runtime_node.py``).

Aspects covered, for Claude Code, codex and Gemini CLI:
- the CLI's spans join the chain's one trace: every span the collector received is in
  it, with one root, no span twice and none whose parent is missing;
- the CLI's top span (``claude_code.interaction``, ``codex.exec``) hangs under the job's
  span, and so do its model requests and its tool call (codex's and Gemini CLI's through
  the runner's relay, which adopts the spans they start in traces of their own; Gemini
  CLI's spans are its model requests, ``llm_call``, with their token counts and without
  its system instructions);
- neither the prompt's nor the answer's text is in any span (no opt-in was given);
- through the operator (Claude Code's job, its pod given ``TRACEPARENT`` and the
  collector's endpoint by the operator): the chain is one trace, a whole tree of the
  operator's spans and the CLI's; the CLI's top span and its model request hang under
  the job's span, which carries the token split its runner reported
  (``gen_ai.usage.input_tokens`` / ``output_tokens``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from agentchain.traces import exporting
from agentchain.traces.rules import spans
from e2e import chaining, operating, tracetree
from e2e.collecting import Collector, assert_one_tree, attrs
from e2e.controlplane.cluster import ClusterInfo
from e2e.models import DEFAULT_API_KEY, ModelStandIn, Reply, text, tool
from e2e.runtime_node import AgentDir, agent_host, reference_images

Obj = dict[str, Any]
NAMESPACE, JOB = "team-a", "triage-1"
PROMPT_MARK, ANSWER_MARK = "prompt-mark-7f3a", "answer-mark-9c1e"
RUN_TIMEOUT_SECONDS = 60
# The CLI's top span, the span each model request is, and its tool call's span (None:
# the CLI makes no such span).
CLIS: dict[str, tuple[str | None, str, Reply, str | None]] = {
    "claude-code": (
        "claude_code.interaction",
        "claude_code.llm_request",
        tool("Bash", {"command": "echo checking", "description": "Check"}),
        "claude_code.tool",
    ),
    "codex": (
        "codex.exec",
        "try_run_sampling_request",
        tool("exec_command", {"cmd": "echo checking"}),
        "handle_tool_call",
    ),
    # Gemini CLI's spans are its model requests alone, in traces of their own, which the
    # runner's relay hangs under the job's span.
    "gemini": (None, "llm_call", tool("run_shell_command", {"command": "echo checking"}), None),
}


@pytest.fixture
def collector(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Collector]:
    running = Collector(tmp_path, host=agent_host(request))
    yield running
    running.process.stop()


def _send_job_span(collector: Collector, chain_id: str, start_ns: int) -> None:
    """What the operator exports for this job: the chain's root span and the job's."""
    trace, root = spans.trace_id(chain_id), spans.root_span_id(chain_id)
    job = spans.job_span_id(NAMESPACE, JOB)
    end_ns = time.time_ns()
    named = {"agentchain.chain.id": chain_id, "agentchain.job.name": JOB}
    made = [
        spans.Span(f"agentjob {JOB} created", trace, root, None, start_ns, end_ns, "server"),
        spans.Span("agentjob triage", trace, job, root, start_ns, end_ns, attributes=named),
    ]
    exporter = OTLPSpanExporter(endpoint=f"{collector.endpoint}/v1/traces")
    resource = Resource.create({SERVICE_NAME: "agentchain-e2e"})
    exporter.export([exporting.readable(s, resource) for s in made])
    exporter.shutdown()  # type: ignore[no-untyped-call]


def _model_env(runtime: str, home: str, models: ModelStandIn) -> dict[str, str]:
    if runtime == "codex":
        return {
            "CODEX_HOME": f"{home}/.codex",
            "OPENAI_BASE_URL": f"{models.url}/v1",
            "OPENAI_API_KEY": DEFAULT_API_KEY,
            "AGENT_MODEL": "gpt-5",
        }
    if runtime == "gemini":
        return {
            "GOOGLE_GEMINI_BASE_URL": models.url,
            "GEMINI_API_KEY": DEFAULT_API_KEY,
            "AGENT_MODEL": "gemini-2.5-pro",
        }
    return {
        "ANTHROPIC_BASE_URL": models.url,
        "ANTHROPIC_API_KEY": DEFAULT_API_KEY,
        "AGENT_MODEL": "claude-sonnet-4-5",
    }


def _run_agent(
    where: AgentDir, runtime: str, models: ModelStandIn, trace_env: dict[str, str]
) -> None:
    """The runner with the CLI, in the runtime's reference image (a runner pod)."""
    (where.path / "home" / ".codex").mkdir(parents=True)
    (where.path / "prompt").write_text(f"What is six times seven? ({PROMPT_MARK})\n")
    # The run's directory as the runner sees it: the pod's copy of ``where.path``.
    base = "{dir}"
    env = {
        "HOME": f"{base}/home",
        **_model_env(runtime, f"{base}/home", models),
        **trace_env,
        "AGENTCHAIN_RUNTIME": runtime,
        "AGENTCHAIN_MODEL_RETRIES": "0",
        "AGENTCHAIN_ALLOWED_TOOLS": "Bash(echo:*)",
        "AGENT_PROMPT_FILE": f"{base}/prompt",
    }
    done, _ = where.pods.run(runtime, where.path, env, RUN_TIMEOUT_SECONDS)
    code, stdout, stderr = done.code, done.stdout, done.stderr
    assert (code, stdout) == (0, f"It is 42 ({ANSWER_MARK}).\n"), stderr


def _assert_one_tree(received: list[Obj], trace: str) -> dict[str, Obj]:
    """Every span in ``trace``, one root, none twice, none orphaned; spans by id."""
    tree = tracetree.render(received)
    assert {s["traceId"] for s in received} == {trace}, f"spans outside the chain:\n{tree}"
    assert_one_tree(received)
    return {s["spanId"]: s for s in received}


def _under(span: Obj, ancestor: str, by_id: dict[str, Obj]) -> bool:
    parent = span.get("parentSpanId")
    while parent:
        if parent == ancestor:
            return True
        parent = by_id[parent].get("parentSpanId")
    return False


# The first run of a runtime also imports its image and starts its pod.
@pytest.mark.timeout(240)
@pytest.mark.parametrize("runtime", sorted(CLIS))
def test_a_real_clis_spans_nest_under_its_jobs_span(
    agent_dir: AgentDir, model_standin: ModelStandIn, collector: Collector, runtime: str
) -> None:
    top, request, call, tool_span = CLIS[runtime]
    chain_id = f"cli-traces-{runtime}"
    started = time.time_ns()
    model_standin.script(call, text(f"It is 42 ({ANSWER_MARK})."))
    trace_env = spans.agent_env(chain_id, NAMESPACE, JOB, collector.endpoint)
    _run_agent(agent_dir, runtime, model_standin, trace_env)
    _send_job_span(collector, chain_id, started)

    trace = f"{spans.trace_id(chain_id):032x}"
    job = f"{spans.job_span_id(NAMESPACE, JOB):016x}"

    def arrived() -> bool:
        names = {s["name"] for s in collector.spans()}
        return {top or request, "agentjob triage"} <= names

    operating.wait_until(arrived, timeout=20, what=f"{runtime}'s spans and the job's")
    time.sleep(1)  # A batch sent late would be caught too.
    by_id = _assert_one_tree(collector.spans(), trace)
    if top is not None:
        (cli,) = [s for s in by_id.values() if s["name"] == top]
        assert cli["parentSpanId"] == job, cli
    # codex runs its turns in a session loop of its own, which the runner's relay hangs
    # under the job's span beside codex.exec: under the job's span, not under codex.exec.
    requests = [s for s in by_id.values() if s["name"] == request]
    assert len(requests) == 2 and all(_under(s, job, by_id) for s in requests), requests
    if tool_span is not None:
        tools = [s for s in by_id.values() if s["name"] == tool_span]
        assert tools and all(_under(s, job, by_id) for s in tools), tools
    if runtime == "claude-code":
        assert attrs(tools[0])["gen_ai.tool.name"] == "Bash"
    if runtime == "gemini":
        assert all(int(attrs(s)["gen_ai.usage.input_tokens"]) > 0 for s in requests)
        # Its system instructions (context files, a repository's among them) removed.
        assert not any("gen_ai.system_instructions" in attrs(s) for s in requests)
    # No opt-in: the words the model read and wrote stay out of the spans.
    written = collector.output.read_text()
    assert PROMPT_MARK not in written and ANSWER_MARK not in written


def _claude_operator_env(info: ClusterInfo) -> dict[str, str]:
    """The operator's settings for Claude Code's pods: its reference image."""
    return reference_images(info, ("claude-code",))


@pytest.mark.timeout(300)
def test_a_claude_jobs_own_spans_nest_under_the_span_the_operator_exports(
    operator_paused: None,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
    collector: Collector,
) -> None:
    """Through the operator: the pod gets ``TRACEPARENT`` and the collector's endpoint from
    the operator, and the runner turns on the CLI's own export. The chain is one trace, a
    whole tree of the operator's spans and the CLI's; the CLI's top span and its model
    request hang under the job's span, which carries the token split the runner
    reported."""
    info = cluster_info
    env = {**_claude_operator_env(info), "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
    runtime: Obj = {
        "type": "claude-code",
        "baseUrl": model_standin.url,
        "credentials": {"secretName": "anthropic", "key": "api-key"},
    }
    variables = [
        {"name": "AGENTCHAIN_MODEL_RETRIES", "value": "0"},
        {"name": "ENABLE_TOOL_SEARCH", "value": "false"},
    ]
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "anthropic"},
        "stringData": {"api-key": DEFAULT_API_KEY},
    }
    agent = chaining.ai_agent(
        "traced-claude",
        triggers=chaining.MANUAL,
        defaultModel="claude-sonnet-4-5",
        env=variables,
        runtime=runtime,
    )
    model_standin.script(text("Forty-two.", input_tokens=300, output_tokens=40))
    with operating.running(info, env):
        chaining.apply(info, namespace, secret, agent)
        chaining.apply(info, namespace, chaining.root_job("traced-claude-1", "traced-claude"))
        status = chaining.wait_phase(info, namespace, "traced-claude-1", timeout=180)
        assert status["phase"] == "Succeeded", status
        chain_id = str(status["chainId"])
        trace = f"{spans.trace_id(chain_id):032x}"

        def arrived() -> bool:
            names = {s["name"] for s in collector.spans() if s["traceId"] == trace}
            return {"agentjob traced-claude", "claude_code.interaction"} <= names

        operating.wait_until(arrived, timeout=60, what="the job's and the CLI's spans")
        received = collector.trace_of(chain_id, 8)

    assert_one_tree(received)
    job = f"{spans.job_span_id(namespace, 'traced-claude-1'):016x}"
    by_id = {s["spanId"]: s for s in received}
    (mine,) = [s for s in received if s["name"] == "agentjob traced-claude"]
    assert mine["spanId"] == job
    said = attrs(mine)
    split = (int(said["gen_ai.usage.input_tokens"]), int(said["gen_ai.usage.output_tokens"]))
    assert split == (300, 40), said
    (cli,) = [s for s in received if s["name"] == "claude_code.interaction"]
    assert cli["parentSpanId"] == job, cli
    requests = [s for s in received if s["name"] == "claude_code.llm_request"]
    assert requests and all(_under(s, job, by_id) for s in requests), requests
