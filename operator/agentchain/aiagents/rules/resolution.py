"""AiAgents as a namespace sees them: readiness, trigger resolution, static rings.

Seed 003's troubleshooting list ("verify next agent's trigger name exists",
"check next agent is enabled") becomes conditions computed here from the list
of agents in a namespace; the handler only patches and emits what changed.

:func:`resolve` is the one place a triggerName is turned into an AiAgent, for
chain steps, started jobs, API runs and webhook deliveries alike.  A
triggerName held by two AiAgents resolves to :class:`Ambiguous`, never to one
of them: running either would silently drop the other's settings (SPEC §1,
"triggerName unique per namespace").

:func:`ring` finds a static loop: the ``next`` links an agent's chain would
follow back to that agent.  The runtime refusal (``LoopDetected``) stays the
enforcement; the ring only makes the mistake visible before anything runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from agentchain.core.rules import graphs
from agentchain.models.aiagent import AiAgentSpec
from agentchain.models.conditions import Reason

A = TypeVar("A")
RING_SEPARATOR = " → "


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str
    message: str


@dataclass(frozen=True)
class Ambiguous:
    """A triggerName that more than one AiAgent uses: nothing may run under it."""

    trigger: str
    agents: tuple[str, ...]
    """The AiAgents' object names, sorted."""

    @property
    def message(self) -> str:
        names = ", ".join(self.agents)
        return (
            f"triggerName {self.trigger!r} is used by {len(self.agents)} AiAgents ({names}); "
            "nothing runs under it until it is unique in the namespace."
        )


def resolve(
    trigger: str, agents: Iterable[tuple[str, A]], trigger_of: Callable[[A], str]
) -> A | Ambiguous | None:
    """The one agent among (object name, agent) pairs with ``trigger``, if exactly one."""
    found = [(name, agent) for name, agent in agents if trigger_of(agent) == trigger]
    if not found:
        return None
    if len(found) > 1:
        return Ambiguous(trigger, tuple(sorted(name for name, _ in found)))
    return found[0][1]


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


def ring(spec: AiAgentSpec, agents: Sequence[tuple[str, AiAgentSpec]]) -> tuple[str, ...] | None:
    """The triggerNames of a static loop through ``spec``'s agent, first and last itself.

    A chain starts at the agent under any of its triggers, and every later job
    follows its agent's ``manual`` trigger (SPEC §2), so the ring leaves the agent
    by any trigger's ``next`` and comes back through ``manual`` ones only: an
    agent merely *named* in someone's loop-free github ``next`` is not in a ring.
    A triggerName held twice is left out (it is refused as ambiguous anyway).
    The shortest ring is given, first ``next`` first; the walk is linear in the
    number of agents.
    """
    manual = _manual_links(agents)
    start = spec.trigger_name
    firsts = [t.next.agent_trigger_name for t in spec.event_triggers if t.next is not None]

    def successors(here: str) -> list[str]:
        # The ring leaves by any trigger's next and comes back through manual ones.
        nexts = firsts if here == start else [manual.get(here) or ""]
        return [n for n in nexts if n in manual or n == start]

    return graphs.shortest_cycle(start, successors)


def _manual_links(agents: Sequence[tuple[str, AiAgentSpec]]) -> Mapping[str, str | None]:
    """triggerName → the triggerName its manual trigger's ``next`` names (unique ones only)."""
    counts = Counter(s.trigger_name for _, s in agents)
    links: dict[str, str | None] = {}
    for _, spec in agents:
        if counts[spec.trigger_name] > 1:
            continue
        manual = next((t for t in spec.event_triggers if t.source == "manual"), None)
        step = manual.next if manual is not None else None
        links[spec.trigger_name] = step.agent_trigger_name if step is not None else None
    return links


def loop_freedom(spec: AiAgentSpec, agents: Sequence[tuple[str, AiAgentSpec]]) -> Readiness:
    """The ``LoopFree`` condition: False, naming the ring, when the agent is in one."""
    found = ring(spec, agents)
    if found is None:
        return Readiness(True, Reason.NO_STATIC_LOOP, "No chain of next steps leads back here.")
    msg = (
        f"The next steps form a loop: {RING_SEPARATOR.join(found)}. A chain that reaches "
        f"{found[0]} a second time is refused at run time (LoopDetected)."
    )
    return Readiness(False, Reason.STATIC_LOOP, msg)
