"""One trace per chain, received by a real OpenTelemetry Collector (docs/observability.md).

The collector is the core distribution's OTLP receiver and file exporter, built from the
Go module proxy (``build-binaries.sh otelcol``); the assertions read the spans it wrote.

Aspects covered:
- a three-agent chain, with the operator SIGKILLed while its second job runs and started
  again, is exactly one trace: one root span, one span per AgentJob with its waiting and
  running parts under it (in order, within it), no span twice, no span whose parent is
  missing, and each job's span under its parent job's (the root job's under the root
  span);
- the spans say what happened: agent, chain id, depth, phase, exit code; an agent that
  reports its tokens split into input and output (as the runner does for every CLI) has
  them on its job's and its capture's spans as ``gen_ai.usage.input_tokens`` /
  ``output_tokens`` and in ``status.usage``, beside the total, which a report of the
  total alone (an agent of before) still adds to;
- the agent's pod runs under its job's span: its ``TRACEPARENT`` names the trace and the
  span the collector received for that job;
- every job's steps are spans under its span, in order within it: one attempt per
  attempt (a failed one an error, with its exit code and its pod's moments as events)
  and its capture, then the decision, naming the agent and job that came next (the
  chain's triage fails its first attempt, so it has two of each);
- a signed webhook delivery is the root span of the chain it starts; a job API call is
  the root of its chain, ``api POST /api/jobs``, naming its caller and never its token;
  a ``/agentchain retry`` comment is the root of the chain it starts, naming the job it
  retries;
- an agent that calls ``agentchain mcp``'s tools as its CLI would (the MCP SDK's stdio
  client, the server given the variables the agent's MCP configuration names): each tool
  call is a CLIENT span under its job's span, in the chain's one tree;
- a pull request's chain written back to the GitHub stand-in by the operator as an App:
  every comment and Check Run write GitHub answered is one span in the chain's one
  tree (``github comment``, ``github check run``), under the job whose change caused it
  or the root, saying what was written, how (created first, then updated), GitHub's
  status, the repository and pull request, and never the comment's text;
- two replicas sharing one Lease, both exporting: the leader SIGKILLed while the chain's
  second job runs, the other leads and finishes the chain, and the chain is still that
  one tree, every check of the SIGKILL case holding (``_a_chain_through`` takes the
  kill).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import chaining, collecting, delivering, operating, replicating
from e2e.collecting import attrs
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.githubloop import PULL, REPOSITORY, app_delivery, app_operator, install

Obj = dict[str, Any]
SECOND = 1_000_000_000
# Runs long enough for the operator to be killed under it, then shows its trace context.
PRINT_TRACEPARENT = (
    "import os, time; time.sleep(4); print('TRACEPARENT=' + os.environ['TRACEPARENT'])"
)
# Fails its first attempt and succeeds its second: a job with two attempt spans.
FAIL_ONCE = (
    "import os, sys; print('triaged'); sys.exit(1 if os.environ['AGENT_ATTEMPT'] == '1' else 0)"
)
# Calls a tool of ``agentchain mcp`` as an agent's CLI does: the server (the agent
# image's) started over stdio with the variables the agent's MCP configuration names.
CALL_A_TOOL = """
import asyncio, os, sys
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from agentchain.runtimes.rules.runtimecontainers import MCP_JOB_ENV

env = {name: os.environ[name] for name in MCP_JOB_ENV if name in os.environ}

async def main():
    argv = ["-m", "agentchain", "mcp"]
    params = StdioServerParameters(command=sys.executable, args=argv, env=env)
    entry = {"namespace": "tr", "key": "k", "value": "v"}
    async with Client(params, read_timeout_seconds=60) as tools:
        done = await tools.call_tool("store_set_and_extend", entry)
    print("refused" if done.is_error else "stored")

