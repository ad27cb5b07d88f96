"""Approval gates and comment commands: the pure rules (flow/rules/approvals.py).

Aspects covered:
- the gate: approved or rejected by the annotation (who and why, as one clean line),
  waiting with its deadline, timed out at the deadline, waiting forever without one;
- who may approve by comment: a listed login (any case) or an allowed association;
  by default (no associations) whoever GitHub says may write to the repository, and,
  when that is not known, only the OWNER; ``repositoryPermission`` raises or turns it
  off; GitHub is asked only when nothing else decides; nobody else;
- command parsing: only ``/agentchain <verb>`` on the first line, verbs exactly, the
  rest a reason; anything else, quoted or later in the body, is no command
  (property-based), in linear time on a huge body.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.flow.rules import approvals
from agentchain.flow.rules.approvals import Approved, Closed, Command, Held
from agentchain.models.aiagent import Approval
from agentchain.models.conditions import Reason

GATE = Approval(approvers=["Carol"], associations=["OWNER"], timeout_seconds=60)


@pytest.mark.parametrize(
    ("annotations", "now", "expected"),
    [
        ({approvals.APPROVAL: "approved", approvals.APPROVAL_BY: "api"}, 0.0, Approved("api")),
        ({approvals.APPROVAL: "Approved"}, 500.0, Approved("annotation")),
        ({}, 1030.0, Held(1060.0)),
        ({}, 1060.0, Closed(Reason.APPROVAL_TIMED_OUT, "Nobody approved it within 60s.")),
        (
            {approvals.APPROVAL: "rejected", approvals.APPROVAL_BY: "github:carol\n<b>"},
            0.0,
            Closed(Reason.APPROVAL_REJECTED, "Rejected by github:carol <b>."),
        ),
        ({approvals.APPROVAL: "maybe"}, 1000.0, Held(1060.0)),
    ],
)
def test_the_gate(annotations: dict[str, str], now: float, expected: approvals.Gate) -> None:
    assert approvals.gate(GATE, annotations, 1000.0, now) == expected


def test_without_a_timeout_a_job_waits_forever() -> None:
    assert approvals.gate(Approval(), {}, 0.0, 10**12) == Held(None)


def test_a_rejection_says_why() -> None:
    annotations = approvals.annotations_for(False, "api", "not today")
    closed = approvals.gate(GATE, annotations, 0.0, 0.0)
    assert closed == Closed(Reason.APPROVAL_REJECTED, "Rejected by api: not today")


@pytest.mark.parametrize(
    ("login", "association", "allowed"),
    [
        ("carol", "NONE", True),
        ("CAROL", None, True),
        ("dave", "OWNER", True),
        ("dave", "MEMBER", False),
        ("mallory", "NONE", False),
        (None, None, False),
    ],
)
def test_who_may_approve_by_comment(
    login: str | None, association: str | None, allowed: bool
) -> None:
    assert approvals.may_approve(GATE, login, association) is allowed


@pytest.mark.parametrize(
    ("association", "permission", "allowed"),
    [
        ("MEMBER", None, False),  # Any organisation member: not by default.
        ("MEMBER", "read", False),
        ("COLLABORATOR", "read", False),
        ("MEMBER", "write", True),
        ("CONTRIBUTOR", "write", True),
        ("NONE", "admin", True),
        ("NONE", "none", False),
        ("OWNER", None, True),  # Without an App, or GitHub silent: only the OWNER.
        ("COLLABORATOR", None, False),
        ("MEMBER", "maintain", False),  # GitHub reports maintain as write; unknown: none.
    ],
)
def test_by_default_whoever_may_write_to_the_repository_approves(
    association: str, permission: str | None, allowed: bool
) -> None:
    default = Approval()
    assert default.associations == [] and default.repository_permission == "write"
    assert approvals.may_approve(default, "dave", association, permission) is allowed


def test_the_permission_needed_and_turned_off() -> None:
    admins = Approval(repository_permission="admin")
    assert approvals.may_approve(admins, "dave", "MEMBER", "write") is False
    assert approvals.may_approve(admins, "dave", "MEMBER", "admin") is True
    off = Approval(approvers=["carol"], associations=["MEMBER"], repository_permission="off")
    assert approvals.may_approve(off, "dave", "COLLABORATOR", "admin") is False
    assert approvals.may_approve(off, "dave", "OWNER", None) is False
    assert approvals.may_approve(off, "dave", "MEMBER", None) is True
    assert approvals.may_approve(off, "carol", "NONE", None) is True
    # GitHub is asked only when the lists and the OWNER rule do not already decide.
    assert approvals.needs_permission(Approval(), "dave", "MEMBER") is True
    assert approvals.needs_permission(Approval(), "dave", "OWNER") is False
    assert approvals.needs_permission(Approval(approvers=["dave"]), "dave", "NONE") is False
    assert approvals.needs_permission(off, "dave", "NONE") is False


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/agentchain approve", Command("approve", "")),
        ("  /agentchain reject  not like this \nmore", Command("reject", "not like this")),
        ("/agentchain stop", Command("stop", "")),
        ("/agentchain retry now", Command("retry", "now")),
        ("/agentchain", None),
        ("/agentchain approved", None),
        ("/agentchains approve", None),
        ("> /agentchain approve", None),
        ("please\n/agentchain approve", None),
        ("", None),
        (None, None),
    ],
)
def test_command_parsing(body: str | None, expected: Command | None) -> None:
    assert approvals.parse_command(body) == expected


@given(st.text(max_size=400))
def test_only_a_command_first_line_is_a_command(text: str) -> None:
    command = approvals.parse_command(text)
    if command is not None:
        first_line = text.lstrip().split("\n", 1)[0]
        assert first_line.split(None, 2)[:2] == ["/agentchain", command.verb]
        assert command.reason.isprintable() and len(command.reason) <= 200


def test_parsing_a_huge_body_is_fast() -> None:
    started = time.perf_counter()
    assert approvals.parse_command("/agentchain approve " + "x " * 5_000_000) is not None
    assert approvals.parse_command("x" * 10_000_000) is None
    assert time.perf_counter() - started < 1.0
