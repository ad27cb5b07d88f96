"""``shortest_cycle``: the one search behind static rings and ``dependsOn`` cycles.

Aspects covered: a self-loop, the shortest of two cycles, no cycle, a node reached twice
counted once, and (property) that a returned cycle is a real path of the graph.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from agentchain.core.rules.graphs import shortest_cycle

Graph = dict[str, list[str]]


def _of(graph: Graph) -> Callable[[str], list[str]]:
    return lambda here: graph.get(here, [])


def test_a_self_loop_is_a_cycle_of_one_step() -> None:
    assert shortest_cycle("a", _of({"a": ["a"]})) == ("a", "a")


def test_the_shortest_of_two_cycles_is_given() -> None:
    graph = {"a": ["b", "c"], "b": ["d"], "d": ["a"], "c": ["a"]}
    assert shortest_cycle("a", _of(graph)) == ("a", "c", "a")


def test_no_cycle_through_start_is_none() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["b"]}
    assert shortest_cycle("a", _of(graph)) is None


@given(st.dictionaries(st.sampled_from("abcdef"), st.lists(st.sampled_from("abcdef"), max_size=4)))
def test_a_cycle_found_is_a_path_of_the_graph(graph: Graph) -> None:
    found = shortest_cycle("a", _of(graph))
    if found is None:
        return
    assert found[0] == found[-1] == "a"
    assert all(b in graph.get(a, []) for a, b in itertools.pairwise(found))
