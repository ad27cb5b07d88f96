"""Webhook payloads of the pull-request loop as GitHub delivers them to an App: the fields
the operator reads, built from the stand-in's objects (``model``), so a test names only
what differs (who, which pull request, which comment) and not the envelope around it.

GitHub's own examples (``e2e/githubloop.app_delivery``) stay the starting point where the
whole documented shape matters; these are for the small deliveries a test sends many of.
"""

from __future__ import annotations

import uuid
from typing import Any

from e2e.github import model

Obj = dict[str, Any]


def unique_id() -> int:
    """An id no other delivery of the run has: an identical signed body is one delivery."""
    return uuid.uuid4().int >> 80


def person(login: str, kind: str = "User") -> Obj:
    """A ``user`` or ``sender``: ``kind`` is ``User`` or ``Bot``."""
    return {"login": login, "type": kind}


def from_app(action: str, installation: int, repository: str, sender: Obj, **fields: Any) -> Obj:
    """A delivery of ``action`` with ``fields``, in the envelope every App delivery has:
    its (public) repository, its sender and its installation."""
    return {
        "action": action,
        **fields,
        "repository": {"full_name": repository, "private": False},
        "sender": sender,
        "installation": {"id": installation},
    }


def app_pull(pull: model.PullRequest, app_slug: str, head_sha: str | None = None) -> Obj:
    """``pull`` as a delivery about it names it, opened by the App (a chain's), its head at
    ``head_sha`` (default: where the stand-in has it)."""
    return {
        "number": pull.number,
        "user": person(f"{app_slug}[bot]", "Bot"),
        "author_association": "NONE",
        "head": {"ref": pull.head, "sha": head_sha or pull.head_sha},
    }


def check_pull_item(api_url: str, pull: model.PullRequest, head_sha: str) -> Obj:
    """``pull`` as a check run's, check suite's or workflow run's ``pull_requests`` list
    it (GitHub's ``pull-request-minimal``)."""
    return {
        "url": f"{api_url}/repos/{pull.repo}/pulls/{pull.number}",
        "id": pull.id,
        "number": pull.number,
        "head": {"ref": pull.head, "sha": head_sha, "repo": {}},
        "base": {
            "ref": pull.base,
            "sha": "0" * 40,
            "repo": {"url": f"{api_url}/repos/{pull.repo}", "name": pull.repo.split("/")[-1]},
        },
    }