asyncio.run(main())
"""
# Reports usage as the runner does (the total and its split), then as an agent that knows
# only a total does; prints the job API's answers.
REPORT_USAGE = """
import json, os, urllib.request
url = "{}/api/jobs/{}/{}/usage".format(
    os.environ["AGENT_API_URL"], os.environ["AGENT_NAMESPACE"], os.environ["AGENT_JOB"])
for body in ({"tokens": 1300, "cost": 0.01, "inputTokens": 1000, "outputTokens": 200},
             {"tokens": 50}):
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": "Bearer " + os.environ["AGENT_TOKEN"],
                 "Content-Type": "application/json"})
    print(urllib.request.urlopen(request, timeout=10).read().decode(), flush=True)
"""


@pytest.fixture(scope="module")
def collector(cluster_info: ClusterInfo) -> Iterator[collecting.Collector]:
    # Where agents' pods reach it too: the operator names it to them.
    running = collecting.Collector(cluster_info.workdir, host=cluster_info.pod_host)
    yield running
    running.process.stop()


@pytest.fixture
def traced(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    collector: collecting.Collector,
) -> Iterator[operating.OperatorProcess]:
    """An operator of ``namespace`` alone that exports to the collector."""
    operator.stop()
    tracing = operating.OperatorProcess(
        cluster_info,
        operator.kubeconfig,
        extra_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_SERVICE_NAME": "agentchain-e2e",
            "AGENTCHAIN_NAMESPACES": namespace,
        },
        name="traced-operator",
    )
    try:
        tracing.start()
        yield tracing
    finally:
        tracing.stop()
        operator.start()


def _three_agents(info: ClusterInfo, namespace: str, prefix: str) -> None:
    chaining.apply(
        info,
        namespace,
        chaining.ai_agent(
            f"{prefix}-triage",
            chaining.python_command(FAIL_ONCE),
            triggers=[{"source": "manual", "next": chaining.step(f"{prefix}-developer", "always")}],
            backoffLimit=1,
        ),
        chaining.ai_agent(
            f"{prefix}-developer",
            chaining.python_command(PRINT_TRACEPARENT),
            triggers=[{"source": "manual", "next": chaining.step(f"{prefix}-reviewer", "always")}],
        ),
        chaining.agent(f"{prefix}-reviewer"),
    )


def _wait_running(info: ClusterInfo, namespace: str, chain_id: str, agent: str) -> None:
    def running() -> bool:
        jobs = chaining.chain_jobs(info, namespace, chain_id)
        return any(
            j["spec"]["agentRole"] == agent and (j.get("status") or {}).get("phase") == "Running"
            for j in jobs
        )

    operating.wait_until(running, timeout=60, what=f"the {agent} job to run")


def _a_chain_through(
    info: ClusterInfo,
    namespace: str,
    collector: collecting.Collector,
    prefix: str,
    kill: Callable[[], None],
) -> None:
    """A three-agent chain, with ``kill`` done to the operator while its second job runs,
    is exactly one trace whose tree is the chain's (``_assert_chain_tree``)."""
    _three_agents(info, namespace, prefix)
    chaining.apply(info, namespace, chaining.root_job(f"{prefix}-1", f"{prefix}-triage"))
    chain_id = str(chaining.wait_phase(info, namespace, f"{prefix}-1")["chainId"])
    _wait_running(info, namespace, chain_id, f"{prefix}-developer")
    kill()
    jobs = chaining.wait_chain(info, namespace, f"{prefix}-1", 3)
    # The root; per job its span, its waiting and running parts, its attempt and capture
    # (two of each for the triage, whose first attempt failed) and its decision.
    spans, root = collector.tree(chain_id, 1 + 3 * 6 + 2)
    _assert_chain_tree(spans, root, jobs, prefix)


