"""A chain of real agent CLIs through the operator, from a GitHub issue to a review.

The operator acts as a GitHub App against the GitHub stand-in, whose git server holds
the example payloads' repository with a typo in its README; GitHub's own
``issues.opened`` example, signed as GitHub signs it, starts seed 003's chain. When
Each step runs in its runtime's reference image (``images/agent/Dockerfile``, imported
by ``e2e/runtime_node.py``; the operator is told them, ``AGENTCHAIN_RUNTIME_IMAGE_*``)
on the real node, and the workspace containers in the session's workspace image (the e2e
agent image), cloning from the git stand-in on the node's bridge. Both CLIs talk to
the stand-in model server (``e2e/models``), which answers each model request with the
next scripted turn: the chain runs one job at a time, and a delegation with a wait holds
its caller, so the turns come in the order written in ``e2e/runtime_chain.py``, which
``make demo``'s real agent CLIs share. Everything between is the product's.

Aspects covered:
- issue opened -> triage (claude-code) -> developer (codex) -> reviewer (claude-code):
  every step succeeds with its CLI's final answer as its result, and reports its usage
  (tokens for each; a cost for Claude Code's, codex reports none); each
  step's agent container ran its runtime's reference image and exited 0, and the
  workspace's container ran the workspace image;
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentchain.hop.rules import jobspec
from agentchain.runtimes.rules import clis
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.github.gitserver import GitServer
from e2e.githubloop import REPOSITORY, Installed, app_operator, install
from e2e.models import ModelStandIn, failure, mcp_tool, text, tool
from e2e.runtime_chain import (
    README,
    apply,
    chain_complete,
    chain_script,
    check_chain,
    deliver_issue,
    jobs_when,
    runtime_agent,
    secrets_for_models,
    seed_chain,
)
from e2e.runtime_node import reference_images

Obj = dict[str, Any]


def runtime_env(info: ClusterInfo, git_server: GitServer | None = None) -> dict[str, str]:
    """The operator's settings for runner and workspace pods: the runtimes' reference
    images (the workspace image is the session's, ``OperatorProcess``'s default)."""
    env = {"AGENTCHAIN_GITHUB_GIT_URL": git_server.url} if git_server is not None else {}
    return env | reference_images(info, ("claude-code", "codex"))


def ran_in(info: ClusterInfo, namespace: str, job: Obj, image: str) -> None:
    """The job's agent container (the pod's main container, or with a workspace its
    second init container) ran ``image`` and exited 0."""
    [pod] = operating.get_json(
        info, "pods", "-n", namespace, "-l", f"labrats.work/agentjob={job['metadata']['name']}"
    )["items"]
    spec, status = pod["spec"], pod["status"]
    containers = spec.get("initContainers", []) + spec["containers"]
    states = status.get("initContainerStatuses", []) + status["containerStatuses"]
    [agent] = [c for c in containers if c["name"] == jobspec.CONTAINER_NAME]
    [state] = [s for s in states if s["name"] == jobspec.CONTAINER_NAME]
    assert agent["image"] == image, agent
    assert state["state"]["terminated"]["exitCode"] == 0, state


@pytest.fixture
def repo(github: GitHubStandIn, git_server: GitServer, tmp_path: Path) -> Installed:
    installed = install(github, tmp_path)
    git_server.create_repo(REPOSITORY, README, private=False)
    return installed


@pytest.fixture
def chain_operator(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> Iterator[operating.OperatorProcess]:
    env = runtime_env(cluster_info, git_server)
    with app_operator(operator, cluster_info, namespace, repo, env) as op:
        yield op


def test_issue_to_review_on_real_clis_with_mcp_tools_workspace_and_usage(
    chain_operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    model_standin: ModelStandIn,
) -> None:
    info, op = cluster_info, chain_operator
    model_standin.script(*chain_script())
    apply(
        info,
        namespace,
        [
            *secrets_for_models(),
            *seed_chain(model_standin),
        ],
    )
    deliver_issue(op, repo)
    jobs = jobs_when(info, namespace, chain_complete, "the chain to complete")
    by_agent = check_chain(op, namespace, model_standin, jobs)
    # Each step ran in its runtime's reference image and exited 0; the workspace's
    # containers ran the workspace image and cloned from the git server.
    images = reference_images(info, ("claude-code", "codex"))
    for agent, job in by_agent.items():
        runtime = "CODEX" if agent == "ai-developer" else "CLAUDE_CODE"
        ran_in(info, namespace, job, images[f"AGENTCHAIN_RUNTIME_IMAGE_{runtime}"])
    developer = by_agent["ai-developer"]["metadata"]["name"]
    selector = f"labrats.work/agentjob={developer}"
    [pod] = operating.get_json(info, "pods", "-n", namespace, "-l", selector)["items"]
    [prepare] = [c for c in pod["spec"]["initContainers"] if c["name"] == "workspace-prepare"]
    assert prepare["image"] == info.agent_image, prepare


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
        triggers=[
            {
                "source": "github",
                "events": ["issues.opened"],
                "next": {"agentTriggerName": "ai-developer", "condition": "always"},
            }
        ],
        budget=budget,
    )
    developer = runtime_agent("ai-developer", "claude-code", model_standin)
    with app_operator(operator, info, namespace, installed, runtime_env(info)) as op:
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
        triggers=[{"source": "github", "events": ["issues.opened"]}],
    )
    triage["spec"]["runtime"].update(extra)
    for variable in triage["spec"]["env"]:
        if variable["name"] == "AGENTCHAIN_MODEL_RETRIES":
            variable["value"] = retries
    with app_operator(operator, info, namespace, installed, runtime_env(info)) as op:
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
    agent = runtime_agent("ai-worker", "claude-code", model_standin)
    agent["spec"]["env"] += [
        # Compact once a turn used 1% of a 100,000-token window: right after the first.
        {"name": "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "value": "1"},
        {"name": "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "value": "100000"},
    ]
    with app_operator(operator, info, namespace, None, runtime_env(info)):
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
