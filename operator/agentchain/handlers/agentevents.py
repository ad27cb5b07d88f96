"""AiAgent handlers: any change to one agent re-evaluates its whole namespace, and
starts the namespace's jobs that were created before their agent and wait for it; its
egress NetworkPolicy is kept as its spec says (``aiagents/egresspolicies``).

Every watch event also feeds the runtime's in-memory catalog, which the engine
reads on each hop instead of listing agents from the API server.
"""

from __future__ import annotations

from typing import Any

import kopf

from agentchain.aiagents import egresspolicies, readiness
from agentchain.hop import reconciling
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
async def reconcile(
    namespace: str | None, body: kopf.Body, reason: str, memo: kopf.Memo, **_: Any
) -> None:
    if namespace:
        if reason != kopf.Reason.DELETE:
            # The policy of a deleted agent goes with it (its ownerReference).
            await egresspolicies.reconcile(dict(body), memo.runtime)
        await readiness.reconcile_namespace(memo.runtime, namespace)
        await reconciling.agents_changed(memo.runtime, namespace)