def _assert_chain_tree(spans: list[Obj], root: Obj, jobs: list[Obj], prefix: str) -> None:
    assert root["name"] == f"agentjob {prefix}-1 created", root["name"]
    by_job = {
        attrs(s)["agentchain.job.name"]: s
        for s in spans
        if s is not root and "agentchain.job.name" in attrs(s)
    }
    names = {j["metadata"]["name"]: j for j in jobs}
    assert set(by_job) == set(names), (set(by_job), set(names))
    for name, job in names.items():
        _assert_job_span(spans, by_job, root, job)
        assert by_job[name]["name"] == f"agentjob {job['spec']['agentRole']}"
        _assert_steps(spans, by_job[name], job, names)

    developer = next(j for j in jobs if j["spec"]["agentRole"] == f"{prefix}-developer")
    result = str(developer["status"].get("result") or "")
    assert result.startswith("TRACEPARENT=00-"), result
    _, trace, span_id, flags = result.removeprefix("TRACEPARENT=").strip().split("-")
    assert trace == root["traceId"] and flags == "01"
    assert span_id == by_job[developer["metadata"]["name"]]["spanId"]


def _assert_job_span(spans: list[Obj], by_job: dict[str, Obj], root: Obj, job: Obj) -> None:
    """A job's span: under its parent job's (or the root), saying what happened, split
    into its waiting and running parts, in order, within it."""
    span, status = by_job[job["metadata"]["name"]], job["status"]
    parent = status.get("parentJobId")
    expected = by_job[parent]["spanId"] if parent else root["spanId"]
    assert span["parentSpanId"] == expected, (job["metadata"]["name"], span)
    seen = attrs(span)
    assert seen["gen_ai.agent.name"] == job["spec"]["agentRole"]
    assert int(seen["agentchain.chain.depth"]) == status["chainDepth"]
    assert seen["agentchain.job.phase"] == status["phase"] == "Succeeded"
    assert int(seen["agentchain.job.exit_code"]) == 0
    parts = sorted(
        (
            s
            for s in spans
            if s.get("parentSpanId") == span["spanId"]
            and s["name"] in (f"{span['name']} waiting", f"{span['name']} running")
        ),
        key=lambda s: int(s["startTimeUnixNano"]),
    )
    assert [p["name"].rsplit(" ", 1)[1] for p in parts] == ["waiting", "running"], parts
    bounds = [int(span["startTimeUnixNano"])]
    bounds += [int(p[k]) for p in parts for k in ("startTimeUnixNano", "endTimeUnixNano")]
    bounds.append(int(span["endTimeUnixNano"]))
    assert bounds == sorted(bounds), (job["metadata"]["name"], bounds)  # They split it.


def _times(span: Obj) -> tuple[int, int]:
    return int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])


def _children(spans: list[Obj], parent: Obj) -> dict[str, list[Obj]]:
    """``parent``'s child spans by the part they name (``attempt``, ``capture``, ...),
    each part's in start order."""
    out: dict[str, list[Obj]] = {}
    for span in sorted(spans, key=lambda s: int(s["startTimeUnixNano"])):
        own = span["name"].startswith(parent["name"] + " ")  # Not a child job's span.
        if span.get("parentSpanId") == parent["spanId"] and own:
            out.setdefault(span["name"].removeprefix(parent["name"]).split()[0], []).append(span)
    return out


