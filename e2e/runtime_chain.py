"""Seed 003's chain on real agent CLIs: its AiAgents, the models' scripted turns and what
the chain must show afterwards, shared by ``e2e/test_runtime_chain.py`` (each step in
its reference image on the real node) and ``make demo``'s real agent CLIs, so both hold
the chain to the same account.

The chain: issue opened -> triage (claude-code) -> developer (codex, committing in the
chain's workspace) -> reviewer (claude-code), who delegates to a security agent and waits
for its answer. The stand-in model server answers each model request with the next
scripted turn: the chain runs one job at a time, and a delegation with a wait holds its
caller, so the turns come in the order ``chain_script`` writes them.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from e2e import delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.githubloop import Installed, app_delivery
from e2e.models import DEFAULT_API_KEY, ModelStandIn, Reply, mcp_tool, text, tool

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
README = {"README.md": "Hello Wrold\n"}


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
    *,
    triggers: list[Obj] | None = None,
    **spec: Any,
) -> Obj:
    """An AiAgent running ``kind``'s CLI (its reference image's, with its home) against
    the stand-in, with no retries of a refused request."""
    claude = kind == "claude-code"
    env = [{"name": "AGENTCHAIN_MODEL_RETRIES", "value": "0"}]
    if claude:
        # MCP tools in the tool list itself, not behind Claude Code's ToolSearch.
        env.append({"name": "ENABLE_TOOL_SEARCH", "value": "false"})
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


def apply(info: ClusterInfo, namespace: str, objs: list[Obj]) -> None:
    for obj in objs:
        info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))


def deliver_issue(op: operating.OperatorProcess, installed: Installed) -> None:
    payload = app_delivery("issues", "opened", installed.installation.id)
    status, answer = delivering.send(op, *delivering.signed(op.webhook_secret, payload))
    assert status == 202 and answer["jobs"], answer


def jobs_when(
    info: ClusterInfo, namespace: str, done: Callable[[list[Obj]], object], what: str
) -> list[Obj]:
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


def seed_chain(standin: ModelStandIn) -> list[Obj]:
    """Seed 003's chain on real CLIs, and the security agent the reviewer delegates to."""
    return [
        runtime_agent(
            "ai-triage",
            "claude-code",
            standin,
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
            triggers=[{"source": "manual", "next": {"agentTriggerName": "ai-reviewer"}}],
        ),
        runtime_agent("ai-reviewer", "claude-code", standin),
        runtime_agent(
            "ai-security",
            "claude-code",
            standin,
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


def chain_complete(jobs: list[Obj]) -> bool:
    """Every job of the chain ended: the delegated job, a leaf, may say chainComplete
    before its caller (the reviewer) has its answer."""
    phases = [(j.get("status") or {}).get("phase") for j in jobs]
    return len(jobs) == 4 and all(p in ("Succeeded", "Failed", "Cancelled") for p in phases)


def check_chain(
    op: operating.OperatorProcess, namespace: str, standin: ModelStandIn, jobs: list[Obj]
) -> dict[str, Obj]:
    """What the chain must show once ``chain_complete``; returns its jobs by agent."""
    by_agent = {j["spec"]["agentRole"]: j for j in jobs}
    statuses = {agent: j["status"] for agent, j in by_agent.items()}
    assert {a: s["phase"] for a, s in statuses.items()} == dict.fromkeys(by_agent, "Succeeded")
    assert "Triage: the README has a typo." in statuses["ai-triage"]["result"]
    assert statuses["ai-developer"]["result"].strip() == "Fixed the typo."
    assert statuses["ai-reviewer"]["result"].strip() == "APPROVE: the typo is fixed."

    # The chain's protocol reached both CLIs' models as standing instructions.
    first_claude = standin.exchanges("anthropic")[0].body
    first_codex = standin.exchanges("responses")[0].body
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
    codex_requests = standin.exchanges("responses")
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
    reviewer_requests = [e for e in standin.exchanges("anthropic") if e.answer][-1]
    assert "Security: nothing to see." in " ".join(tool_outputs(reviewer_requests.body))

    # The developer's commit, seen by the reviewer's model in its prompt's chain context.
    assert "committed" in " ".join(tool_outputs(codex_requests[2].body))
    context = by_agent["ai-reviewer"]["spec"]["chainContext"]
    output, _, changes = context.partition("Workspace changes")
    assert "Fixed the typo." in output and "committed: yes (1 new commit" in changes
    reviewer_prompt = next(
        e.body for e in standin.exchanges("anthropic") if "Fixed the typo." in str(e.body)
    )
    assert "committed: yes" in str(reviewer_prompt)
    return by_agent
