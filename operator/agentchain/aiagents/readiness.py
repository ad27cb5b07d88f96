"""Keeping every AiAgent's conditions true to its namespace.

An agent's conditions depend on its neighbours (duplicate triggerNames, the
agent its ``next`` names, a ring of ``next`` steps through others), so any
change to one agent re-evaluates them all, one evaluation per namespace at a
time (and at most one waiting: later requests are folded into it); only conditions
that changed are written (``aiagents/conditionwriting``), and each new False gets one
Warning Event.  ``Ready`` says whether the agent can run; ``LoopFree`` is a warning
beside it: a ring of ``next`` steps is legal to declare, and refused
(``LoopDetected``) only when a chain closes it.  ``Scheduled``, on an agent with a
``schedule`` trigger only, says whether its cron expressions and time zones can be
followed: a bad one is ``InvalidSchedule`` and a Warning Event, never a crash of the
scheduler, which skips that trigger.
"""

from __future__ import annotations

from typing import Any

from agentchain.aiagents import conditionwriting
from agentchain.aiagents.rules import schedules
from agentchain.aiagents.rules.resolution import Readiness, loop_freedom, readiness
from agentchain.core.runtime import Runtime
from agentchain.kube import events
from agentchain.models.conditions import LOOP_FREE, READY, SCHEDULED, Condition


async def reconcile_namespace(rt: Runtime, namespace: str) -> None:
    # One evaluation at a time per namespace, each from a fresh list (this is where the
    # catalog is squared with the API server): the last one to run saw every change.
    async with rt.agents.evaluating(namespace) as turn:
        if not turn:
            return  # One is waiting for its turn already: it will see this change too.
        agents = await rt.agents.refresh(namespace)
        specs = [(obj["metadata"]["name"], agent.spec) for obj, agent in agents]
        for obj, agent in agents:
            name = obj["metadata"]["name"]
            verdicts = {
                READY: readiness(name, agent.spec, specs),
                LOOP_FREE: loop_freedom(agent.spec, specs),
            }
            if schedules.has_schedule(agent.spec) or _has_condition(obj, SCHEDULED):
                # An agent whose last schedule trigger was removed keeps the condition
                # (a merge patch cannot drop one), so it is made to say so.
                verdicts[SCHEDULED] = schedules.readiness(agent.spec)
            await _apply(obj, verdicts)


def _has_condition(obj: dict[str, Any], type_: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == type_ for c in conditions)


async def _apply(obj: dict[str, Any], verdicts: dict[str, Readiness]) -> None:
    generation = obj["metadata"].get("generation")
    wanted = [
        Condition(
            type=type_,
            status="True" if result.ready else "False",
            reason=result.reason,
            message=result.message,
            observed_generation=generation,
        )
        for type_, result in verdicts.items()
    ]
    status = {"observedGeneration": generation}
    changed = await conditionwriting.set_conditions(obj, wanted, status=status)
    for condition in changed:
        if condition.status == "False":
            key = f"ready:{condition.reason}:{generation}:{condition.message}"
            await events.emit(obj, "Warning", condition.reason, condition.message, key=key)