def _assert_steps(spans: list[Obj], span: Obj, job: Obj, jobs: dict[str, Obj]) -> None:
    """A job's steps under its span: an attempt and a capture per attempt, in order and
    within the job's span (the attempt from its pod's timestamps, its failure an error,
    its exit code said), then one decision naming what came next."""
    status = job["status"]
    parts = _children(spans, span)
    assert sorted(parts) == ["attempt", "capture", "decision", "running", "waiting"], parts
    tries = int(status.get("attempt") or 1)
    attempts, captures, (decision,) = parts["attempt"], parts["capture"], parts["decision"]
    assert len(attempts) == len(captures) == tries, (attempts, captures)
    times = _times(span)
    previous = times[0]
    for number, (attempt, capture) in enumerate(zip(attempts, captures, strict=True), 1):
        said = attrs(attempt)
        assert attempt["name"].endswith(f"attempt {number}")
        assert int(said["agentchain.job.attempt"]) == number
        last = number == tries
        assert int(said["agentchain.job.exit_code"]) == (0 if last else 1), said
        assert (attempt.get("status", {}).get("code") == 2) is not last, attempt  # ERROR
        assert {e["name"] for e in attempt.get("events", [])} >= {"pod.running", "pod.exited"}
        assert int(attrs(capture)["agentchain.job.attempt"]) == number
        # An attempt's times are its pod's, floored to the second; the capture's, the
        # decision's and the job's end are the operator's clock, to the nanosecond.
        (began, exited), (captured, stored) = _times(attempt), _times(capture)
        assert times[0] <= began and previous - SECOND < began, number
        assert began <= exited <= captured <= stored <= times[1], number
        previous = stored
    decided_at = _times(decision)
    assert previous <= decided_at[0] <= decided_at[1] <= times[1], job["metadata"]["name"]
    decided, entry = attrs(decision), status["next"][-1]
    assert decided["agentchain.decision.action"] == entry["action"], (decided, entry)
    if entry["action"] == "spawned":
        assert decided["agentchain.decision.next_job"] == entry["child"]
        child = jobs[entry["child"]]["spec"]["agentRole"]
        assert decided["agentchain.decision.next_agent"] == child
    else:
        assert decided["agentchain.decision.completes"] is True, decided


def test_a_chain_is_one_trace_across_a_sigkill(
    traced: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    collector: collecting.Collector,
) -> None:
    def sigkill_and_restart() -> None:
        traced.kill()
        traced.start()

    _a_chain_through(cluster_info, namespace, collector, "tr", sigkill_and_restart)


def test_an_agents_tool_calls_are_spans_under_its_job(
    traced: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    collector: collecting.Collector,
) -> None:
    info = cluster_info
    chaining.apply(
        info, namespace, chaining.ai_agent("tr-tools", chaining.python_command(CALL_A_TOOL))
    )
    chaining.apply(info, namespace, chaining.root_job("tr-tools-1", "tr-tools"))
    job = chaining.wait_phase(info, namespace, "tr-tools-1", "Succeeded", "Failed")
    assert (job["phase"], str(job.get("result") or "").strip()) == ("Succeeded", "stored"), job
    spans, _ = collector.tree(str(job["chainId"]), 8)
    (tool,) = [s for s in spans if s["name"].startswith("execute_tool")]
    (mine,) = [s for s in spans if s["name"] == "agentjob tr-tools"]
    assert tool["name"] == "execute_tool store_set_and_extend"
    assert tool["kind"] == 3 and tool["parentSpanId"] == mine["spanId"], tool  # CLIENT
    assert attrs(tool)["gen_ai.tool.name"] == "store_set_and_extend"
    assert attrs(tool)["agentchain.job.name"] == "tr-tools-1"


def test_an_agents_token_split_is_on_its_spans_under_the_genai_names(
    traced: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    collector: collecting.Collector,
) -> None:
    info = cluster_info
    reporter = chaining.ai_agent("tr-usage", chaining.python_command(REPORT_USAGE))
    chaining.apply(info, namespace, reporter)
    chaining.apply(info, namespace, chaining.root_job("tr-usage-1", "tr-usage"))
    job = chaining.wait_phase(info, namespace, "tr-usage-1", "Succeeded", "Failed")
    assert job["phase"] == "Succeeded", job
    usage = {"tokens": 1350, "cost": 0.01, "inputTokens": 1000, "outputTokens": 200}
    assert job["usage"] == usage, job
    spans, _ = collector.tree(str(job["chainId"]), 7)
    (mine,) = [s for s in spans if s["name"] == "agentjob tr-usage"]
    (capture,) = [s for s in spans if s["name"] == "agentjob tr-usage capture"]
    for span in (mine, capture):
        said = attrs(span)
        assert int(said["agentchain.usage.tokens"]) == 1350, said  # What the budgets count.
        assert int(said["gen_ai.usage.input_tokens"]) == 1000, said
        assert int(said["gen_ai.usage.output_tokens"]) == 200, said


