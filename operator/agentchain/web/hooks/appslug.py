"""The operator's GitHub App slug, which mention and assignment triggers look for.

Configured (``AGENTCHAIN_GITHUB_APP_SLUG``), or asked of GitHub once (``GET /app``, the
App's own login is ``<slug>[bot]``) when the operator is a GitHub App.  Asking happens
on the webhook's path, so it is bounded: a delivery waits a short time for the answer,
and after a failure no new attempt is made for a while, so a GitHub outage does not slow
every delivery down.  An answer slower than that wait is not thrown away: the ask goes
on beside the deliveries, and the next one that needs the slug waits for the same ask
again (a slow first answer, say from a busy machine at start, would otherwise leave
mentions refused for the whole retry period).  Until the slug is known, ``mention`` and
``assignedToApp`` filters refuse, with a reason that says so (``github.rules.matching``).
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
        self._asking: asyncio.Future[str] | None = None

    async def get(self) -> str | None:
        if self._known is not None:
            return self._known
        side = appruntime.side_of(self.rt)
        if side is None:
            return None
        if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_AFTER_SECONDS:
            return None
        if self._asking is None:
            self._asking = asyncio.ensure_future(side.app.bot_login())
        try:
            # Shielded: a delivery that stops waiting leaves the ask running for the next.
            async with asyncio.timeout(ASK_TIMEOUT_SECONDS):
                login = await asyncio.shield(self._asking)
        except TimeoutError:
            log.warning("the GitHub App's slug is not known yet (GET /app is still asked)")
            return None
        except (GitHubError, ValueError) as exc:  # ValueError: a malformed App.
            self._asking = None
            self._failed_at = time.monotonic()
            log.warning("the GitHub App's slug is not known yet (GET /app: %s)", exc)
            return None
        self._known = login.removesuffix(BOT_SUFFIX)
        return self._known
