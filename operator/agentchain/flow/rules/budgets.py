"""Chain budgets: is a chain past one of its limits, and which.

A chain's budget is the ``budget`` of the AiAgent that started it (its first job's
agent), read when it is checked, so raising it lets a stopped chain's *new* runs go
further but never revives the stopped one.  The usage is what Redis counts for the
chain (``flow/usage.py``): the tokens and cost its agents report through the job API,
the attempts launched, and when its first job launched.  Checked when a report
arrives (so the chain stops at the first report over it), at every launch (so nothing
more starts), and at each resync of a running job (wall time).

Every other agent's ``budget`` bounds that agent's own share of the chain: the tokens
and cost its jobs report, their attempts, and the wall time from its first job's
launch in the chain.  ``limits`` lists what a job is held to (the chain's budget, and
its own agent's when that is not the first agent) and ``breached`` names the first
limit passed, saying whose it was.
"""

from __future__ import annotations

from collections.abc import Iterable
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


@dataclass(frozen=True)
class Limit:
    """One budget and the usage it bounds; ``agent`` is empty for the chain's own."""

    budget: Budget
    usage: ChainUsage
    agent: str = ""


def limits(
    chain_budget: Budget | None,
    chain_usage: ChainUsage,
    agent: str,
    first: bool,
    agent_budget: Budget | None,
    agent_usage: ChainUsage,
) -> list[Limit]:
    """What a job of ``agent`` is held to: the chain's budget (its first agent's), and
    its own agent's budget over the agent's usage unless the agent is the first one
    (whose budget already bounds the whole chain)."""
    found = [Limit(chain_budget, chain_usage)] if chain_budget is not None else []
    if not first and agent_budget is not None:
        found.append(Limit(agent_budget, agent_usage, agent))
    return found


def breached(found: Iterable[Limit], now: float) -> str | None:
    """Why a job is over a budget (the first limit passed, and whose), or None."""
    for limit in found:
        why = exceeded(limit.budget, limit.usage, now)
        if why is not None:
            return f"agent {limit.agent}: {why}" if limit.agent else why
    return None
