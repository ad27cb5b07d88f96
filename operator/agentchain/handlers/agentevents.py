"""AiAgent handlers: any change to one agent re-evaluates its whole namespace, and
starts the namespace's jobs that were created before their agent and wait for it.

Every watch event also feeds the runtime's in-memory catalog, which the engine
reads on each hop instead of listing agents from the API server.
"""

from __future__ import annotations

from typing import Any

import kopf

from agentchain.aiagents import readiness
from agentchain.hop import hopping
from agentchain.models import GROUP, VERSION


@kopf.on.event(GROUP, VERSION, "aiagents")
async def observe(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    runtime = getattr(memo, "runtime", None)
    if runtime is not None:
        runtime.agents.observe(dict(event["object"]), deleted=event["type"] == "DELETED")


@kopf.on.create(GROUP, VERSION, "aiagents")
@kopf.on.update(GROUP, VERSION, "aiagents")
@kopf.on.resume(GROUP, VERSION, "aiagents")
@kopf.on.delete(GROUP, VERSION, "aiagents", optional=True)
async def reconcile(namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    if namespace:
        await readiness.reconcile_namespace(memo.runtime, namespace)
        await hopping.agents_changed(memo.runtime, namespace)
