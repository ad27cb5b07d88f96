"""Writing an AiAgent's conditions: the one way all of their writers take.

``status.conditions`` is one list, and a merge patch replaces a list whole.  Three
writers set an agent's conditions: ``aiagents/readiness`` (``Ready``, ``LoopFree``,
``Scheduled``), ``aiagents/egresspolicies`` (``EgressPolicy``) and ``github/writeback``
(``GitHubWriteBack``).  A patch built from a body one of them read earlier would drop
whatever another wrote since, so every patch carries the
resourceVersion it was built over; on a conflict the agent is read again and the
change re-applied to what is there now.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from agentchain.core import statuswriting
from agentchain.kube import apierrors, resources
from agentchain.models.aiagent import AiAgentStatus
from agentchain.models.conditions import Condition, set_condition

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Same = Callable[[Condition, Condition], bool]

ATTEMPTS = 5
"""Conflicts in a row before giving up: each means another writer got in between."""


def same_condition(a: Condition, b: Condition) -> bool:
    """Equal for a reader: nothing to write (the transition time is not compared)."""
    return (a.status, a.reason, a.message, a.observed_generation) == (
        b.status,
        b.reason,
        b.message,
        b.observed_generation,
    )


def changes(
    current: Sequence[Condition], wanted: Sequence[Condition], same: Same
) -> list[Condition]:
    """The conditions of ``wanted`` that ``current`` does not already say."""
    out = []
    for condition in wanted:
        now = next((c for c in current if c.type == condition.type), None)
        if now is None or not same(now, condition):
            out.append(condition)
    return out


async def set_conditions(
    agent: Obj,
    wanted: Sequence[Condition],
    *,
    same: Same = same_condition,
    status: Obj | None = None,
) -> list[Condition]:
    """Write those of ``wanted`` that differ from the agent's (with ``status``'s other
    fields), at its resourceVersion; returns what was written (empty: nothing was)."""
    meta = agent["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    for _ in range(ATTEMPTS):
        current = AiAgentStatus.model_validate(agent.get("status") or {}).conditions
        changed = changes(current, wanted, same)
        if not changed:
            return []
        conditions = list(current)
        for condition in changed:
            conditions = set_condition(conditions, condition, statuswriting.now())
        body = {**(status or {}), "conditions": [c.to_api() for c in conditions]}
        version = agent["metadata"].get("resourceVersion")
        try:
            patched = await resources.patch_status_at(
                namespace, resources.AIAGENTS, name, version, body
            )
            return changed if patched is not None else []
        except apierrors.Conflict:
            found = await resources.get(namespace, resources.AIAGENTS, name)
            if found is None:
                return []
            agent = found
    log.warning("gave up setting %s/%s's conditions: %d conflicts", namespace, name, ATTEMPTS)
    return []
