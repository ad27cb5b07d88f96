"""Chain budgets: is a chain past one of its limits, and which.

A chain's budget is the ``budget`` of the AiAgent that started it (its first job's
agent), read when it is checked, so raising it lets a stopped chain's *new* runs go
further but never revives the stopped one.  The usage is what Redis counts for the
chain (``store/usage.py``): the tokens and cost its agents report through the job API,
the attempts launched, and when its first job launched.  Checked when a report
arrives (so the chain stops at the first report over it), at every launch (so nothing
more starts), and at each resync of a running job (wall time).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentchain.models.aiagent import Budget


@dataclass(frozen=True)
class ChainUsage:
    tokens: int = 0
    cost: float = 0.0
    attempts: int = 0
    started: float | None = None
    """Unix time of the chain's first launch."""


def exceeded(budget: Budget, usage: ChainUsage, now: float) -> str | None:
    """Why the chain is over its budget (the first limit passed), or None."""
    if budget.max_cost is not None and usage.cost > budget.max_cost:
        return f"cost {usage.cost:g} {budget.currency} over {budget.max_cost:g} {budget.currency}"
    if budget.max_tokens is not None and usage.tokens > budget.max_tokens:
        return f"{usage.tokens} tokens over {budget.max_tokens}"
    if budget.max_attempts is not None and usage.attempts > budget.max_attempts:
        return f"{usage.attempts} attempts over {budget.max_attempts}"
    if budget.max_chain_seconds is not None and usage.started is not None:
        elapsed = now - usage.started
        if elapsed > budget.max_chain_seconds:
            return f"wall time {elapsed:.0f}s over {budget.max_chain_seconds}s"
    return None
