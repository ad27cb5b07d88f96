"""A commenter's permission on the repository, asked of GitHub: who may approve by a comment.

An approval gate lets anyone with ``repositoryPermission`` (``write`` by default) on the
event's repository approve or reject by a ``/agentchain approve|reject`` comment, as
claude-code-action and Copilot do (``flow/rules/approvals.may_approve``).  Only GitHub
knows that permission: with the App's installation token (``metadata: read``, which
every installation token has) the operator asks ``GET /repos/{o}/{r}/collaborators/
{login}/permission`` for the installation the delivery names.

Without an App, without an installation in the delivery, or when GitHub does not answer
within :data:`DEADLINE_SECONDS` (the webhook's answer waits for it), the permission is
not known (None) and the policy counts only the repository's OWNER: the gate fails
closed, never open.  Asked at most once per command, and only when the approvers and
associations did not already decide.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from agentchain.core.runtime import Runtime
from agentchain.github.appruntime import side_of
from agentchain.github.githuberrors import GitHubError
from agentchain.github.rules.githubscope import REPOSITORY, Scope

log = logging.getLogger(__name__)
DEADLINE_SECONDS = 4.0
READ_METADATA = {"metadata": "read"}


async def permission_of(rt: Runtime, payload: Mapping[str, Any], login: str) -> str | None:
    """``login``'s permission on the delivery's repository; None when it cannot be known."""
    side = side_of(rt)
    if side is None or not login:
        return None
    installation = (payload.get("installation") or {}).get("id")
    repository = (payload.get("repository") or {}).get("full_name")
    if not isinstance(installation, int) or isinstance(installation, bool):
        return None
    if not isinstance(repository, str) or not REPOSITORY.match(repository):
        return None
    scope = Scope(installation, repository, dict(READ_METADATA))
    try:
        async with asyncio.timeout(DEADLINE_SECONDS):
            return await side.app.permission_of(scope, login)
    except (GitHubError, TimeoutError) as exc:
        log.warning(
            "permission of %s on %s not known (%s): only the OWNER may approve",
            login,
            repository,
            getattr(exc, "reason", type(exc).__name__),
        )
        return None
