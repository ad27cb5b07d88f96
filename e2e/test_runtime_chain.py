"""A chain of real agent CLIs through the operator, from a GitHub issue to a review.

The operator acts as a GitHub App against the GitHub stand-in, whose git server holds the
example payloads' repository with a typo in its README; GitHub's own ``issues.opened``
example, signed as GitHub signs it, starts seed 003's chain. The stand-in node runs each
container's command as a host process (it ignores the images), so the runner and the
workspace commands are this tree's (``AGENTCHAIN_RUNTIME_COMMAND``,
``AGENTCHAIN_WORKSPACE_COMMAND``) and each AiAgent names its pinned CLI binary
(``AGENTCHAIN_AGENT_CLI``, e2e/setup.sh). Both CLIs talk to the stand-in model server
(``e2e/models``), which answers each model request with the next scripted turn: the chain
runs one job at a time, and a delegation with a wait holds its caller, so the turns come
in the order written here. Everything between is the product's.

Aspects covered:
- issue opened -> triage (claude-code) -> developer (codex) -> reviewer (claude-code):
  every step succeeds with its CLI's final answer as its result, and reports its usage
  (tokens for each; a cost for Claude Code's, codex reports none);
- the models' tool calls reach ``agentchain mcp`` through each CLI: triage writes a store
  entry and its anchor, the developer (the next job, another CLI) reads that entry, the
  reviewer delegates to a security agent and waits for its answer; each is then visible
  through the job API (the entry with its writer, the anchor, the delegated job with its
  parent and result);
- the chain's protocol (learnings first, the hand-off section, the anchor kept through
  the MCP tool) reaches both CLIs' models as standing instructions;
- the developer commits in the chain's workspace with codex's own shell tool, and the
  reviewer's prompt (what its CLI sent to the model) carries the workspace's summary of
  that commit;
- a chain budget stops the chain from the reported cost alone: the first job's reported
  Claude Code cost takes the chain over ``maxCost``, the job ends ``BudgetExceeded`` and
  the next step never starts, although the agents' command, tokens and time are far
  from any limit;
- a provider refusing the key (401), a 429 storm (still 429 after the CLI's retry), an
  overloaded provider (529) and a turn limit each end the job ``Failed`` with their own
  reason (``ModelAuthFailed``, ``ModelRateLimited``, ``ModelUnavailable``,
  ``TurnLimitReached``) and the runner's one-line message: in the REASON column of
  ``kubectl get aj -o wide``, as the Warning Event's reason, and in the chain's GitHub
  comment (the message, as the last line of the failed step's result);
- seed 004 after a compaction: Claude Code, made to compact after a turn that wrote the
  job's anchor through the MCP tool, sends the anchor (read back by the runner's
  ``SessionStart``/``compact`` hook through the job API) in its first request after.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentchain.runtimes.rules import clis
from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.github.gitserver import GitServer
from e2e.githubloop import REPOSITORY, Installed, app_delivery, app_operator, install
from e2e.models import DEFAULT_API_KEY, ModelStandIn, Reply, failure, mcp_tool, text, tool
from e2e.models.fixtures import agent_cli

ROOT = Path(__file__).resolve().parents[1]
CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5"
TIMEOUT = 240.0
Obj = dict[str, Any]

FIX = (
    'cd "$AGENT_WORKSPACE_REPO" && sed -i s/Wrold/World/ README.md && '
    "git -c user.name=Developer -c user.email=dev@example.com commit -qam 'Fix the typo' && "
    "echo committed"
)
TIP = "README typo: Wrold should be World"


def _runtime(kind: str, standin: ModelStandIn, secret: str, **more: Any) -> Obj:
    base = standin.url if kind == "claude-code" else f"{standin.url}/v1"
    return {
        "type": kind,
        "baseUrl": base,
        "credentials": {"secretName": secret, "key": "api-key"},
        **more,
    }


def runtime_agent(
    trigger: str,
    kind: str,
    standin: ModelStandIn,
    home: Path,
    *,
    triggers: list[Obj] | None = None,
    **spec: Any,
) -> Obj:
    """An AiAgent running ``kind``'s pinned CLI against the stand-in, with a home of its
    own for the CLI's files and no retries of a refused request."""
    home.mkdir(parents=True, exist_ok=True)
    claude = kind == "claude-code"
    env = [
        {"name": "HOME", "value": str(home)},
        {"name": "AGENTCHAIN_AGENT_CLI", "value": str(agent_cli(kind))},
        {"name": "AGENTCHAIN_MODEL_RETRIES", "value": "0"},
    ]
    if claude:
        # MCP tools in the tool list itself, not behind Claude Code's ToolSearch.
        env.append({"name": "ENABLE_TOOL_SEARCH", "value": "false"})
    else:
        env.append({"name": "CODEX_HOME", "value": str(home)})
    secret = "anthropic" if claude else "openai"
    runtime = _runtime(kind, standin, secret, **({"maxTurns": 6} if claude else {}))
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AiAgent",
        "metadata": {"name": trigger},
        "spec": {
            "triggerName": trigger,
            "defaultModel": CLAUDE_MODEL if claude else CODEX_MODEL,
            "eventTriggers": triggers or [{"source": "manual"}],
            "env": env,
            "runtime": runtime,
            **spec,
        },
    }


