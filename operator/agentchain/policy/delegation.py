"""Delegation between running agents: an immutable chain with two refusals (seed 000).

An agent inside a Job may ask the job API for another agent.  The chain of
delegations that led to the caller travels with each job as an immutable
snapshot (``AgentJob.spec.delegation``); extending it returns a new tuple and
never touches the caller's, so every job keeps the exact chain it was started
with, as the seed's ``addStep()`` returns a clone.

The rules are the seed's, checked in the seed's order (loop, then depth):

* The target must not appear anywhere in the chain, as source or as target, nor
  be the caller itself.  This is deliberately conservative: having taken part
  at all, in either role, an agent may not take part again, which rules out
  direct (A → B → A) and indirect (A → B → C → A) loops alike.
* A chain holds at most :data:`MAX_DELEGATION_STEPS` steps.

A refusal is a :class:`DelegationRefused` carrying a machine-readable ``reason``
and the seed's exact message, so the API can answer with a clear error
instead of crashing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from agentchain.models.agentjob import DelegationHop

MAX_DELEGATION_STEPS = 3

RefusalReason = Literal["AlreadyInChain", "MaxDepth"]
ALREADY_IN_CHAIN: RefusalReason = "AlreadyInChain"
MAX_DEPTH: RefusalReason = "MaxDepth"


class DelegationRefused(Exception):
    """A delegation the rules forbid; ``reason`` is machine-readable, the message is not."""

    def __init__(self, reason: RefusalReason, message: str) -> None:
        super().__init__(message)
        self.reason: RefusalReason = reason
        self.message = message


def would_loop(chain: Sequence[DelegationHop], source: str, target: str) -> bool:
    """Whether ``target`` already took part in ``chain`` or is the caller itself."""
    if target == source:
        return True
    return any(target in (hop.source, hop.target) for hop in chain)


def extend_delegation(
    chain: Sequence[DelegationHop], source: str, target: str
) -> tuple[DelegationHop, ...]:
    """A new chain with the step ``source → target`` appended, or :class:`DelegationRefused`."""
    if would_loop(chain, source, target):
        raise DelegationRefused(ALREADY_IN_CHAIN, f"Agent '{target}' already in delegation chain")
    if len(chain) >= MAX_DELEGATION_STEPS:
        raise DelegationRefused(MAX_DEPTH, "Maximum delegation depth reached")
    return (*chain, DelegationHop(source=source, target=target))