def _delivered(traced: operating.OperatorProcess, namespace: str, issue: int) -> Obj:
    """The job an ``issues.opened`` delivery about ``issue`` started in ``namespace``."""
    jobs: list[Obj] = []

    def delivered() -> bool:
        nonlocal jobs
        payload = delivering.issue_opened(issue)
        code, answer = delivering.send(traced, *delivering.signed(traced.webhook_secret, payload))
        assert code in (200, 202), answer
        jobs = [j for j in answer["jobs"] if j["namespace"] == namespace]
        return bool(jobs)

    # The webhook's listing of agents is up to 2 s old: deliver until it has this one.
    operating.wait_until(delivered, timeout=60, interval=0.5, what="the webhook to match")
    (job,) = jobs
    return job


def test_a_signed_delivery_is_the_root_span_of_its_chain(
    traced: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    collector: collecting.Collector,
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, chaining.agent("tr-hooked", github="issues.opened"))
    job = _delivered(traced, namespace, 42)
    chain_id = str(chaining.wait_phase(info, namespace, job["name"])["chainId"])

    spans, root = collector.tree(chain_id, 7)
    assert root["name"] == "webhook issues.opened"
    assert attrs(root)["agentchain.job.name"] == job["name"]
    (child,) = [s for s in spans if s.get("parentSpanId") == root["spanId"]]
    assert child["name"] == "agentjob tr-hooked"
    assert attrs(child)["agentchain.job.name"] == job["name"]


def test_a_job_api_call_is_the_root_span_of_its_chain(
    traced: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    collector: collecting.Collector,
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, chaining.agent("tr-called"))
    body = {"namespace": namespace, "agentRole": "tr-called", "prompt": "hello"}
    request = urllib.request.Request(
        f"{traced.url}/api/jobs",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {traced.admin_token}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 201
        name = json.loads(answer.read())["id"]
    chain_id = str(chaining.wait_phase(info, namespace, name)["chainId"])

    spans, root = collector.tree(chain_id, 7)
    assert root["name"] == "api POST /api/jobs"
    said = attrs(root)
    assert (said["http.request.method"], said["http.route"]) == ("POST", "/api/jobs")
    # An admin token, scoped (as the operator of this test is) to its one namespace.
    assert said["agentchain.caller"] == f"admin ({namespace})"
    assert said["agentchain.job.name"] == name
    assert traced.admin_token not in json.dumps(spans)  # Who called, never the credential.
    (child,) = [s for s in spans if s.get("parentSpanId") == root["spanId"]]
    assert child["name"] == "agentjob tr-called"
    # Timed by the operator's own clock: not a whole second, as the objects' times are.
    assert int(root["endTimeUnixNano"]) > int(root["startTimeUnixNano"])


def test_a_retry_comment_is_the_root_span_of_the_chain_it_starts(
    traced: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    collector: collecting.Collector,
) -> None:
    info = cluster_info
    failing = chaining.agent("tr-fixer", "--no-context", "--exit-code", "3", github="issues.opened")
    chaining.apply(info, namespace, failing)
    failed = str(_delivered(traced, namespace, 4242)["name"])
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, failed).get("chainComplete") is True,
        timeout=60,
        what="the failed chain to complete",
    )
    comment = {
        "action": "created",
        "issue": {"number": 4242, "title": "Login fails", "user": {"login": "alice"}},
        "comment": {
            "id": int(time.time() * 1000),
            "body": "/agentchain retry",
            "author_association": "OWNER",
            "user": {"login": "alice", "type": "User"},
        },
        "repository": {"full_name": "acme/webapp"},
        "sender": {"login": "alice", "type": "User"},
    }
    body, headers = delivering.signed(traced.webhook_secret, comment, event="issue_comment")
    code, answer = delivering.send(traced, body, headers)
    assert code in (200, 202), answer
    [done] = [j for j in answer["command"]["jobs"] if j["namespace"] == namespace]
    assert done["result"] == "retried", answer
    chain_id = str(chaining.wait_phase(info, namespace, done["retry"], "Failed")["chainId"])

    spans, root = collector.tree(chain_id, 7)
    assert root["name"] == "command /agentchain retry"
    said = attrs(root)
    assert (said["agentchain.command"], said["agentchain.command.retry_of"]) == ("retry", failed)
    assert said["agentchain.job.name"] == done["retry"]
    (child,) = [s for s in spans if s.get("parentSpanId") == root["spanId"]]
    assert child["name"] == "agentjob tr-fixer"


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("operator_paused", "installed")
def test_a_chain_is_one_trace_across_a_failover(
    cluster_info: ClusterInfo, namespace: str, collector: collecting.Collector
) -> None:
    info = cluster_info
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_SERVICE_NAME": "agentchain-ha"}
    with replicating.replicas(info, namespace, extra_env=env) as ops:

        def kill_the_leader() -> None:
            old = replicating.leader(ops)
            old.kill()
            replicating.leader([op for op in ops if op is not old])  # The other leads.

        _a_chain_through(info, namespace, collector, "fo", kill_the_leader)


