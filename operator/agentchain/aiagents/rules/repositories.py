"""Which repositories an agent serves: its binding, and private text.

One webhook secret serves every namespace the operator watches, so without a
binding every repository's events would reach every namespace's agents.  An
AiAgent names the repositories it serves in ``spec.repositories`` (``owner/name``
or ``owner/*``, compared without regard to case, as GitHub does):

* a **bound** agent gets events from those repositories only (an event without a
  repository, e.g. an organization's, reaches no bound agent);
* an **unbound** agent (no list, the default) gets events from public repositories,
  whose text anyone can read anyway, but never from a private or internal one.

So a private repository's issue text reaches only agents that name it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def is_private(payload: Mapping[str, Any]) -> bool:
    """Whether the event's repository is not public (private, or an enterprise's internal).

    GitHub sends ``private`` on every repository object, and only signed payloads
    get here, so an absent flag is a public repository or an event without one.
    """
    repository = _repository(payload)
    return repository.get("private") is True or repository.get("visibility") in (
        "private",
        "internal",
    )


def repository_bound(patterns: Sequence[str], full_name: str) -> bool:
    """Whether ``owner/name`` is one of ``patterns`` (``owner/name`` or ``owner/*``, any case)."""
    owner, slash, name = full_name.casefold().partition("/")
    if not (owner and slash and name) or "/" in name:
        return False  # Not owner/name: no pattern, not even owner/*, may match it.
    for pattern in patterns:
        wanted = pattern.casefold()
        if wanted == full_name.casefold() or wanted == f"{owner}/*":
            return True
    return False


def refusal(patterns: Sequence[str], payload: Mapping[str, Any]) -> str | None:
    """Why an agent bound to ``patterns`` (empty: unbound) must not get this event."""
    name = _repository(payload).get("full_name")
    repo = name if isinstance(name, str) else None
    if patterns:
        if repo is not None and repository_bound(patterns, repo):
            return None
        return f"repository binding: {repo or 'no repository'} is not in spec.repositories"
    if is_private(payload):
        return (
            f"repository binding: {repo or 'the repository'} is private and the agent "
            "lists no spec.repositories"
        )
    return None


def _repository(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    value = payload.get("repository")
    return value if isinstance(value, Mapping) else {}
