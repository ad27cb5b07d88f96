"""``dependsOn`` cycles (``agentchain.hop.rules.dependencies``).

Aspects covered:
- a job depending on itself, two jobs depending on each other, a longer cycle;
  the cycle is given from the job looked at, first and last that job;
- no cycle: a chain of waits, a missing dependency, a job only leading into
  someone else's cycle;
- which edges count: a dependency that ended normally closes no cycle (whatever
  its ``dependsOn`` says), one that ended *because of* the cycle still does, so
  every member gets the same verdict whichever is looked at first;
- messages name the cycle;
- property: over random graphs, ``cycle`` finds one exactly when a walk along
  waiting edges leads back to the job, and what it returns is such a walk.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.hop.rules import dependencies
from agentchain.hop.rules.dependencies import Node
from agentchain.models.conditions import Reason


def waiting(*deps: str) -> Node:
    return Node(phase="Waiting", reason=Reason.WAITING_FOR_DEPENDENCIES, depends_on=deps)


def test_a_job_depending_on_itself() -> None:
    assert dependencies.cycle("a", {"a": waiting("a")}) == ("a", "a")


@pytest.mark.parametrize("phase", [None, "Pending", "Waiting"])
def test_two_jobs_depending_on_each_other(phase: str | None) -> None:
    nodes = {"a": waiting("b"), "b": Node(phase, None, ("a",))}
    assert dependencies.cycle("a", nodes) == ("a", "b", "a")
    assert dependencies.cycle("b", nodes) == ("b", "a", "b")


def test_a_longer_cycle_behind_other_dependencies() -> None:
    nodes = {"a": waiting("x", "b"), "x": waiting(), "b": waiting("c"), "c": waiting("a")}
    assert dependencies.cycle("a", nodes) == ("a", "b", "c", "a")


def test_no_cycle_in_a_chain_of_waits_or_with_a_missing_dependency() -> None:
    nodes = {"a": waiting("b", "gone"), "b": waiting("c"), "c": Node("Running", "Running", ())}
    assert dependencies.cycle("a", nodes) is None


def test_leading_into_another_cycle_is_not_being_in_it() -> None:
    nodes = {"x": waiting("a"), "a": waiting("b"), "b": waiting("a")}
    assert dependencies.cycle("x", nodes) is None


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Skipped"])
def test_a_dependency_that_ended_normally_closes_no_cycle(phase: str) -> None:
    nodes = {"a": waiting("b"), "b": Node(phase, "Succeeded", ("a",))}
    assert dependencies.cycle("a", nodes) is None


def test_a_dependency_ended_by_the_cycle_still_closes_it() -> None:
    nodes = {"a": waiting("b"), "b": Node("Failed", Reason.DEPENDENCY_CYCLE, ("a",))}
    assert dependencies.cycle("a", nodes) == ("a", "b", "a")


def test_the_start_must_be_known() -> None:
    assert dependencies.cycle("a", {}) is None


def test_messages_name_the_cycle() -> None:
    assert "a depends on itself" in dependencies.cycle_message(("a", "a"))
    message = dependencies.cycle_message(("a", "b", "a"))
    assert "Dependency cycle: a → b → a." in message


# --- property -----------------------------------------------------------------------------

NAMES = ("a", "b", "c", "d", "e")
node = st.builds(
    Node,
    phase=st.sampled_from([None, "Pending", "Waiting", "Running", "Succeeded", "Failed"]),
    reason=st.sampled_from([None, Reason.DEPENDENCY_CYCLE, Reason.FAILED]),
    depends_on=st.lists(st.sampled_from([*NAMES, "gone"]), max_size=3).map(tuple),
)


@given(nodes=st.dictionaries(st.sampled_from(NAMES), node, min_size=1))
def test_cycle_is_found_exactly_when_the_waits_lead_back(nodes: dict[str, Node]) -> None:
    for start in nodes:
        # Brute force: every name reachable from start's waits within len(NAMES) steps.
        reach: set[str] = set()
        frontier = {start}
        for _ in range(len(NAMES)):
            frontier = {d for n in frontier for d in dependencies.edges(nodes[n]) if d in nodes}
            reach |= frontier
        found = dependencies.cycle(start, nodes)
        assert (found is not None) == (start in reach)
        if found is not None:
            assert found[0] == found[-1] == start
            assert all(b in dependencies.edges(nodes[a]) for a, b in itertools.pairwise(found))
