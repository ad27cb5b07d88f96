"""AiAgent readiness: what the schema cannot check, as a pure function.

Seed 003's troubleshooting list ("verify next agent's trigger name exists",
"check next agent is enabled") becomes conditions computed here from the list
of agents in a namespace; the handler only patches and emits what changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from agentchain.models.aiagent import AiAgentSpec
from agentchain.models.conditions import Reason


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str
    message: str


def readiness(name: str, spec: AiAgentSpec, agents: Sequence[tuple[str, AiAgentSpec]]) -> Readiness:
    """Readiness of agent ``name`` among ``agents`` (which includes it)."""
    counts = Counter(s.trigger_name for _, s in agents)
    if counts[spec.trigger_name] > 1:
        others = sorted(n for n, s in agents if s.trigger_name == spec.trigger_name and n != name)
        msg = f"triggerName {spec.trigger_name!r} is also used by {', '.join(others)}."
        return Readiness(False, Reason.DUPLICATE_TRIGGER_NAME, msg)
    if not spec.enabled:
        return Readiness(False, Reason.AGENT_DISABLED, "The agent is disabled (enabled: false).")
    by_trigger = {s.trigger_name: s for _, s in agents}
    for i, trigger in enumerate(spec.event_triggers):
        if trigger.next is None:
            continue
        target = trigger.next.agent_trigger_name
        where = f"eventTriggers[{i}].next.agentTriggerName"
        if target not in by_trigger:
            msg = (
                f"{where} names {target!r}, but no AiAgent in this namespace has that triggerName."
            )
            return Readiness(False, Reason.NEXT_AGENT_NOT_FOUND, msg)
        if not by_trigger[target].enabled:
            return Readiness(False, Reason.NEXT_AGENT_DISABLED, f"{where}: {target!r} is disabled.")
    return Readiness(True, Reason.AGENT_READY, "The agent and the agents it chains to are ready.")
