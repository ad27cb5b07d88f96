"""Keeping every AiAgent's Ready condition true to its namespace.

An agent's readiness depends on its neighbours (duplicate triggerNames, the
agent its ``next`` names), so any change to one agent re-evaluates them all;
only conditions that changed are patched, and each new False gets one Event.
"""

from __future__ import annotations

from agentchain.engine import records
from agentchain.engine.runtime import Runtime
from agentchain.kube import events, resources
from agentchain.models.conditions import READY, Condition, set_condition
from agentchain.policy.agents import readiness


async def reconcile_namespace(rt: Runtime, namespace: str) -> None:
    # Always a fresh list: this is where the catalog is squared with the API server.
    agents = await rt.agents.refresh(namespace)
    specs = [(obj["metadata"]["name"], agent.spec) for obj, agent in agents]
    for obj, agent in agents:
        name = obj["metadata"]["name"]
        result = readiness(name, agent.spec, specs)
        generation = obj["metadata"].get("generation")
        wanted = Condition(
            type=READY,
            status="True" if result.ready else "False",
            reason=result.reason,
            message=result.message,
            observed_generation=generation,
        )
        current = next((c for c in agent.status.conditions if c.type == READY), None)
        if current is not None and _same(current, wanted):
            continue
        merged = set_condition(agent.status.conditions, wanted, records.now())
        status = {"conditions": [c.to_api() for c in merged], "observedGeneration": generation}
        await resources.patch_status(namespace, resources.AIAGENTS, name, status)
        if not result.ready:
            key = f"ready:{result.reason}:{generation}:{result.message}"
            await events.emit(obj, "Warning", result.reason, result.message, key=key)


def _same(a: Condition, b: Condition) -> bool:
    return (a.status, a.reason, a.message, a.observed_generation) == (
        b.status,
        b.reason,
        b.message,
        b.observed_generation,
    )
