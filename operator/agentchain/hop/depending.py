"""A job whose dependencies have not all ended: it waits, or ends if it never can.

``prompting.dependencies`` says whether a job must wait and why; before it is
marked Waiting, and also when a dependency already ended for a cycle (the job may
be the cycle's other half, looked at second), the jobs its ``dependsOn`` reaches are
read (breadth first, at most ``dependencies.MAX_JOBS``) and
``hop.rules.dependencies.cycle`` decides whether the waits form a cycle.  A job in one
is ended (``DependencyCycle``, by ``hop.launching``) rather than left Waiting for
good; ``hop.reconciling`` then reconciles the jobs that wait for it, so the rest of the
cycle ends at once too, not at the next resync.
"""

from __future__ import annotations

import asyncio

from agentchain.core import statuswriting
from agentchain.core.runtime import Runtime
from agentchain.hop.rules import dependencies
from agentchain.hop.rules.dependencies import Node
from agentchain.kube import events, resources
from agentchain.models.agentjob import AgentJobStatus
from agentchain.models.conditions import DEPENDENCIES_READY, Condition, Reason
from agentchain.prompts import teamkeeping

Obj = statuswriting.Obj


async def cycle_of(obj: Obj) -> tuple[str, ...] | None:
    """The cycle of waits ``obj`` is in, from the jobs as they are now; None when none."""
    namespace, name = statuswriting.name_of(obj)
    return dependencies.cycle(name, await reachable(namespace, name, obj))


async def reachable(namespace: str, name: str, obj: Obj) -> dict[str, Node]:
    """``obj`` and the jobs its waits reach, as they are now (missing ones left out)."""
    nodes = {name: _node(obj)}
    seen = {name}
    frontier = [name]
    while frontier and len(nodes) < dependencies.MAX_JOBS:
        wanted = [d for here in frontier for d in dependencies.edges(nodes[here])]
        names = [d for d in dict.fromkeys(wanted) if d not in seen and "/" not in d]
        names = names[: dependencies.MAX_JOBS - len(nodes)]
        seen.update(names)
        found = await asyncio.gather(
            *(resources.get(namespace, resources.AGENTJOBS, d) for d in names)
        )
        frontier = []
        for dep, item in zip(names, found, strict=True):
            if item is not None:
                nodes[dep] = _node(item)
                frontier.append(dep)
    return nodes


def _node(obj: Obj) -> Node:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    deps = spec.get("dependsOn") or []
    return Node(
        phase=status.get("phase"),
        reason=status.get("reason"),
        depends_on=tuple(d for d in deps if isinstance(d, str)),
    )


async def wait(rt: Runtime, obj: Obj, reason: str, message: str) -> None:
    """Mark ``obj`` Waiting for ``reason`` (written only when that changes)."""
    # The message too, not only the reason: it names the dependency's phase as it is
    # now (a dependency first seen Pending may be Waiting or Running by the resync).
    status = statuswriting.parse(obj).status
    if (status.phase, status.reason, status.message) == ("Waiting", reason, message):
        return
    waiting = AgentJobStatus(phase="Waiting", reason=reason, message=message)
    held = Condition(type=DEPENDENCIES_READY, status="False", reason=reason, message=message)
    await rt.writes.patch(obj, waiting, held)
    await teamkeeping.job(rt, obj)
    if reason == Reason.DEPENDENCY_NOT_FOUND:
        await events.emit(obj, "Warning", reason, message, key=f"wait:{message}")
