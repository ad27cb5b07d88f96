"""Which pods and batch Jobs speak for an AgentJob (``core.rules.ownedby``, issue 14).

Aspects covered:
- the controller reference: only a ``controller: true`` reference to a ``batch/v1`` Job
  counts; none, a non-controller one, another kind controlling, or a malformed one is none;
- a pod is refused without a controller Job, when that Job does not exist, when the
  uid differs, when the Job runs another AgentJob or is not the name the operator gives
  that AgentJob's attempt, or is not controlled by that AgentJob (no owner, another
  AgentJob, a non-controller reference); the operator's own pod of attempt 1 or 2 is
  accepted;
- attempts come from the label, defaulting to 1 for missing or malformed values.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentchain import models
from agentchain.core.rules import ownedby

UID = "11111111-2222-3333-4444-555555555555"


OWNER = {
    "apiVersion": models.API_VERSION,
    "kind": "AgentJob",
    "name": "fix-1",
    "uid": "aj-uid",
    "controller": True,
}


def job(
    name: str = "fix-1",
    agentjob: str = "fix-1",
    attempt: str | None = None,
    owners: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    labels = {models.AGENTJOB_LABEL: agentjob}
    if attempt is not None:
        labels[models.ATTEMPT_LABEL] = attempt
    refs = [OWNER] if owners is None else owners
    return {"metadata": {"name": name, "uid": UID, "labels": labels, "ownerReferences": refs}}


def ref(**over: Any) -> dict[str, Any]:
    base = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "fix-1",
        "uid": UID,
        "controller": True,
    }
    return {**base, **over}


def pod(*refs: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "ownerReferences": list(refs)}}


@pytest.mark.parametrize(
    ("refs", "expected"),
    [
        pytest.param([ref()], ownedby.JobRef("fix-1", UID), id="controller-job"),
        pytest.param([], None, id="none"),
        pytest.param([ref(controller=False)], None, id="not-controller"),
        pytest.param([ref(controller="true")], None, id="controller-not-a-bool"),
        pytest.param([ref(kind="ReplicaSet", apiVersion="apps/v1")], None, id="other-kind"),
        pytest.param([ref(apiVersion="batch/v2")], None, id="other-version"),
        pytest.param([ref(uid="")], None, id="empty-uid"),
        pytest.param([ref(name=None)], None, id="no-name"),
        pytest.param(
            [ref(controller=False, name="x"), ref()], ownedby.JobRef("fix-1", UID), id="second"
        ),
        pytest.param([ref(kind="Thing"), ref(name="later")], None, id="first-controller-wins"),
    ],
)
def test_controller_job(refs: list[dict[str, Any]], expected: ownedby.JobRef | None) -> None:
    assert ownedby.controller_job(pod(*refs)) == expected


def test_a_pod_without_metadata_has_no_controller() -> None:
    assert ownedby.controller_job({}) is None


@pytest.mark.parametrize(
    ("the_pod", "the_job", "agentjob", "refused"),
    [
        pytest.param(pod(ref()), job(), "fix-1", None, id="the-operators-pod"),
        pytest.param(
            pod(ref(name="fix-1-a2")), job("fix-1-a2", attempt="2"), "fix-1", None, id="a-retry"
        ),
        pytest.param(pod(), job(), "fix-1", "no batch Job as its controller", id="labels-only"),
        pytest.param(pod(ref()), None, "fix-1", "does not exist", id="no-such-job"),
        pytest.param(pod(ref(uid="forged")), job(), "fix-1", "uid", id="forged-uid"),
        pytest.param(pod(ref()), job(agentjob="other"), "fix-1", "does not run", id="other-aj"),
        pytest.param(
            pod(ref(name="evil")), job("evil"), "fix-1", "does not run", id="unexpected-name"
        ),
        pytest.param(
            pod(ref()), job(attempt="3"), "fix-1", "does not run", id="attempt-name-mismatch"
        ),
        pytest.param(pod(ref()), job(owners=[]), "fix-1", "does not run", id="ownerless-job"),
        pytest.param(
            pod(ref()),
            job(owners=[{**OWNER, "name": "other"}]),
            "fix-1",
            "does not run",
            id="job-of-another-agentjob",
        ),
        pytest.param(
            pod(ref()),
            job(owners=[{**OWNER, "controller": False}]),
            "fix-1",
            "does not run",
            id="owner-not-controller",
        ),
    ],
)
def test_pod_refusal(
    the_pod: dict[str, Any], the_job: dict[str, Any] | None, agentjob: str, refused: str | None
) -> None:
    reason = ownedby.pod_refusal(the_pod, the_job, agentjob)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason


@pytest.mark.parametrize(
    ("label", "attempt"), [(None, 1), ("1", 1), ("3", 3), ("0", 1), ("-2", 1), ("x", 1)]
)
def test_attempt_of(label: str | None, attempt: int) -> None:
    assert ownedby.attempt_of(job(attempt=label)) == attempt


def test_controller_agentjob() -> None:
    assert ownedby.controller_agentjob(job()) == ownedby.JobRef("fix-1", "aj-uid")
    assert ownedby.controller_agentjob(job(owners=[])) is None
    assert ownedby.controller_agentjob({}) is None
    other_kind = {**OWNER, "kind": "ReplicaSet", "apiVersion": "apps/v1"}
    assert ownedby.controller_agentjob(job(owners=[other_kind, OWNER])) is None
