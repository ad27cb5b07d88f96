"""A review's and a round's reply's spans (``reviewing``, ``threadreplies``), recorded in
the real outbox on a real Redis, with the chain's real records and creation claim, the
jobs on the in-process API server (``test_writeback_failures``'s harness); GitHub's side
is a small stand-in object answering the calls they make.

Aspects covered:
* a reviewer's verdict posted is one ``github review`` span under its job's span, in its
  job's chain's trace, ``created`` (or ``found`` by its marker after a crash), with the
  repository and pull request and never its text; GitHub refusing it (422) is a
  ``refused`` error span, and a malformed block one with no status (nothing was asked);
* a follow-up round's reply in its review thread is one ``github reply`` span under the
  round's job's span, in the round's trace, naming the chain it answers in; a thread
  that takes no reply is ``refused``;
* a replay of either (the span recorded, the id not) records no second span.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentchain import models
from agentchain.core.runtime import Runtime
from agentchain.github import appruntime, posting, reviewing, threadreplies
from agentchain.github.appruntime import GitHubSide
from agentchain.github.githuberrors import GitHubError
from agentchain.github.githubrecords import REPLY_FIELD, REVIEW_FIELD, ChainRecord
from agentchain.github.rules import progress
from agentchain.github.rules.githubscope import Scope, Target
from agentchain.models.agentjob import AgentJob
from agentchain.store import keys
from agentchain.traces.recording import Traces
from agentchain.traces.rules import spans
from agentchain.traces.rules.githubwrites import WriteBack
from agentchain.traces.rules.spans import Span
from tests.unit.fakeapi import FakeApi, Obj, sealed
from tests.unit.github.test_writeback_failures import CHAIN, api, github, kubeconfig, rt
from tests.unit.hop.test_hop_write_order import NS

__all__ = ["api", "github", "kubeconfig", "rt"]  # Fixtures.
pytestmark = pytest.mark.redis
REPO, PULL, ROUND = "acme/widgets", 3, "round-c2"
VERDICT = "a verdict whose text must stay off the trace"
BLOCK = "```agentchain-review\n" + json.dumps({"verdict": "approve", "body": VERDICT}) + "\n```"


class StandIn:
    """GitHub's answers to a review's and a reply's calls; ``refuse``: the status the next
    creation gets (422, 404) instead."""

    def __init__(self) -> None:
        self.reviews: list[dict[str, Any]] = []
        self.replies: list[str] = []
        self.refuse: int | None = None

    async def find_review(self, scope: Scope, number: int, marker: str) -> int | None:
        return next(
            (i + 1 for i, r in enumerate(self.reviews) if r["body"].startswith(marker)), None
        )

    async def pull_head(self, scope: Scope, number: int) -> tuple[str, str]:
        return "ec26c3e57ca3a959ca5aad62de7213c562f8c821", "octocat"

    async def pull_files(self, scope: Scope, number: int) -> list[tuple[str, str | None]]:
        return []

    async def bot_login(self) -> str:
        return "agentchain[bot]"

    async def create_review(self, scope: Scope, number: int, head: str, fields: Any) -> int:
        self._refused()
        self.reviews.append(fields)
        return len(self.reviews)

    async def find_reply(self, scope: Scope, number: int, marker: str) -> int | None:
        return next((i + 1 for i, r in enumerate(self.replies) if r.startswith(marker)), None)

    async def create_reply(self, scope: Scope, number: int, comment_id: int, body: str) -> int:
        self._refused()
        self.replies.append(body)
        return len(self.replies)

    def _refused(self) -> None:
        status, self.refuse = self.refuse, None
        if status is not None:
            raise GitHubError("Refused", "GitHub refused it", status=status)


@pytest.fixture
async def side(rt: Runtime) -> AsyncIterator[GitHubSide]:
    rt.traces = Traces(rt.redis, enabled=True)
    found = appruntime.side_of(rt)
    assert found is not None
    found.app = StandIn()  # type: ignore[assignment]
    yield found


def placed(api: FakeApi, name: str, chain: str, role: str, **status: Any) -> Obj:
    """A job the operator placed in ``chain`` (its position and event sealed)."""
    job: Obj = {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {models.CHAIN_ID: chain},
            "annotations": {
                models.CHAIN_ID: chain,
                models.CHAIN_DEPTH: "0",
                models.CHAIN_PATH: json.dumps([role]),
            },
        },
        "spec": {"agentRole": role, "prompt": "go", "event": status.pop("event", None)},
        "status": {"phase": "Succeeded", "chainId": chain, **status},
    }
    return api.put("agentjobs", sealed(job))


def _target() -> Target:
    return Target(Scope(7, REPO, {"issues": "write"}), PULL, True, None)


async def _review(side: GitHubSide, obj: Obj, record: ChainRecord | None = None) -> None:
    parsed = AgentJob.model_validate({"spec": obj["spec"], "status": obj["status"]})
    job = progress.JobRecord(obj["metadata"]["name"], "2026-11-27T00:00:00Z", parsed)
    chain = reviewing.Reviewed([job], frozenset({"reviewer"}), {job.name: obj}, False)
    claim = lambda: posting.claimed(side, NS, CHAIN)  # noqa: E731
    run = WriteBack(NS, CHAIN, retries=1)
    await reviewing.post_due(side, NS, CHAIN, chain, _target(), record or ChainRecord(), claim, run)


async def _forget(side: GitHubSide, field: str) -> None:
    """The chain's record as a crash left it: the write's id never recorded."""
    await side.rt.redis.hdel(keys.github_chain(NS, CHAIN), field)  # type: ignore[misc]


async def _spans(side: GitHubSide) -> list[Span]:
    return [s for s in await side.rt.traces.outbox.head(100) if s.name.startswith("github ")]


async def test_a_posted_review_is_a_span_under_its_job(side: GitHubSide, api: FakeApi) -> None:
    obj = placed(api, "rev-1", CHAIN, "reviewer", result=BLOCK)
    await _review(side, obj)
    (span,) = await _spans(side)
    assert span.name == "github review"
    assert (span.trace, span.parent) == (spans.trace_id(CHAIN), spans.job_span_id(NS, "rev-1"))
    assert span.error is None and span.start_ns <= span.end_ns
    found = dict(span.attributes)
    assert found["agentchain.github.action"] == "created"
    assert (found["agentchain.github.repository"], found["agentchain.github.number"]) == (
        REPO,
        PULL,
    )
    assert found["agentchain.github.retries"] == 1 and found["agentchain.job.name"] == "rev-1"
    assert not any(VERDICT in str(v) for v in found.values())
    # A crash after the span, before the review's id was recorded: found by its marker,
    # and the same span, kept once.
    await _forget(side, REVIEW_FIELD + "rev-1")
    await _review(side, obj)
    assert len(side.app.reviews) == 1  # type: ignore[attr-defined]
    assert [s.span for s in await _spans(side)] == [span.span]


async def test_a_refused_review_is_an_error_span(side: GitHubSide, api: FakeApi) -> None:
    side.app.refuse = 422  # type: ignore[attr-defined]
    await _review(side, placed(api, "rev-2", CHAIN, "reviewer", result=BLOCK))
    malformed = placed(api, "rev-3", CHAIN, "reviewer", result="```agentchain-review\n{\n```")
    await _review(side, malformed)
    refused, bad = await _spans(side)
    assert refused.attributes["agentchain.github.action"] == "refused"
    assert refused.error == "refused by GitHub"
    assert bad.error == "malformed review block"
    assert "http.response.status_code" not in bad.attributes  # GitHub was not asked.
    assert bad.parent == spans.job_span_id(NS, "rev-3")


def _round(api: FakeApi, name: str) -> Obj:
    event = {
        "source": "github",
        "name": "pull_request_review_comment",
        "repository": REPO,
        "number": PULL,
        "installationId": 7,
        "subject": "pull_request",
        "continues": CHAIN,
        "round": 2,
        "replyTo": 41,
    }
    return placed(api, name, ROUND, "fixer", result="fixed it", event=event)


async def _reply(side: GitHubSide, objects: dict[str, Obj]) -> None:
    claim = lambda: posting.claimed(side, NS, CHAIN)  # noqa: E731
    run = WriteBack(NS, CHAIN)
    await threadreplies.post_due(
        side, NS, CHAIN, objects, _target(), ChainRecord(), claim,
        headings={}, heading="Hand-off", allow_mentions=False, run=run,
    )  # fmt: skip


async def test_a_rounds_reply_is_a_span_in_the_rounds_trace(side: GitHubSide, api: FakeApi) -> None:
    obj = _round(api, "fix-2")
    await _reply(side, {"fix-2": obj})
    (span,) = await _spans(side)
    assert span.name == "github reply"
    assert (span.trace, span.parent) == (spans.trace_id(ROUND), spans.job_span_id(NS, "fix-2"))
    assert span.attributes["agentchain.github.chain"] == CHAIN
    assert span.attributes["agentchain.chain.id"] == ROUND
    assert span.attributes["agentchain.github.action"] == "created"
    # Replayed with its id unrecorded: found by its marker, the same span, kept once.
    await _forget(side, REPLY_FIELD + "fix-2")
    await _reply(side, {"fix-2": obj})
    assert len(side.app.replies) == 1  # type: ignore[attr-defined]
    assert [s.span for s in await _spans(side)] == [span.span]


async def test_a_reply_a_thread_refuses_is_an_error_span(side: GitHubSide, api: FakeApi) -> None:
    side.app.refuse = 404  # type: ignore[attr-defined]
    await _reply(side, {"fix-3": _round(api, "fix-3")})
    (span,) = await _spans(side)
    assert span.attributes["agentchain.github.action"] == "refused"
    assert span.error == "refused by GitHub"
