"""AiAgents as a namespace sees them (``agentchain.aiagents.rules.resolution``).

Aspects covered:
- ``resolve``: no holder, one holder, two or more (``Ambiguous``, naming every
  AiAgent, sorted, in its message), whatever the order they are listed in;
- ``readiness``: a duplicate triggerName is not Ready on every agent sharing it;
- ``ring``: a ``next`` naming its own agent, a two- and a three-agent ring through
  manual triggers, a github trigger's ``next`` leaving the ring's first agent,
  no ring for an agent that only leads into someone else's loop, a github
  ``next`` elsewhere not closing a ring, missing and duplicate targets;
- ``loop_freedom``: the condition's status, reason and message naming the ring;
- property: over random namespaces, ``ring`` finds a ring exactly when following
  the chain's ``next`` steps from the agent comes back to it, and what it returns
  is such a walk.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.aiagents.rules import resolution
from agentchain.aiagents.rules.resolution import Ambiguous
from agentchain.models.aiagent import AiAgentSpec
from agentchain.models.conditions import Reason

Agents = list[tuple[str, AiAgentSpec]]


def spec(
    trigger: str, manual: str | None = None, github: str | None = None, **extra: Any
) -> AiAgentSpec:
    """An agent with a manual trigger going to ``manual`` and, optionally, a github
    trigger going to ``github``."""
    triggers: list[dict[str, Any]] = []
    if github is not None:
        triggers.append(
            {"source": "github", "events": ["issues.opened"], "next": {"agentTriggerName": github}}
        )
    entry: dict[str, Any] = {"source": "manual"}
    if manual is not None:
        entry["next"] = {"agentTriggerName": manual}
    triggers.append(entry)
    return AiAgentSpec.model_validate({"triggerName": trigger, "eventTriggers": triggers, **extra})


def namespace(*specs: AiAgentSpec) -> Agents:
    return [(s.trigger_name, s) for s in specs]


# --- resolve ------------------------------------------------------------------------------


def trigger_of(s: AiAgentSpec) -> str:
    return s.trigger_name


def test_resolve_finds_the_one_holder() -> None:
    found = resolution.resolve("ai-b", namespace(spec("ai-a"), spec("ai-b")), trigger_of)
    assert isinstance(found, AiAgentSpec) and found.trigger_name == "ai-b"


def test_resolve_finds_no_holder() -> None:
    assert resolution.resolve("ai-z", namespace(spec("ai-a")), trigger_of) is None


@pytest.mark.parametrize("order", [("zeta", "alpha"), ("alpha", "zeta")])
def test_resolve_refuses_a_shared_trigger_naming_every_holder(order: tuple[str, str]) -> None:
    listed = [(name, spec("ai-dup")) for name in order] + [("other", spec("ai-other"))]
    found = resolution.resolve("ai-dup", listed, trigger_of)
    assert found == Ambiguous("ai-dup", ("alpha", "zeta"))
    assert isinstance(found, Ambiguous)
    assert "alpha, zeta" in found.message and "'ai-dup'" in found.message


def test_duplicate_trigger_is_not_ready_on_each_holder() -> None:
    listed = [("one", spec("ai-dup")), ("two", spec("ai-dup"))]
    for name, s in listed:
        result = resolution.readiness(name, s, listed)
        assert not result.ready and result.reason == Reason.DUPLICATE_TRIGGER_NAME


# --- ring ---------------------------------------------------------------------------------


def test_a_next_naming_its_own_agent_is_a_ring() -> None:
    a = spec("ai-a", manual="ai-a")
    assert resolution.ring(a, namespace(a)) == ("ai-a", "ai-a")


def test_a_github_next_naming_its_own_agent_is_a_ring() -> None:
    a = spec("ai-a", github="ai-a")
    assert resolution.ring(a, namespace(a)) == ("ai-a", "ai-a")


def test_two_agents_naming_each_other_are_both_in_the_ring() -> None:
    a, b = spec("ai-a", manual="ai-b"), spec("ai-b", manual="ai-a")
    assert resolution.ring(a, namespace(a, b)) == ("ai-a", "ai-b", "ai-a")
    assert resolution.ring(b, namespace(a, b)) == ("ai-b", "ai-a", "ai-b")


def test_a_three_agent_ring_through_manual_triggers() -> None:
    ns = namespace(
        spec("ai-a", manual="ai-b"), spec("ai-b", manual="ai-c"), spec("ai-c", manual="ai-a")
    )
    for _, s in ns:
        found = resolution.ring(s, ns)
        assert found is not None and len(found) == 4 and found[0] == found[-1] == s.trigger_name


def test_a_ring_may_leave_its_first_agent_by_a_github_trigger() -> None:
    triage, dev = spec("ai-triage", github="ai-dev"), spec("ai-dev", manual="ai-triage")
    assert resolution.ring(triage, namespace(triage, dev)) == ("ai-triage", "ai-dev", "ai-triage")


def test_a_github_next_elsewhere_closes_no_ring() -> None:
    # ai-dev → ai-triage only when ai-triage starts a chain from GitHub; a chain through
    # ai-dev continues with ai-triage's manual next, which leads nowhere.
    triage, dev = spec("ai-triage", github="ai-dev"), spec("ai-dev", manual="ai-triage")
    assert resolution.ring(dev, namespace(triage, dev)) is None


def test_leading_into_someone_elses_loop_is_no_ring_of_ones_own() -> None:
    ns = namespace(
        spec("ai-x", manual="ai-a"), spec("ai-a", manual="ai-b"), spec("ai-b", manual="ai-a")
    )
    assert resolution.ring(ns[0][1], ns) is None


@pytest.mark.parametrize("target", ["ai-missing", "ai-dup"])
def test_missing_or_duplicate_targets_close_no_ring(target: str) -> None:
    a = spec("ai-a", manual=target)
    ns = [
        *namespace(a),
        ("d1", spec("ai-dup", manual="ai-a")),
        ("d2", spec("ai-dup", manual="ai-a")),
    ]
    assert resolution.ring(a, ns) is None


def test_loop_freedom_names_the_ring() -> None:
    a, b = spec("ai-a", manual="ai-b"), spec("ai-b", manual="ai-a")
    result = resolution.loop_freedom(a, namespace(a, b))
    assert not result.ready and result.reason == Reason.STATIC_LOOP
    assert "ai-a → ai-b → ai-a" in result.message and "LoopDetected" in result.message
    clear = resolution.loop_freedom(b, namespace(spec("ai-a"), b))
    assert clear.ready and clear.reason == Reason.NO_STATIC_LOOP


def test_a_ring_does_not_change_readiness() -> None:
    a = spec("ai-a", manual="ai-a")
    assert resolution.readiness("ai-a", a, namespace(a)).ready


# --- property -----------------------------------------------------------------------------

NAMES = ("a", "b", "c", "d", "e")
target = st.one_of(st.none(), st.sampled_from(NAMES), st.just("missing"))


@given(links=st.dictionaries(st.sampled_from(NAMES), st.tuples(target, target), min_size=1))
def test_ring_is_found_exactly_when_the_chain_comes_back(
    links: dict[str, tuple[str | None, str | None]],
) -> None:
    ns = namespace(*(spec(n, manual=m, github=g) for n, (m, g) in links.items()))
    manual = {n: m for n, (m, _) in links.items()}
    for name, (m, g) in links.items():
        # Brute force: from each first step, follow manual nexts for len(NAMES) hops.
        comes_back = False
        for first in {m, g} - {None}:
            here: str | None = first
            for _ in range(len(NAMES) + 1):
                if here == name:
                    comes_back = True
                    break
                here = manual.get(here) if here is not None else None
        found = resolution.ring(ns[list(links).index(name)][1], ns)
        assert (found is not None) == comes_back
        if found is not None:
            assert found[0] == found[-1] == name
            assert found[1] in {m, g}
            assert all(manual[x] == y for x, y in itertools.pairwise(found[1:]))
