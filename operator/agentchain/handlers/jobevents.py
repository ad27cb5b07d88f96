"""AgentJob events, from the operator's own watch: reconcile what is new or asked to
stop, index what is unsettled for the resync.

No kopf handler: kopf lists unpaged and keeps per-object workers, and its
on.create/on.resume plus a timer would keep a finalizer and a diff-base
annotation on every AgentJob, three writes per job the engine never reads.  The
watch (``handlers.watches``) lists in pages at start-up and after a 410, so
start-up is covered; this module decides from the watched object alone whether the
job may need a step and hands it to ``hop.reconciling`` through the dispatcher, so a
settled or running job costs nothing.

A deleted AgentJob's token is revoked at once (a job deleted while it runs must not
keep acting through the API); a job re-created under the same name has another uid
and so another token.  A deletion missed while the operator was down leaves the
token to its TTL.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from redis.exceptions import RedisError

from agentchain.core.runtime import Runtime
from agentchain.github import writeback
from agentchain.handlers.ordering import Submit
from agentchain.hop import reconciling, stopping
from agentchain.kube.watching import key_of

log = logging.getLogger(__name__)
Obj = dict[str, Any]

# What the engine never reads of an AgentJob, and the largest part of its body.
DROPPED_METADATA = ("managedFields",)


def trim(obj: Obj) -> Obj:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in DROPPED_METADATA}
    return {**obj, "metadata": meta}


def observed(runtime: Runtime, submit: Submit, kind: str, obj: Obj) -> None:
    key = ("agentjobs", *key_of(obj))
    writeback.observe(runtime, kind, obj)  # GitHub write-back, token revocation.
    runtime.feed.publish(kind, obj)  # Live dashboard pages (web/dashboard/live.py); never blocks.
    if kind == "DELETED":
        runtime.unsettled.forget(obj)
        submit(key, lambda: _revoke(runtime, obj))
        return
    interval = float(runtime.settings.resync_seconds)
    moved = runtime.unsettled.observe(obj, time.monotonic(), interval)
    if moved is not None:  # The one log line per transition, whoever wrote it.
        status = obj.get("status") or {}
        log.info("AgentJob %s/%s: %s -> %s (%s)", *key[1:], *moved, status.get("reason"))
    # Stopped by the API or an annotation, or new (or waiting) and not launched.
    if stopping.wants_stop(obj) or reconciling.wants_start(runtime, obj):
        submit(key, lambda: reconciling.reconcile(runtime, *key[1:]))


async def _revoke(runtime: Runtime, obj: Obj) -> None:
    meta = obj.get("metadata") or {}
    try:
        await runtime.tokens.revoke(meta.get("namespace", ""), meta.get("name", ""), meta["uid"])
    except (RedisError, KeyError) as exc:  # The token still expires with its TTL.
        log.warning("token of deleted AgentJob %s not revoked: %s", meta.get("name"), exc)
