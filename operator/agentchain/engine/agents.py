"""Keeping every AiAgent's conditions true to its namespace.

An agent's conditions depend on its neighbours (duplicate triggerNames, the
agent its ``next`` names, a ring of ``next`` steps through others), so any
change to one agent re-evaluates them all; only conditions that changed are
patched, and each new False gets one Warning Event.  ``Ready`` says whether the
agent can run; ``LoopFree`` is a warning beside it: a ring of ``next`` steps is
legal to declare, and refused (``LoopDetected``) only when a chain closes it.
"""

from __future__ import annotations

from typing import Any

from agentchain.engine import records
from agentchain.engine.runtime import Runtime
from agentchain.kube import events, resources
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import LOOP_FREE, READY, Condition, set_condition
from agentchain.policy.agents import Readiness, loop_freedom, readiness


async def reconcile_namespace(rt: Runtime, namespace: str) -> None:
    # Always a fresh list: this is where the catalog is squared with the API server.
    agents = await rt.agents.refresh(namespace)
    specs = [(obj["metadata"]["name"], agent.spec) for obj, agent in agents]
    for obj, agent in agents:
        name = obj["metadata"]["name"]
        verdicts = {
            READY: readiness(name, agent.spec, specs),
            LOOP_FREE: loop_freedom(agent.spec, specs),
        }
        await _apply(namespace, obj, agent, verdicts)


async def _apply(
    namespace: str, obj: dict[str, Any], agent: AiAgent, verdicts: dict[str, Readiness]
) -> None:
    generation = obj["metadata"].get("generation")
    conditions = agent.status.conditions
    changed: list[Readiness] = []
    for type_, result in verdicts.items():
        wanted = Condition(
            type=type_,
            status="True" if result.ready else "False",
            reason=result.reason,
            message=result.message,
            observed_generation=generation,
        )
        current = next((c for c in conditions if c.type == type_), None)
        if current is not None and _same(current, wanted):
            continue
        conditions = set_condition(conditions, wanted, records.now())
        changed.append(result)
    if not changed:
        return
    status = {"conditions": [c.to_api() for c in conditions], "observedGeneration": generation}
    await resources.patch_status(namespace, resources.AIAGENTS, obj["metadata"]["name"], status)
    for result in changed:
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
