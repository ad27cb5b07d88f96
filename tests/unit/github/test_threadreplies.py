"""A follow-up round's reply in its review thread (``agentchain.github.threadreplies``),
on the real Redis records and claim, the jobs on the in-process API server, GitHub's
side a small stand-in object (``test_review_spans``'s harness).

Aspects covered:
* the reply carries the round's hand-off section under the heading of the round's own
  agent, not the heading of the agent that started the chain it continues (nor the
  text around the section);
* an agent whose trigger name two AiAgents share has no heading of its own
  (``posting._headings``), so the chain's is used.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentchain.github import posting, threadreplies
from agentchain.github.appruntime import GitHubSide
from agentchain.github.githubrecords import ChainRecord
from agentchain.models.aiagent import AiAgent
from tests.unit.fakeapi import FakeApi
from tests.unit.github.test_review_spans import (
    PULL,
    REPO,
    ROUND,
    _target,
    api,
    github,
    kubeconfig,
    placed,
    rt,
    side,
)
from tests.unit.github.test_writeback_failures import CHAIN
from tests.unit.hop.test_hop_write_order import NS

__all__ = ["api", "github", "kubeconfig", "rt", "side"]  # Fixtures.
pytestmark = pytest.mark.redis
EVENT = {
    "source": "github",
    "name": "pull_request_review_comment",
    "repository": REPO,
    "number": PULL,
    "installationId": 7,
    "subject": "pull_request",
    "continues": CHAIN,
    "round": 1,
    "replyTo": 41,
}


async def test_a_rounds_reply_is_its_own_agents_hand_off(side: GitHubSide, api: FakeApi) -> None:
    result = "Thinking it over.\n\n## Answer\nFixed the README.\n"
    obj = placed(api, "fix-1", ROUND, "ai-developer", result=result, event=EVENT)
    await threadreplies.post_due(
        side, NS, CHAIN, {"fix-1": obj}, _target(), ChainRecord(),
        lambda: posting.claimed(side, NS, CHAIN),
        headings={"ai-developer": "## Answer", "ai-triage": "## Downstream Directives"},
        heading="## Downstream Directives", allow_mentions=False,
    )  # fmt: skip
    (body,) = side.app.replies  # type: ignore[attr-defined]
    assert "Fixed the README." in body and "Thinking it over." not in body


def _agent(name: str, trigger: str, heading: str) -> AiAgent:
    spec: dict[str, Any] = {"triggerName": trigger, "handoffHeading": heading}
    return AiAgent.model_validate({"metadata": {"name": name}, "spec": spec})


def test_a_shared_trigger_name_has_no_heading_of_its_own() -> None:
    agents = [
        _agent("a", "ai-developer", "## Answer"),
        _agent("b", "ai-shared", "## One"),
        _agent("c", "ai-shared", "## Two"),
    ]
    assert posting._headings(agents) == {"ai-developer": "## Answer"}
