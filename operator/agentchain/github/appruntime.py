"""The GitHub side of one runtime: the App client, its Redis records and the worker.

Built lazily from the runtime's settings the first time something asks
(:func:`side_of`) and kept on the runtime, so nothing else has to carry it: an
operator without App credentials never builds one (``side_of`` answers None, and every
GitHub feature is off).  Closed by the operator's cleanup
(``handlers/lifecycle.shutdown``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentchain.core import statuswriting
from agentchain.core.runtime import Runtime
from agentchain.github.apps import GitHubApp
from agentchain.github.githubrecords import JobTokens, WriteBackRecords
from agentchain.hop.rules.chains import ChainMetadataError
from agentchain.traces.rules.githubwrites import WriteBack
from agentchain.traces.rules.spans import Span


class Background(Protocol):
    """The write-back worker as seen from here (``writeback.Worker``): it can be stopped."""

    async def stop(self) -> None: ...


@dataclass
class GitHubSide:
    rt: Runtime
    app: GitHubApp
    records: WriteBackRecords
    tokens: JobTokens
    worker: Background | None = field(default=None)

    def chain_of(self, obj: dict[str, Any]) -> str | None:
        """The chain AgentJob ``obj`` is in, as its sealed position says: the trace its
        span is in (None: its position is not the operator's)."""
        try:
            return statuswriting.position(obj, self.rt.operator_keys).chain_id
        except ChainMetadataError:
            return None

    async def traced(self, run: WriteBack | None, build: Callable[[WriteBack], Span]) -> None:
        """Record the span ``build`` makes of a write of write-back ``run``; nothing is
        built without a run (tracing off: ``traces/rules/githubwrites``)."""
        if run is not None:
            await self.rt.traces.record(build(run))


log = logging.getLogger(__name__)


def side_of(rt: Runtime) -> GitHubSide | None:
    """The runtime's GitHub side; None when no App is configured."""
    if isinstance(rt.github, GitHubSide):
        return rt.github
    app = GitHubApp.from_settings(rt.settings)
    if app is None:
        return None
    side = GitHubSide(rt, app, WriteBackRecords(rt.redis), JobTokens(rt.redis, rt.operator_keys))
    rt.github = side
    log.info("GitHub App %d at %s: write-back and job tokens on", app.app_id, app.base_url)
    return side


async def close(rt: Runtime) -> None:
    """Stop the runtime's worker (pending write-back is redone from the watch on restart)."""
    side, rt.github = rt.github, None
    if isinstance(side, GitHubSide) and side.worker is not None:
        await side.worker.stop()
