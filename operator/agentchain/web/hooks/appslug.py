"""The operator's GitHub App slug, which mention and assignment triggers look for.

Configured (``AGENTCHAIN_GITHUB_APP_SLUG``), or asked of GitHub once (``GET /app``, the
App's own login is ``<slug>[bot]``) when the operator is a GitHub App.  Asking happens
on the webhook's path, so it is bounded: a short timeout, and after a failure no new
attempt for a while, so a GitHub outage does not slow every delivery down.  Until the
slug is known, ``mention`` and ``assignedToApp`` filters refuse, with a reason that says
so (``github.rules.matching``).
"""

from __future__ import annotations

import asyncio
import logging
import time

from agentchain.core.runtime import Runtime
from agentchain.github import appruntime
from agentchain.github.githuberrors import GitHubError

log = logging.getLogger(__name__)
ASK_TIMEOUT_SECONDS = 2.0
RETRY_AFTER_SECONDS = 60.0
BOT_SUFFIX = "[bot]"


class AppSlug:
    """The slug for one runtime, asked of GitHub at most once per retry period."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self._known: str | None = rt.settings.github_app_slug or None
        self._failed_at: float | None = None

    async def get(self) -> str | None:
        if self._known is not None:
            return self._known
        side = appruntime.side_of(self.rt)
        if side is None:
            return None
        if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_AFTER_SECONDS:
            return None
        try:
            async with asyncio.timeout(ASK_TIMEOUT_SECONDS):
                login = await side.app.bot_login()
        except (GitHubError, TimeoutError, ValueError) as exc:  # ValueError: a malformed App.
            self._failed_at = time.monotonic()
            log.warning("the GitHub App's slug is not known yet (GET /app: %s)", exc)
            return None
        self._known = login.removesuffix(BOT_SUFFIX)
        return self._known
