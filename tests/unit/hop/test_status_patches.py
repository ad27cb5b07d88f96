"""Status patches are built from the typed status model (``statuswriting.fields``/``merged``).

Aspects covered:
- a patch holds exactly the fields set on the model, under their API names, and a
  field set to None is sent as null (cleared by the merge patch), not left out;
- ``merged`` joins partial statuses, a later one winning a field, and skips None;
- datetimes go out as RFC 3339 (what the CRD's ``date-time`` format wants);
- ``Complete`` follows the end: True for Succeeded and Skipped, False for Failed, with
  the status' reason and message.
"""

from __future__ import annotations

import datetime as dt

import pytest

from agentchain.core import statuswriting
from agentchain.hop import closing
from agentchain.models.agentjob import AgentJobStatus, EndPhase, NextStatus


def test_a_patch_is_the_fields_set_with_api_names_and_none_clears() -> None:
    status = AgentJobStatus(phase="Pending", job_name="fix-1-a2", attempt=2, pod_name=None)
    assert statuswriting.fields(status) == {
        "phase": "Pending",
        "jobName": "fix-1-a2",
        "attempt": 2,
        "podName": None,
    }


def test_merged_joins_partials_and_a_later_one_wins() -> None:
    first = AgentJobStatus(phase="Pending", reason="Created", chain_id="c1")
    later = AgentJobStatus(reason="JobCreated", next=[NextStatus(action="none")])
    joined = statuswriting.fields(statuswriting.merged(first, None, later))
    assert joined == {
        "phase": "Pending",
        "reason": "JobCreated",
        "chainId": "c1",
        "next": [{"action": "none"}],  # Unset fields of an entry are not sent either.
    }
    assert statuswriting.fields(statuswriting.merged()) == {}


def test_datetimes_are_rfc3339() -> None:
    when = dt.datetime(2026, 11, 25, 1, 2, 3, tzinfo=dt.UTC)
    assert statuswriting.fields(AgentJobStatus(completion_time=when)) == {
        "completionTime": "2026-11-25T01:02:03Z"
    }


@pytest.mark.parametrize(
    ("phase", "expected"), [("Succeeded", "True"), ("Skipped", "True"), ("Failed", "False")]
)
def test_complete_follows_the_end(phase: EndPhase, expected: str) -> None:
    end = AgentJobStatus(phase=phase, reason="Why", message="What happened.")
    condition = closing._complete(end)
    assert (condition.type, condition.status) == ("Complete", expected)
    assert (condition.reason, condition.message) == ("Why", "What happened.")
