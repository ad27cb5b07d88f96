"""The dashboard's jobs list and job page, as pure functions (issue 19).

Aspects covered:
* filters the API server cannot apply: phase (seed status, phase, new phases), chain,
  agent, repository;
* sorting by each field both ways, and keyset pages that walk through every job
  exactly once, also when jobs are created between pages;
* a job's phase history (creation, start, conditions, its hops, completion) in order,
  and the output summary's reasons.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentchain import models
from agentchain.store.chainrecords import ChainRecord
from agentchain.store.outputs import OutputRecord
from agentchain.web.dashboard import jobdetail
from agentchain.web.dashboard import uilisting as ui

Obj = dict[str, Any]


def job(n: int, *, phase: str = "Succeeded", agent: str = "a", repo: str | None = None) -> Obj:
    return {
        "metadata": {
            "name": f"job-{n:04d}",
            "namespace": "ns",
            "creationTimestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z",
            "annotations": {models.CHAIN_ID: f"c{n % 3}"},
        },
        "spec": {"agentRole": agent, "event": {"repository": repo} if repo else None},
        "status": {"phase": phase},
    }


def query(**fields: Any) -> ui.UiJobQuery:
    return ui.UiJobQuery.model_validate(fields)


@pytest.mark.parametrize(
    ("value", "phase", "kept"),
    [
        ("completed", "Succeeded", True),
        ("Succeeded", "Succeeded", True),
        ("running", "Succeeded", False),
        ("AwaitingApproval", "AwaitingApproval", True),
        ("queued", "Queued", True),
    ],
)
def test_phase_filter(value: str, phase: str, kept: bool) -> None:
    phases = ui.phases_for(value)
    assert phases is not None
    assert ui.matches(job(1, phase=phase), query(), phases) is kept


def test_a_phase_that_is_no_name_is_refused() -> None:
    assert ui.phases_for("a b") is None and ui.phases_for("ü") is None


def test_chain_agent_and_repository_filters() -> None:
    one = job(1, agent="dev", repo="org/app")
    assert ui.matches(one, query(chain="c1", agent="dev", repository="org/app"), None)
    assert not ui.matches(one, query(chain="c2"), None)
    assert not ui.matches(one, query(agent="triage"), None)
    assert not ui.matches(one, query(repository="org/other"), None)
    assert not ui.matches(job(2), query(repository="org/app"), None)


@pytest.mark.parametrize("sort", ["created", "agent", "phase", "name", "namespace"])
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_pages_walk_every_job_once_in_order(sort: str, order: str) -> None:
    jobs = [job(n, phase=["Running", "Failed"][n % 2], agent=f"a{n % 5}") for n in range(237)]
    q = query(sort=sort, order=order, limit=50)
    seen: list[str] = []
    after = None
    while True:
        rows, after, total = ui.page(jobs, q, after)
        assert total == 237 and len(rows) <= 50
        seen += [r["metadata"]["name"] for r in rows]
        if after is None:
            break
    assert sorted(seen) == sorted(j["metadata"]["name"] for j in jobs) and len(seen) == 237
    keys = [ui.key_of(j, q.sort) for j in jobs]
    assert [k[2] for k in sorted(keys, reverse=order == "desc")] == seen


def test_a_job_created_between_pages_neither_repeats_nor_skips_a_row() -> None:
    jobs = [job(n) for n in range(100)]
    first, after, _ = ui.page(jobs, query(limit=40), None)
    jobs.append(job(500))  # Newer than everything: it belongs before the first page.
    second, _, _ = ui.page(jobs, query(limit=40), after)
    names = [r["metadata"]["name"] for r in first + second]
    assert names == [f"job-{n:04d}" for n in range(99, 19, -1)]


def test_history_is_in_time_order_with_this_jobs_hops() -> None:
    obj = job(1)
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:03Z"
    obj["status"].update(
        startTime="2026-01-01T00:00:03+00:00",  # The same second, written the other way.
        completionTime="2026-01-01T00:00:09Z",
        conditions=[
            {
                "type": "Ready",
                "status": "True",
                "reason": "Started",
                "lastTransitionTime": "2026-01-01T00:00:04Z",
            }
        ],
    )
    hops = [
        {"jobName": "job-0001", "phase": "Succeeded", "decision": "spawned", "at": 1767225608.0},
        {"jobName": "other", "phase": "Failed", "decision": "none", "at": 1767225601.0},
    ]
    rows = jobdetail.history(obj, ChainRecord("c1", hops=hops))
    assert [r["what"] for r in rows] == [
        "created",
        "started",
        "Ready=True",
        "Succeeded: next spawned",
        "Succeeded",
    ]


def test_output_summary_says_why_there_is_none() -> None:
    assert "Not captured yet" in jobdetail.output_summary(None)["reason"]
    lost = OutputRecord("", 0, False, 0.0, unavailable_reason="pod gone")
    assert jobdetail.output_summary(lost) == {
        "available": False,
        "reason": "Output unavailable: pod gone",
    }
    kept = jobdetail.output_summary(OutputRecord("x", 10, True, 1.0))
    assert kept["available"] and kept["fullSize"] == 10 and kept["truncated"]