def secrets_for_models() -> list[Obj]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name},
            "stringData": {"api-key": DEFAULT_API_KEY},
        }
        for name in ("anthropic", "openai")
    ]


def runtime_env(git_server: GitServer | None = None) -> dict[str, str]:
    """The operator's settings for runner and workspace pods on the stand-in node."""
    command = ["env", f"PYTHONPATH={ROOT / 'operator'}", sys.executable, "-m", "agentchain"]
    env = {"AGENTCHAIN_RUNTIME_COMMAND": ",".join([*command, "agent", "run"])}
    if git_server is not None:
        env["AGENTCHAIN_GITHUB_GIT_URL"] = git_server.url
        env["AGENTCHAIN_WORKSPACE_COMMAND"] = ",".join(command)
    return env


def apply(info: ClusterInfo, namespace: str, objs: list[Obj]) -> None:
    for obj in objs:
        info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))


def deliver_issue(op: operating.OperatorProcess, installed: Installed) -> None:
    payload = app_delivery("issues", "opened", installed.installation.id)
    status, answer = delivering.send(op, *delivering.signed(op.webhook_secret, payload))
    assert status == 202 and answer["jobs"], answer


def jobs_when(info: ClusterInfo, namespace: str, done: Any, what: str) -> list[Obj]:
    """The namespace's AgentJobs, by chain depth, once ``done(jobs)`` holds."""
    jobs: list[Obj] = []

    def check() -> bool:
        nonlocal jobs
        jobs = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
        return bool(done(jobs))

    operating.wait_until(check, timeout=TIMEOUT, interval=0.5, what=what)
    return sorted(jobs, key=lambda j: int((j.get("status") or {}).get("chainDepth") or 0))


def api_get(op: operating.OperatorProcess, path: str, **query: str) -> Obj:
    """A job API read with the admin token."""
    url = f"{op.url}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {op.admin_token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: Obj = json.load(response)
    return answer


