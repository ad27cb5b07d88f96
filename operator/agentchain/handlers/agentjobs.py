"""AgentJob handlers: start what is new, and index what is unsettled for the resync.

A plain event handler, not kopf's on.create/on.resume plus a timer: those keep a
finalizer and a diff-base annotation on every AgentJob, three writes per job that
the engine never reads, and the finalizer held up the first handler call by one
round trip and blocked deletions while the operator was down.  Start-up is
covered too: kopf lists every AgentJob when its watch begins.
"""

from __future__ import annotations

import time
from typing import Any

import kopf

from agentchain.engine import starting
from agentchain.models import GROUP, VERSION


@kopf.on.event(GROUP, VERSION, "agentjobs")
async def observed(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    runtime = memo.runtime
    obj = dict(body)
    if type == "DELETED":
        runtime.unsettled.forget(obj)
        return
    runtime.unsettled.observe(obj, time.monotonic(), float(runtime.settings.resync_seconds))
    if starting.wants_start(obj):
        await starting.start(runtime, obj)
