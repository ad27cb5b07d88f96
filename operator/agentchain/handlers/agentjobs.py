"""AgentJob handlers: start on create/resume, and a resync timer for missed events."""

from __future__ import annotations

from typing import Any

import kopf

from agentchain.engine import resync, starting
from agentchain.models import GROUP, VERSION
from agentchain.settings import Settings

_RESYNC = Settings.from_env().resync_seconds


@kopf.on.create(GROUP, VERSION, "agentjobs")
@kopf.on.resume(GROUP, VERSION, "agentjobs")
async def start(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await starting.start(memo.runtime, dict(body))


@kopf.timer(
    GROUP, VERSION, "agentjobs", interval=_RESYNC, initial_delay=_RESYNC, when=resync.needs_resync
)
async def resync_job(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await resync.resync(memo.runtime, dict(body))