def tool_outputs(body: Obj) -> list[str]:
    """What a model request sends back of tool calls, as text: Anthropic ``tool_result``
    blocks and Responses ``function_call_output`` items."""
    found = [
        json.dumps(item.get("output"))
        for item in body.get("input") or []
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            found += [json.dumps(b) for b in content if b.get("type") == "tool_result"]
    return found


@pytest.fixture
def repo(github: GitHubStandIn, git_server: GitServer, tmp_path: Path) -> Installed:
    installed = install(github, tmp_path)
    git_server.create_repo(REPOSITORY, {"README.md": "Hello Wrold\n"}, private=False)
    return installed


def seed_chain(standin: ModelStandIn, homes: Path) -> list[Obj]:
    """Seed 003's chain on real CLIs, and the security agent the reviewer delegates to."""
    return [
        runtime_agent(
            "ai-triage",
            "claude-code",
            standin,
            homes / "triage",
            triggers=[
                {
                    "source": "github",
                    "events": ["issues.opened"],
                    "next": {"agentTriggerName": "ai-developer"},
                }
            ],
            workspace={"publish": False},
        ),
        runtime_agent(
            "ai-developer",
            "codex",
            standin,
            homes / "developer",
            triggers=[{"source": "manual", "next": {"agentTriggerName": "ai-reviewer"}}],
        ),
        runtime_agent("ai-reviewer", "claude-code", standin, homes / "reviewer"),
        runtime_agent(
            "ai-security",
            "claude-code",
            standin,
            homes / "security",
            delegation={"allowedFrom": ["ai-reviewer"]},
        ),
    ]


def chain_script() -> list[Reply]:
    """The model's turns, in the order the chain asks for them."""
    anchor = {"task": "triage the issue", "status": "typo found", "files": ["README.md"]}
    return [
        # triage (claude-code): a store entry, its anchor, then its answer.
        mcp_tool("store_set_and_extend", {"namespace": "triage", "key": "tip", "value": TIP}),
        mcp_tool("anchor_set", anchor),
        text("Triage: the README has a typo.", input_tokens=2000, output_tokens=100),
        # developer (codex): reads triage's entry, commits the fix with its shell tool.
        mcp_tool("store_get", {"namespace": "triage", "key": "tip"}),
        tool("exec_command", {"cmd": FIX}),
        text("Fixed the typo.", input_tokens=3000, output_tokens=200),
        # reviewer (claude-code): delegates and waits, then answers.
        mcp_tool(
            "delegate",
            {"agent": "ai-security", "task": "Check the README fix.", "wait_seconds": 180},
        ),
        text("Security: nothing to see.", input_tokens=500, output_tokens=50),  # ai-security
        text("APPROVE: the typo is fixed.", input_tokens=1500, output_tokens=80),
    ]


@pytest.fixture
def chain_operator(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> Iterator[operating.OperatorProcess]:
    with app_operator(operator, cluster_info, namespace, repo, runtime_env(git_server)) as op:
        yield op


def test_issue_to_review_on_real_clis_with_mcp_tools_workspace_and_usage(
    chain_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    model_standin: ModelStandIn,
    tmp_path: Path,
) -> None:
    info, op = cluster_info, chain_operator
    model_standin.script(*chain_script())
    apply(info, namespace, [*secrets_for_models(), *seed_chain(model_standin, tmp_path)])
    deliver_issue(op, repo)

    def complete(jobs: list[Obj]) -> bool:
        # Every job ended: the delegated job, a leaf, may say chainComplete before its
        # caller (the reviewer) has its answer.
        phases = [(j.get("status") or {}).get("phase") for j in jobs]
        return len(jobs) == 4 and all(p in ("Succeeded", "Failed", "Cancelled") for p in phases)

    jobs = jobs_when(info, namespace, complete, "the chain to complete")
    by_agent = {j["spec"]["agentRole"]: j for j in jobs}
    statuses = {agent: j["status"] for agent, j in by_agent.items()}
    assert {a: s["phase"] for a, s in statuses.items()} == dict.fromkeys(by_agent, "Succeeded")
    assert "Triage: the README has a typo." in statuses["ai-triage"]["result"]
    assert statuses["ai-developer"]["result"].strip() == "Fixed the typo."
    assert statuses["ai-reviewer"]["result"].strip() == "APPROVE: the typo is fixed."

    # The chain's protocol reached both CLIs' models as standing instructions.
    first_claude = model_standin.exchanges("anthropic")[0].body
    first_codex = model_standin.exchanges("responses")[0].body
    for said in (json.dumps(first_claude["system"]), json.dumps(first_codex["input"])):
        assert "a section headed '## Downstream Directives'" in said
        assert "## MANDATORY: Learnings" in said and "anchor_set" in said

    # Usage from every step: Claude Code's tokens and cost, codex's tokens (no cost).
    for agent, status in statuses.items():
        assert status["usage"]["tokens"] > 0, (agent, status.get("usage"))
    assert statuses["ai-developer"]["usage"]["cost"] == 0
    # claude-sonnet-4-5 at $3 / $15 per million: triage's three turns (2,200 tokens in,
    # 140 out) cost 0.0087 USD.
    assert statuses["ai-triage"]["usage"]["cost"] == pytest.approx(0.0087)
    assert statuses["ai-triage"]["usage"]["turns"] == 3

    triage, reviewer = (by_agent[a]["metadata"]["name"] for a in ("ai-triage", "ai-reviewer"))
    # The store entry triage wrote, read back through the job API, with its writer...
    entry = api_get(op, "/api/store/triage/tip", tenant=namespace)
    assert (entry["value"], entry["writer"]) == (TIP, triage)
    # ...and read by the developer's codex through the MCP tool (its second request).
    codex_requests = model_standin.exchanges("responses")
    assert TIP in " ".join(tool_outputs(codex_requests[1].body))
    # triage's anchor.
    anchor = api_get(op, f"/api/jobs/{namespace}/{triage}/anchor")["anchor"]
    assert anchor["status"] == "typo found" and anchor["files"] == ["README.md"]
    # The delegation: a job of the chain, the reviewer's child, whose answer came back.
    security = by_agent["ai-security"]["metadata"]["name"]
    delegated = api_get(op, f"/api/jobs/{namespace}/{security}")
    assert delegated["parentJobId"] == reviewer and delegated["status"] == "completed"
    assert delegated["chainId"] == statuses["ai-triage"]["chainId"]
    assert "Security: nothing to see." in (delegated["result"] or "")
    reviewer_requests = [e for e in model_standin.exchanges("anthropic") if e.answer][-1]
    assert "Security: nothing to see." in " ".join(tool_outputs(reviewer_requests.body))

    # The developer's commit, seen by the reviewer's model in its prompt's chain context.
    assert "committed" in " ".join(tool_outputs(codex_requests[2].body))
    context = by_agent["ai-reviewer"]["spec"]["chainContext"]
    output, _, changes = context.partition("Workspace changes")
    assert "Fixed the typo." in output and "committed: yes (1 new commit" in changes
    reviewer_prompt = next(
        e.body for e in model_standin.exchanges("anthropic") if "Fixed the typo." in str(e.body)
    )
    assert "committed: yes" in str(reviewer_prompt)


def test_a_budget_stops_the_chain_from_the_reported_cost_alone(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    model_standin: ModelStandIn,
    tmp_path: Path,
) -> None:
    info = cluster_info
    installed = install(github, tmp_path)
    # 10,000 input tokens of claude-sonnet-4-5 are 0.03 USD: over 0.02. The token budget
    # is far away, so only the cost can stop the chain.
    model_standin.script(text("Triage done.", input_tokens=10_000, output_tokens=10))
    budget = {"maxCost": 0.02, "maxTokens": 10_000_000}
    triage = runtime_agent(
        "ai-triage",
        "claude-code",
        model_standin,
        tmp_path / "triage",
        triggers=[
            {
                "source": "github",
                "events": ["issues.opened"],
                "next": {"agentTriggerName": "ai-developer", "condition": "always"},
            }
        ],
        budget=budget,
    )
    developer = runtime_agent("ai-developer", "claude-code", model_standin, tmp_path / "dev")
    with app_operator(operator, info, namespace, installed, runtime_env()) as op:
        apply(info, namespace, [*secrets_for_models(), triage, developer])
        deliver_issue(op, installed)

        def ended(jobs: list[Obj]) -> bool:
            return any((j.get("status") or {}).get("chainComplete") for j in jobs)

        jobs = jobs_when(info, namespace, ended, "the chain to end")
    [job] = jobs
    status = job["status"]
    assert status["reason"] == "BudgetExceeded", status
    assert status["usage"]["cost"] == pytest.approx(0.03015)
    assert len(model_standin.exchanges()) == 1  # The developer never asked the model.


@pytest.mark.parametrize(
    ("case", "reason", "summary"),
    [
        ("401", "ModelAuthFailed", "the model provider refused the credentials: HTTP 401"),
        ("429-storm", "ModelRateLimited", "the model provider kept rate-limiting the agent"),
        ("5xx", "ModelUnavailable", "the model provider failed or could not be reached"),
        ("turn-limit", "TurnLimitReached", "the agent reached its turn limit"),
    ],
    ids=["401", "429-storm", "5xx", "turn-limit"],
)
def test_a_failing_provider_or_turn_limit_ends_the_job_with_its_own_reason(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    model_standin: ModelStandIn,
    tmp_path: Path,
    case: str,
    reason: str,
    summary: str,
) -> None:
    info = cluster_info
    installed = install(github, tmp_path)
    secrets = secrets_for_models()
    extra: Obj = {}
    retries = "0"
    if case == "401":
        secrets[0]["stringData"]["api-key"] = "sk-wrong"
    elif case == "429-storm":
        model_standin.always(failure(429, retry_after=0))
        retries = "1"  # One retry, refused again: a storm, not one 429.
    elif case == "5xx":
        model_standin.always(failure(529))  # Anthropic's "overloaded".
    else:
        model_standin.script(
            tool("Bash", {"command": "echo checking", "description": "Check"}),
            text("never asked for"),
        )
        extra = {"maxTurns": 1, "allowedTools": ["Bash(echo:*)"]}
    triage = runtime_agent(
        "ai-triage",
        "claude-code",
        model_standin,
        tmp_path / "home",
        triggers=[{"source": "github", "events": ["issues.opened"]}],
    )
    triage["spec"]["runtime"].update(extra)
    for variable in triage["spec"]["env"]:
        if variable["name"] == "AGENTCHAIN_MODEL_RETRIES":
            variable["value"] = retries
    with app_operator(operator, info, namespace, installed, runtime_env()) as op:
        apply(info, namespace, [*secrets, triage])
        deliver_issue(op, installed)
        [job] = jobs_when(
            info,
            namespace,
            lambda jobs: any((j.get("status") or {}).get("chainComplete") for j in jobs),
            "the job to end",
        )
        name, status = job["metadata"]["name"], job["status"]
        assert (status["phase"], status["reason"]) == ("Failed", reason), status
        assert status["message"].startswith(summary), status["message"]
        wide = info.kubectl("get", "aj", name, "-n", namespace, "-o", "wide").stdout
        header, row = wide.splitlines()
        assert header.split()[-1] == "REASON" and row.split()[-1] == reason, wide
        assert chaining.has_event(info, namespace, name, "Warning", reason)

        def commented() -> str:
            bodies = [c.body for c in installed.comments() if "Failed" in c.body]
            return next((b for b in bodies if summary in b), "")

        operating.wait_until(commented, timeout=60, what="the failure on the chain's comment")


def test_claude_code_gets_its_anchor_back_after_compacting(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    model_standin: ModelStandIn,
    tmp_path: Path,
) -> None:
    """Seed 004's recovery point on the real CLI: the model keeps its anchor through the
    MCP tool; its turn then reports a nearly full context, Claude Code compacts the
    conversation, and the request after the compaction carries the job's anchor, which
    the runner's hook read back through the job API."""
    info = cluster_info
    anchor = {"task": "rename the flag", "status": "halfway: 3 of 6 files"}
    # The anchor_set turn reports 195,000 input tokens, over the compaction threshold set
    # below; every later request (the summary, then the work) gets the standing answer.
    model_standin.script(dataclasses.replace(mcp_tool("anchor_set", anchor), input_tokens=195_000))
    model_standin.always(text("Done: the flag is renamed."))
    agent = runtime_agent("ai-worker", "claude-code", model_standin, tmp_path / "home")
    agent["spec"]["env"] += [
        # Compact once a turn used 1% of a 100,000-token window: right after the first.
        {"name": "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "value": "1"},
        {"name": "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "value": "100000"},
    ]
    with app_operator(operator, info, namespace, None, runtime_env()):
        apply(info, namespace, [*secrets_for_models(), agent])
        apply(info, namespace, [chaining.root_job("work-1", "ai-worker")])
        [job] = jobs_when(
            info,
            namespace,
            lambda jobs: any((j.get("status") or {}).get("chainComplete") for j in jobs),
            "the job to end",
        )
    assert job["status"]["phase"] == "Succeeded", job["status"]
    bodies = [json.dumps(e.body) for e in model_standin.exchanges("anthropic")]
    summary = next(i for i, b in enumerate(bodies) if "<summary>" in b)
    after = [b for b in bodies[summary:] if clis.ANCHOR_RECOVERY_HEADING in b]
    assert after, "no request after the compaction carried the anchor"
    assert "halfway: 3 of 6 files" in after[-1]
    # Before the compaction the model had only its own tool call: no injected anchor.
    assert not any(clis.ANCHOR_RECOVERY_HEADING in b for b in bodies[:summary])
