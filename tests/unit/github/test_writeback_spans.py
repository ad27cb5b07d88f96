"""The write-back's writes as spans (``traces/rules/githubwrites``), recorded in the real
outbox on a real Redis by the real worker and App client against a small GitHub over
HTTP and the in-process API server (``test_writeback_failures``'s harness).

Aspects covered:
* the comment's creation and then its edit are two spans, in the chain's trace, under
  the span of the job whose change caused each, saying what was written, how, GitHub's
  status and where, and never the comment's text;
* a write-back replayed after a crash between its span and its digest's record (it
  sends the same render again) records no second span; nor does one replayed after a
  comment deleted by someone was created again (the replay finds the record as the 404
  left it);
* a write that went through after a 5xx and a rate limit says so: one retry, one rate
  limit and the seconds waited for it;
* with tracing off, no span is built or recorded, and the comment is written as ever.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentchain import models
from agentchain.core.runtime import Runtime
from agentchain.github import appruntime, posting, writeback
from agentchain.traces.recording import Traces
from agentchain.traces.rules import githubwrites, spans
from agentchain.traces.rules.spans import Span
from tests.unit.fakeapi import FakeApi, Obj, sealed
from tests.unit.github.test_writeback_failures import (
    AGENT,
    CHAIN,
    ISSUE,
    REPO,
    ROOT,
    Answer,
    FakeGitHub,
    api,
    github,
    kubeconfig,
    root_job,
    rt,
    until,
)
from tests.unit.hop.test_hop_write_order import NS

__all__ = ["api", "github", "kubeconfig", "rt"]  # Fixtures.
pytestmark = pytest.mark.redis


def placed_root(phase: str = "Running") -> Obj:
    """The chain's root job as the operator placed it: its position sealed (the chain its
    span is in, ``statuswriting.position``)."""
    job = root_job()
    job["metadata"]["annotations"] = {
        models.CHAIN_ID: CHAIN,
        models.CHAIN_DEPTH: "0",
        models.CHAIN_PATH: json.dumps([AGENT]),
    }
    job["status"]["phase"] = job["status"]["reason"] = phase
    return sealed(job)


@pytest.fixture
async def traced(rt: Runtime, api: FakeApi) -> AsyncIterator[Runtime]:
    rt.traces = Traces(rt.redis, enabled=True)
    api.put("agentjobs", placed_root())
    yield rt


async def outbox_spans(rt: Runtime) -> list[Span]:
    return await rt.traces.outbox.head(1000)


async def written(rt: Runtime, count: int, timeout: float = 10.0) -> list[Span]:
    """The write spans in the outbox, oldest first, once there are ``count``."""
    deadline = time.monotonic() + timeout
    while True:
        found = [s for s in await outbox_spans(rt) if s.name.startswith("github ")]
        if len(found) >= count or time.monotonic() > deadline:
            assert len(found) == count, [s.name for s in found]
            return found
        await asyncio.sleep(0.02)


async def test_a_created_then_edited_comment_is_two_spans_under_the_job(
    traced: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    writeback.observe(traced, "MODIFIED", placed_root())
    (created,) = await written(traced, 1)
    assert len(github.comments) == 1
    body = github.comments[0]
    api.put("agentjobs", placed_root("Succeeded"))
    writeback.observe(traced, "MODIFIED", placed_root("Succeeded"))
    created, edited = await written(traced, 2)

    for span in (created, edited):
        assert span.name == "github comment"
        assert span.trace == spans.trace_id(CHAIN)
        assert span.parent == spans.job_span_id(NS, ROOT)  # The job whose change caused it.
        assert span.start_ns <= span.end_ns
        assert span.error is None
        # Never what was written: no attribute holds any line of the comment.
        lines = [line for line in body.splitlines() if len(line) > 12]
        assert not any(line in str(v) for v in span.attributes.values() for line in lines)
    assert created.span != edited.span
    assert {k: created.attributes[k] for k in ATTRIBUTES} == {
        "agentchain.github.write": "comment",
        "agentchain.github.action": "created",
        "http.response.status_code": 201,
        "agentchain.github.repository": REPO,
        "agentchain.github.number": ISSUE,
        "agentchain.github.retries": 0,
        "agentchain.github.rate_limited": 0,
        "agentchain.job.name": ROOT,
    }
    assert edited.attributes["agentchain.github.action"] == "updated"
    assert edited.attributes["http.response.status_code"] == 200


ATTRIBUTES = [
    "agentchain.github.write",
    "agentchain.github.action",
    "http.response.status_code",
    "agentchain.github.repository",
    "agentchain.github.number",
    "agentchain.github.retries",
    "agentchain.github.rate_limited",
    "agentchain.job.name",
]


async def test_a_replayed_write_back_records_its_span_once(
    traced: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    side = appruntime.side_of(traced)
    assert side is not None
    run = githubwrites.WriteBack(NS, CHAIN, ROOT, CHAIN)
    assert (await posting.flush(side, NS, CHAIN, run))[0] == "written"
    # A crash after the write and its span, before its digest was recorded: the replay
    # renders the same chain over the same recorded digest and sends it again.
    record = await side.records.get(NS, CHAIN)
    assert record.comment_digest is not None
    await side.records.set_digest(NS, CHAIN, "comment", "")
    replay = githubwrites.WriteBack(NS, CHAIN, None, None, retries=3)  # Another cause.
    assert (await posting.flush(side, NS, CHAIN, replay))[0] == "written"
    assert len(github.comments) == 1  # Edited in place, not created twice.
    assert [s.name for s in await outbox_spans(traced)] == ["github comment"]


async def test_a_write_after_a_failure_and_a_rate_limit_says_so(
    traced: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["create_comment"] = [
        Answer(500, "Server Error"),
        Answer(429, "API rate limit exceeded", {"Retry-After": "1"}),
    ]
    writeback.observe(traced, "MODIFIED", placed_root())
    (span,) = await written(traced, 1)
    assert github.comments != []
    assert span.attributes["agentchain.github.retries"] == 1
    assert span.attributes["agentchain.github.rate_limited"] == 1
    assert span.attributes["agentchain.github.rate_limit_wait_s"] == 1.0
    assert span.attributes["http.response.status_code"] == 201
    worker = appruntime.side_of(traced)
    assert worker is not None and isinstance(worker.worker, writeback.Worker)
    w = worker.worker
    await until(lambda: (NS, CHAIN) not in w.running, "the write-back to end")
    assert (NS, CHAIN) not in w.limited  # Forgotten once written.


async def test_with_tracing_off_nothing_is_built(
    rt: Runtime, api: FakeApi, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not rt.traces.enabled  # OTEL_* unset in the unit tests.

    def built(*_: Any) -> None:
        raise AssertionError("a span was built with tracing off")

    monkeypatch.setattr(githubwrites, "render_span", built)
    monkeypatch.setattr(githubwrites, "WriteBack", built)
    api.put("agentjobs", placed_root())
    writeback.observe(rt, "MODIFIED", placed_root())
    await until(lambda: github.comments != [], "the comment")
    await until(lambda: github.names().count("create_comment") == 1, "the write")
    assert await rt.traces.outbox.waiting() == 0


async def test_a_comment_deleted_then_created_again_is_one_span_across_a_replay(
    traced: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    side = appruntime.side_of(traced)
    assert side is not None
    run = githubwrites.WriteBack(NS, CHAIN, ROOT, CHAIN)
    await posting.flush(side, NS, CHAIN, run)
    api.put("agentjobs", placed_root("Succeeded"))
    github.fail["update_comment"] = [Answer(404, "Not Found")]  # Deleted by someone.
    await posting.flush(side, NS, CHAIN, run)
    assert github.names().count("create_comment") == 2
    # A crash after the new comment's span, before its id was recorded: the replay
    # finds the record as the 404 left it, and names the same span.
    await side.records.forget_id(NS, CHAIN, "comment")
    await posting.flush(side, NS, CHAIN, run)
    made = [s for s in await outbox_spans(traced) if s.name == "github comment"]
    assert [s.attributes["agentchain.github.action"] for s in made] == ["created", "created"]
