"""``dependsOn`` cycles: jobs that wait for each other can never start.

A job waits while a dependency has not ended (SPEC §5).  When the waits form
a cycle (a job depending on itself, or A on B and B on A) none of them will
ever end, so each is ended instead: Failed with ``DependencyCycle`` and a
message naming the cycle.  The engine gathers the jobs the waiting job's
``dependsOn`` reaches and asks :func:`cycle`; it has no I/O.

Which edges count: those of a job that has not ended, and those of a job that
ended *because of* a cycle (``DependencyCycle``, it never ran).  So every job
of a cycle gets the same verdict whichever is looked at first: the first one
found ends, and the others still see the cycle through it.  A job that ended
for any other reason did not wait for anything, whatever its ``dependsOn``
says now (it may have been edited), so its edges do not count: the jobs
depending on it simply go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentchain.core.rules import graphs
from agentchain.models.agentjob import TERMINAL_PHASES
from agentchain.models.conditions import Reason

CYCLE_SEPARATOR = " → "
MAX_JOBS = 200
"""How many jobs a cycle search reads at most; a larger graph is left waiting."""


@dataclass(frozen=True)
class Node:
    """What the search needs of one AgentJob."""

    phase: str | None
    reason: str | None
    depends_on: tuple[str, ...]

    @property
    def waits(self) -> bool:
        """Whether its ``dependsOn`` still holds it (see the module docstring)."""
        return self.phase not in TERMINAL_PHASES or self.reason == Reason.DEPENDENCY_CYCLE


def edges(node: Node) -> Sequence[str]:
    """The dependencies ``node`` waits for: none once it ended, unless by a cycle."""
    return node.depends_on if node.waits else ()


def cycle(start: str, nodes: Mapping[str, Node]) -> tuple[str, ...] | None:
    """The shortest cycle of waits through ``start``, first and last ``start``.

    ``nodes`` holds the jobs reachable from ``start`` (itself included); a name
    missing from it is a job that does not exist, which closes no cycle.  Breadth
    first, each job once: linear in the jobs and edges given.
    """
    if start not in nodes:
        return None
    return graphs.shortest_cycle(start, lambda here: _known(edges(nodes[here]), nodes))


def _known(names: Sequence[str], nodes: Mapping[str, Node]) -> list[str]:
    return [name for name in names if name in nodes]


def cycle_message(found: tuple[str, ...]) -> str:
    """The Failed job's message: the cycle, and that none of its jobs can start."""
    if len(found) == 2:
        return f"Dependency cycle: {found[0]} depends on itself, so it can never start."
    return (
        f"Dependency cycle: {CYCLE_SEPARATOR.join(found)}. These jobs wait for each other "
        "and can never start; each is ended with this reason."
    )
