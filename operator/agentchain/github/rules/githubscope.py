"""What the operator may do on GitHub for a job or a chain: pure, from recorded facts.

Two scopes, both narrowed to one repository of one installation, the one the event
that started the chain came from (``spec.event``, written by the webhook from the
signed delivery and copied unchanged to every job of the chain):

- a **job token** (:func:`job_scope`): the permissions the job's AiAgent declares
  (``github.permissions``) and nothing else. GitHub refuses to mint a token with more
  than the App was granted, and the token itself is refused for any other repository,
  so an agent can never act beyond its AiAgent's declaration, whatever it asks the job
  API for (the refresh re-mints the scope recorded at launch, not one from the request);
- the operator's own **write-back** (:func:`writeback_scope`): ``issues: write`` for an
  issue's comment, ``pull_requests: write`` (and ``checks: write`` for the Check Run)
  on a pull request, and ``pull_requests: write`` on the chain's pull request for a
  reviewer's review (:func:`review_permissions`).

A job or chain without a GitHub event (manual, API) has no repository: no token and
nothing written back, with the reason given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import GitHubAccess, GitHubPermissions

REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class Scope:
    """One installation, one repository, these permissions (GitHub's names)."""

    installation_id: int
    repository: str
    """owner/name."""
    permissions: dict[str, str] = field(default_factory=dict)

    @property
    def owner(self) -> str:
        return self.repository.partition("/")[0]

    @property
    def name(self) -> str:
        return self.repository.partition("/")[2]

    def to_record(self) -> dict[str, object]:
        return {
            "installation": self.installation_id,
            "repository": self.repository,
            "permissions": dict(sorted(self.permissions.items())),
        }


@dataclass(frozen=True)
class NoScope:
    """GitHub access was asked for but cannot be given; ``reason`` says why."""

    reason: str


@dataclass(frozen=True)
class Target:
    """Where a chain is written back: an issue or pull request of one repository."""

    scope: Scope
    number: int
    pull_request: bool
    head_sha: str | None


def permissions_of(declared: GitHubPermissions | None) -> dict[str, str]:
    """The declared permissions under GitHub's names (``pull_requests``), unset ones left out."""
    if declared is None:
        return {}
    return {k: v for k, v in declared.model_dump(exclude_none=True).items() if v}


def _installation(event: JobEvent | None) -> tuple[int, str] | NoScope:
    if event is None or event.source != "github":
        return NoScope("the job was not started by a GitHub event, so it has no repository")
    if event.installation_id is None:
        return NoScope("the delivery named no App installation (is the webhook the App's?)")
    if not event.repository or not REPOSITORY.match(event.repository):
        return NoScope("the delivery named no repository")
    return event.installation_id, event.repository


def job_scope(access: GitHubAccess | None, event: JobEvent | None) -> Scope | NoScope | None:
    """The job token's scope; None when the AiAgent declares no permissions (no token)."""
    permissions = permissions_of(access.permissions if access else None)
    if not permissions:
        return None
    found = _installation(event)
    if isinstance(found, NoScope):
        return found
    return Scope(found[0], found[1], permissions)


def writeback_permissions(pull_request: bool, check_run: bool) -> dict[str, str]:
    if not pull_request:
        return {"issues": "write"}
    return {"pull_requests": "write", **({"checks": "write"} if check_run else {})}


def review_permissions() -> dict[str, str]:
    """A review on a pull request: read its files and post (``pulls/create-review``)."""
    return {"pull_requests": "write"}


def writeback_target(event: JobEvent | None, *, check_run: bool) -> Target | NoScope:
    """Where the chain of a job started by ``event`` is written back."""
    found = _installation(event)
    if isinstance(found, NoScope):
        return found
    assert event is not None
    if event.number is None or event.subject is None:
        return NoScope(f"a {event.name} event is about no issue or pull request")
    pull = event.subject == "pull_request"
    scope = Scope(found[0], found[1], writeback_permissions(pull, check_run))
    return Target(scope, event.number, pull, event.head_sha if pull else None)


TOKEN_SECRET_KEY = "github-token"
"""The job Secret's key holding the job's installation token."""


def job_env(access: GitHubAccess | None, secret_name: str, api_url: str) -> list[dict[str, object]]:
    """``GITHUB_TOKEN`` (from the job's Secret, never expanded) and ``GITHUB_API_URL`` for
    an agent that declares permissions; nothing otherwise.

    The reference is ``optional``: a job whose token could not be minted (App not
    installed, permission missing; an Event says why) still runs, without the variable.
    The batch Job is the same either way, so a replayed launch builds an identical Job.
    """
    if not permissions_of(access.permissions if access else None):
        return []
    ref = {"name": secret_name, "key": TOKEN_SECRET_KEY, "optional": True}
    return [
        {"name": "GITHUB_TOKEN", "valueFrom": {"secretKeyRef": ref}},
        {"name": "GITHUB_API_URL", "value": api_url.replace("$", "$$")},
    ]
