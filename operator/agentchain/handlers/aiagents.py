"""AiAgent handlers: any change to one agent re-evaluates its whole namespace."""

from __future__ import annotations

from typing import Any

import kopf

from agentchain.engine import agents
from agentchain.models import GROUP, VERSION


@kopf.on.create(GROUP, VERSION, "aiagents")
@kopf.on.update(GROUP, VERSION, "aiagents")
@kopf.on.resume(GROUP, VERSION, "aiagents")
@kopf.on.delete(GROUP, VERSION, "aiagents", optional=True)
async def reconcile(namespace: str | None, **_: Any) -> None:
    if namespace:
        await agents.reconcile_namespace(namespace)
