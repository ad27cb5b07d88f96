"""Which jobs of a chain are still open when one of its branches ends: a pure rule.

A chain completes when its last open job ends and decides (``hop.rules.chains``).
A job is open until its hop has decided what follows it (``status.next`` written),
with one exception: a job whose chain step already made its child (the child's
deterministic name, ``naming.child_name``, is in the chain) has handed its branch on,
even while its own ``status.next`` is not written yet.  That happens when the
operator dies between creating the child and closing the parent; the parent's
replay will find the child there and write ``next``, but it decides ``Spawn``, not an
end, so it never completes the chain.  If it held the chain open, the chain's last
job would end its branch as ``BranchEnded`` and nothing would ever complete the
chain.  The exception covers every ancestor, not only the ending job's parent: a
crash can cut short a grandparent's close as well, and the resync that replays it
may come after its grandchild has ended.

A delegated job has a name of its own (not a chain step's child name), so the job
that delegated to it stays open until it decides itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentchain.core.rules import naming


@dataclass(frozen=True)
class Member:
    """One AgentJob of the chain, as far as openness goes."""

    name: str
    role: str
    decided: bool
    """Ended, and its ``status.next`` is written."""


def still_open(ending: Member, chain: Iterable[Member]) -> tuple[str, ...]:
    """The names of ``chain``'s jobs other than ``ending`` that hold the chain open.

    Linear in the chain's size times its distinct roles (each job's possible
    children are looked up by name, never compared pairwise).
    """
    members = {m.name: m for m in chain if m.name != ending.name}
    names = set(members) | {ending.name}
    roles = {m.role for m in members.values()} | {ending.role}
    return tuple(
        sorted(
            m.name
            for m in members.values()
            if not m.decided and not any(naming.child_name(m.name, r) in names for r in roles)
        )
    )
