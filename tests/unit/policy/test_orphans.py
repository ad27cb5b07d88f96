"""``policy.orphans.verdict``: what happens to a batch Job seen without an owner."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.policy.orphans import GRACE_SECONDS, verdict

JOB = "child-a1"


def agentjob(
    *, job_name: str | None = None, phase: str | None = None, disposition: str | None = None
) -> dict[str, Any]:
    annotations = {"labrats.work/disposition": disposition} if disposition else {}
    status = {k: v for k, v in (("jobName", job_name), ("phase", phase)) if v is not None}
    return {"metadata": {"name": "child", "annotations": annotations}, "status": status}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(agentjob(), "adopt", id="created-not-started"),
        pytest.param(agentjob(phase="Pending"), "adopt", id="accepted-not-launched"),
        pytest.param(agentjob(job_name=JOB, phase="Running"), "adopt", id="launched-this-job"),
        pytest.param(agentjob(job_name=JOB, phase="Succeeded"), "adopt", id="ran-this-job"),
        pytest.param(agentjob(job_name="child-a2", phase="Running"), "delete", id="other-job"),
        pytest.param(agentjob(phase="Failed"), "delete", id="ended-without-a-job"),
        pytest.param(agentjob(disposition="skipped"), "delete", id="skipped-record"),
        pytest.param(agentjob(disposition="refused:LoopDetected"), "delete", id="refused-record"),
    ],
)
def test_verdict_from_the_agentjob(obj: dict[str, Any], expected: str) -> None:
    assert verdict(JOB, 0.0, obj) == expected
    assert verdict(JOB, GRACE_SECONDS * 10, obj) == expected  # Age only matters when absent.


def test_a_missing_agentjob_is_waited_for_then_given_up() -> None:
    assert verdict(JOB, 0.0, None) == "wait"
    assert verdict(JOB, GRACE_SECONDS - 0.001, None) == "wait"
    assert verdict(JOB, GRACE_SECONDS, None) == "delete"


@given(
    age=st.floats(min_value=0, max_value=1e6),
    job_name=st.one_of(st.none(), st.sampled_from([JOB, "child-a2"])),
    phase=st.one_of(st.none(), st.sampled_from(["Pending", "Running", "Succeeded", "Failed"])),
    disposition=st.one_of(st.none(), st.just("skipped")),
)
def test_only_the_job_its_agentjob_launches_is_ever_adopted(
    age: float, job_name: str | None, phase: str | None, disposition: str | None
) -> None:
    decided = verdict(JOB, age, agentjob(job_name=job_name, phase=phase, disposition=disposition))
    runs_it = disposition is None and (
        job_name == JOB or (job_name is None and phase in (None, "Pending", "Running"))
    )
    assert (decided == "adopt") == runs_it
    assert decided != "wait"
