"""The GitHub side of one runtime: the App client, its Redis records and the worker.

Built lazily from the runtime's settings the first time something asks
(:func:`side_of`), so nothing else has to carry it: the runtime is unchanged, and an
operator without App credentials never builds one (``side_of`` answers None, and every
GitHub feature is off, exactly as before issue 17).  Closed by the operator's cleanup
(``handlers/github.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from agentchain.engine.runtime import Runtime
from agentchain.github.apps import GitHubApp
from agentchain.store.github import JobTokens, WriteBackRecords


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


log = logging.getLogger(__name__)
_SIDES: dict[int, GitHubSide] = {}


def side_of(rt: Runtime) -> GitHubSide | None:
    """The runtime's GitHub side; None when no App is configured."""
    side = _SIDES.get(id(rt))
    if side is not None and side.rt is rt:
        return side
    app = GitHubApp.from_settings(rt.settings)
    if app is None:
        return None
    side = GitHubSide(rt, app, WriteBackRecords(rt.redis), JobTokens(rt.redis, rt.operator_keys))
    _SIDES[id(rt)] = side
    log.info("GitHub App %d at %s: write-back and job tokens on", app.app_id, app.base_url)
    return side


async def close(rt: Runtime) -> None:
    """Stop the runtime's worker (pending write-back is redone from the watch on restart)."""
    side = _SIDES.pop(id(rt), None)
    if side is not None and side.rt is rt and side.worker is not None:
        await side.worker.stop()
