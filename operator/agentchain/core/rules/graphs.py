"""Cycles in small directed graphs, for the two places that refuse one.

Static ``next`` rings between AiAgents (``aiagents.rules.resolution.ring``) and ``dependsOn``
cycles between AgentJobs (``hop.rules.dependencies.cycle``) ask the same question: the
shortest way from a node back to itself.  Breadth first, each node once, so linear in
the nodes and edges the caller's ``successors`` yields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def shortest_cycle(
    start: str, successors: Callable[[str], Iterable[str]]
) -> tuple[str, ...] | None:
    """The shortest cycle through ``start``, first and last ``start``; None when none.

    ``successors`` is asked once per node reached; a node it yields twice counts
    once, and the first path found to a node wins (so earlier successors win ties).
    """
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier and start not in parents:
        following = []
        for here in frontier:
            for there in dict.fromkeys(successors(here)):
                if there not in parents:
                    parents[there] = here
                    following.append(there)
        frontier = following
    if start not in parents:
        return None
    path = [start]
    here = parents[start]
    while here != start:
        path.append(here)
        here = parents[here]
    path.append(start)
    return tuple(reversed(path))
