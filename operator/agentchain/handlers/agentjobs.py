"""AgentJob handlers: start what is new, and index what is unsettled for the resync.

A plain event handler, not kopf's on.create/on.resume plus a timer: those keep a
finalizer and a diff-base annotation on every AgentJob, three writes per job that
the engine never reads, and the finalizer held up the first handler call by one
round trip and blocked deletions while the operator was down.  Start-up is
covered too: kopf lists every AgentJob when its watch begins.

A deleted AgentJob's token is revoked at once (a job deleted while it runs must not
keep acting through the API); a job re-created under the same name has another uid
and so another token.  A deletion missed while the operator was down leaves the
token to its TTL.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf
from redis.exceptions import RedisError

from agentchain.engine import hopping, writeback
from agentchain.engine.runtime import Runtime
from agentchain.models import GROUP, VERSION

log = logging.getLogger(__name__)


@kopf.on.event(GROUP, VERSION, "agentjobs")
async def observed(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    runtime = memo.runtime
    obj = dict(body)
    writeback.observe(runtime, type, obj)  # Issue 17: GitHub write-back, token revocation.
    runtime.feed.publish(type, obj)  # Live dashboard pages (web/live.py); never blocks.
    if type == "DELETED":
        runtime.unsettled.forget(obj)
        await _revoke(runtime, obj)
        return
    runtime.unsettled.observe(obj, time.monotonic(), float(runtime.settings.resync_seconds))
    if hopping.wants_start(runtime, obj):
        await hopping.start(runtime, obj)


async def _revoke(runtime: Runtime, obj: dict[str, Any]) -> None:
    meta = obj.get("metadata") or {}
    try:
        await runtime.tokens.revoke(meta.get("namespace", ""), meta.get("name", ""), meta["uid"])
    except (RedisError, KeyError) as exc:  # The token still expires with its TTL.
        log.warning("token of deleted AgentJob %s not revoked: %s", meta.get("name"), exc)
