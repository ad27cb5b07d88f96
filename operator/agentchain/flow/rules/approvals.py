"""Approval gates and comment commands: pure rules.

An AiAgent with ``approval`` has each of its jobs wait, in phase ``AwaitingApproval``,
until it is approved or rejected, or its ``timeoutSeconds`` (counted from the job's
creation) pass; then the job ends Failed (``ApprovalRejected``, ``ApprovalTimedOut``)
and its chain's failure policy applies like after any failure.  The decision is the
AgentJob's annotation ``labrats.work/approval`` (``approved`` or ``rejected``), with
``labrats.work/approval-by``: the job API writes them for an admin, ``kubectl annotate``
for whoever may patch AgentJobs, and the webhook for a comment command from a GitHub
user the agent allows: ``approvers`` by login, an author association listed in
``associations`` (none by default), or, by default, anyone with ``write`` permission on
the repository (``repositoryPermission``), as GitHub tells the App; without an App only
the repository's OWNER.

Comment commands are the first line of an ``issue_comment`` body:
``/agentchain stop|retry|approve|reject [reason]``.  Parsing looks at that one line,
at most a few hundred characters of it, in linear time; anything else is no command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentchain import models
from agentchain.models.aiagent import Approval
from agentchain.models.conditions import Reason

APPROVAL = f"{models.GROUP}/approval"
APPROVAL_BY = f"{models.GROUP}/approval-by"
APPROVAL_REASON = f"{models.GROUP}/approval-reason"
OWNER = "OWNER"
# GitHub's repository permissions as its collaborator-permission answer names them
# (maintain is reported as write, triage as read), weakest first.
PERMISSION_RANK = {"none": 0, "read": 1, "write": 2, "admin": 3}
COMMAND_PREFIX = "/agentchain"
COMMAND_LINE_MAX_CHARS = 300
Verb = Literal["stop", "retry", "approve", "reject"]
VERBS: tuple[Verb, ...] = ("stop", "retry", "approve", "reject")


@dataclass(frozen=True)
class Approved:
    by: str


@dataclass(frozen=True)
class Held:
    """Waiting; ``deadline`` (unix s) when it times out, if it does."""

    deadline: float | None


@dataclass(frozen=True)
class Closed:
    """The gate ends the job: rejected or timed out."""

    reason: str
    message: str


Gate = Approved | Held | Closed


def _clean(text: str, limit: int = 200) -> str:
    kept = "".join(c if c.isprintable() else " " for c in text[: limit * 4])
    return " ".join(kept.split())[:limit]


def gate(approval: Approval, annotations: dict[str, str], created: float, now: float) -> Gate:
    """Where a job of an agent with ``approval`` stands."""
    decision = annotations.get(APPROVAL, "").strip().lower()
    by = _clean(annotations.get(APPROVAL_BY, "")) or "annotation"
    if decision == "approved":
        return Approved(by)
    if decision == "rejected":
        why = _clean(annotations.get(APPROVAL_REASON, ""))
        message = f"Rejected by {by}" + (f": {why}" if why else ".")
        return Closed(Reason.APPROVAL_REJECTED, message)
    timeout = approval.timeout_seconds
    deadline = created + timeout if timeout is not None else None
    if deadline is not None and now >= deadline:
        message = f"Nobody approved it within {timeout}s."
        return Closed(Reason.APPROVAL_TIMED_OUT, message)
    return Held(deadline)


def annotations_for(approved: bool, by: str, reason: str = "") -> dict[str, str]:
    out = {APPROVAL: "approved" if approved else "rejected", APPROVAL_BY: _clean(by) or "unknown"}
    if reason:
        out[APPROVAL_REASON] = _clean(reason)
    return out


def _listed(approval: Approval, login: str | None, association: str | None) -> bool:
    if login and login.lower() in {a.lower() for a in approval.approvers}:
        return True
    return bool(association) and association in approval.associations


def needs_permission(approval: Approval, login: str | None, association: str | None) -> bool:
    """Whether deciding :func:`may_approve` needs the commenter's repository permission."""
    if approval.repository_permission == "off" or _listed(approval, login, association):
        return False
    return association != OWNER


def may_approve(
    approval: Approval,
    login: str | None,
    association: str | None,
    permission: str | None = None,
) -> bool:
    """Whether a GitHub user may approve or reject by a comment.

    By login (``approvers``), by author association (``associations``), or by their
    ``permission`` on the repository as GitHub reported it (``admin``, ``write``,
    ``read``, ``none``; None: not known, when the operator is no GitHub App or GitHub did
    not answer) reaching ``repositoryPermission``.  The repository's OWNER has every
    permission, so counts without asking; nobody else does when it is not known.
    """
    if _listed(approval, login, association):
        return True
    wanted = approval.repository_permission
    if wanted == "off":
        return False
    if association == OWNER:
        return True
    held = PERMISSION_RANK.get(permission or "none", 0)
    return held >= PERMISSION_RANK[wanted]


@dataclass(frozen=True)
class Command:
    verb: Verb
    reason: str


def parse_command(body: str | None) -> Command | None:
    """The comment command on the body's first line, or None."""
    if not body:
        return None
    line = body.lstrip()[: COMMAND_LINE_MAX_CHARS + 1].split("\n", 1)[0].strip()
    words = line.split(None, 2)
    if len(words) < 2 or words[0] != COMMAND_PREFIX or words[1] not in VERBS:
        return None
    verb: Verb = words[1]  # Checked against VERBS above.
    return Command(verb, _clean(words[2]) if len(words) > 2 else "")