def test_a_chains_github_write_back_is_spans_in_its_trace(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    collector: collecting.Collector,
    github: GitHubStandIn,
    tmp_path: Path,
) -> None:
    info, installed = cluster_info, install(github, tmp_path)
    said = "LGTM from the traced reviewer"
    reviewer = chaining.agent(
        "tr-pr", "--no-context", "--say", said, "--sleep", "4", github="pull_request.opened"
    )
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_SERVICE_NAME": "agentchain-e2e"}
    with app_operator(operator, info, namespace, installed, env) as op:
        chaining.apply(info, namespace, reviewer)
        payload = app_delivery("pull_request", "opened", installed.installation.id)
        body, headers = delivering.signed(op.webhook_secret, payload, event="pull_request")
        status, answer = delivering.send(op, body, headers)
        assert status == 202 and answer["jobs"], answer
        name = answer["jobs"][0]["name"]
        chain_id = str(chaining.wait_phase(info, namespace, name)["chainId"])

        def completed() -> bool:
            runs = github.check_runs(REPOSITORY)
            return len(runs) == 1 and runs[0].status == "completed"

        operating.wait_until(completed, timeout=60, what="the Check Run to complete")

        def final() -> bool:  # The chain's end written: the write-back sends no more.
            return any("**Succeeded**" in c.body for c in installed.comments(PULL))

        operating.wait_until(final, timeout=60, what="the final comment")
        writes = {
            "github comment": github.requests("issues/create-comment", status=201)
            + github.requests("issues/update-comment", status=200),
            "github check run": github.requests("checks/create", status=201)
            + github.requests("checks/update", status=200),
        }
        # The root, the job's span and its 5 parts, and one span per write GitHub answered.
        spans, root = collector.tree(chain_id, 7 + sum(len(w) for w in writes.values()))
        (job,) = [s for s in spans if s["name"] == "agentjob tr-pr"]
        for kind, sent in writes.items():
            made = sorted(
                (s for s in spans if s["name"] == kind), key=lambda s: s["startTimeUnixNano"]
            )
            assert len(made) == len(sent) >= 2, (kind, len(sent), [s["name"] for s in spans])
            actions = [attrs(s)["agentchain.github.action"] for s in made]
            assert actions == ["created"] + ["updated"] * (len(made) - 1), actions
            codes = [int(attrs(s)["http.response.status_code"]) for s in made]
            assert codes == [201] + [200] * (len(made) - 1), codes
            for span in made:
                assert span["parentSpanId"] in (job["spanId"], root["spanId"]), span
                found = attrs(span)
                assert found["agentchain.github.repository"] == REPOSITORY
                assert int(found["agentchain.github.number"]) == PULL
                assert found["agentchain.chain.id"] == chain_id
                assert not any(said in str(v) for v in found.values())  # Never the text.
        assert "Traceback" not in op.log_text()
