"""Which reviews of a chain are due, and on which pull request (``agentchain.github.reviewing``).

Aspects covered:
* the pull request: the one the chain was started on, else the one its workspace
  opened (recorded as ``owner/name#N``), else none; a malformed record is none; the
  scope is ``pull_requests: write`` on that pull request's repository;
* a job's review is due only when its agent opted in, it succeeded, its output holds a
  review block, and nothing is recorded for it; a malformed block is due (to be
  reported), output without a block is not;
* an agent's opt-in counts only when every AiAgent of its trigger name opted in.
"""

from __future__ import annotations

import json
from typing import Any

from agentchain.github import posting, reviewing
from agentchain.github.githubrecords import ChainRecord
from agentchain.github.rules import progress, reviews
from agentchain.github.rules.githubscope import Scope, Target
from agentchain.models.agentjob import AgentJob
from agentchain.models.aiagent import AiAgent

BLOCK = "```agentchain-review\n" + json.dumps({"verdict": "approve"}) + "\n```"


def _job(name: str, role: str, phase: str, result: str | None) -> progress.JobRecord:
    status: dict[str, Any] = {"phase": phase, **({"result": result} if result else {})}
    parsed = AgentJob.model_validate({"spec": {"agentRole": role}, "status": status})
    return progress.JobRecord(name, "2026-11-27T00:00:00Z", parsed)


def _target(pull_request: bool) -> Target:
    return Target(Scope(7, "acme/widgets", {"issues": "write"}), 3, pull_request, None)


def test_the_pull_request_started_on_or_opened() -> None:
    on_pull = reviewing.pull_of(_target(True), ChainRecord())
    assert on_pull == (Scope(7, "acme/widgets", {"pull_requests": "write"}), 3)
    opened = reviewing.pull_of(_target(False), ChainRecord(pull="acme/other#12"))
    assert opened == (Scope(7, "acme/other", {"pull_requests": "write"}), 12)
    assert reviewing.pull_of(_target(False), ChainRecord()) is None
    assert reviewing.pull_of(_target(False), ChainRecord(pull="nonsense#x")) is None


def test_due_reviews() -> None:
    jobs = [
        _job("rev-ok", "ai-reviewer", "Succeeded", f"Looks fine.\n{BLOCK}"),
        _job("rev-done", "ai-reviewer", "Succeeded", BLOCK),
        _job("rev-failed", "ai-reviewer", "Failed", BLOCK),
        _job("rev-plain", "ai-reviewer", "Succeeded", "No verdict block."),
        _job("rev-bad", "ai-reviewer", "Succeeded", "```agentchain-review\nnope\n```"),
        _job("dev", "ai-developer", "Succeeded", BLOCK),  # Not opted in.
    ]
    record = ChainRecord(reviews={"rev-done": "41"})
    found = reviewing.due(jobs, frozenset({"ai-reviewer"}), record)
    assert [(j.name, type(r)) for j, r in found] == [
        ("rev-ok", reviews.Review),
        ("rev-bad", reviews.Malformed),
    ]


def _agent(name: str, trigger: str, review: bool | None) -> AiAgent:
    spec: dict[str, Any] = {"triggerName": trigger}
    if review is not None:
        spec["github"] = {"review": review}
    return AiAgent.model_validate({"metadata": {"name": name}, "spec": spec})


def test_every_agent_of_a_trigger_name_must_opt_in() -> None:
    agents = [
        _agent("a", "ai-reviewer", True),
        _agent("b", "ai-developer", None),
        _agent("c", "ai-shared", True),
        _agent("d", "ai-shared", False),
    ]
    assert posting._reviewers(agents) == frozenset({"ai-reviewer"})
