"""Chain budgets' pure side (flow/rules/budgets.py, and the stop it leads to).

Aspects covered:
- nothing is exceeded at or under a limit, only past it (cost, tokens, attempts, wall
  time), and with no limit set nothing ever is (property-based);
- the first limit passed is named, with the currency for cost;
- a wall time is counted from the chain's first launch, and not before one;
- a stop by the budget ends the job Cancelled with reason BudgetExceeded;
- a job is held to its chain's budget and, when its agent is not the first one, to its
  agent's own budget over the agent's share; the first agent's budget is never applied
  twice; a breach names the agent whose budget it was (property-based: an agent's
  breach stands whatever the chain's usage).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.flow.rules import budgets, stoprules
from agentchain.flow.rules.budgets import ChainUsage
from agentchain.models.aiagent import Budget
from agentchain.models.conditions import Reason

usages = st.builds(
    ChainUsage,
    tokens=st.integers(0, 10**9),
    cost=st.floats(0, 10**6),
    attempts=st.integers(0, 100),
    started=st.none() | st.floats(0, 10**9),
)


@given(usages, st.floats(0, 2 * 10**9))
def test_without_limits_nothing_is_ever_exceeded(usage: ChainUsage, now: float) -> None:
    assert budgets.exceeded(Budget(), usage, now) is None


@pytest.mark.parametrize(
    ("budget", "usage", "expected"),
    [
        (Budget(max_cost=1.0), ChainUsage(cost=1.0), None),
        (Budget(max_cost=1.0, currency="EUR"), ChainUsage(cost=1.2), "cost 1.2 EUR over 1 EUR"),
        (Budget(max_tokens=10), ChainUsage(tokens=10), None),
        (Budget(max_tokens=10), ChainUsage(tokens=11), "11 tokens over 10"),
        (Budget(max_attempts=2), ChainUsage(attempts=2), None),
        (Budget(max_attempts=2), ChainUsage(attempts=3), "3 attempts over 2"),
        (Budget(max_chain_seconds=60), ChainUsage(started=1000.0), None),
        (Budget(max_chain_seconds=30), ChainUsage(started=1000.0), "wall time 50s over 30s"),
        (Budget(max_chain_seconds=1), ChainUsage(started=None), None),
        (
            Budget(max_cost=1, max_tokens=1),
            ChainUsage(cost=2, tokens=5),
            "cost 2 USD over 1 USD",
        ),
    ],
)
def test_only_a_limit_passed_is_exceeded_and_the_first_is_named(
    budget: Budget, usage: ChainUsage, expected: str | None
) -> None:
    assert budgets.exceeded(budget, usage, 1050.0) == expected


@given(usages)
def test_a_usage_within_every_limit_is_not_exceeded(usage: ChainUsage) -> None:
    budget = Budget(
        max_cost=usage.cost, max_tokens=usage.tokens, max_attempts=max(usage.attempts, 1)
    )
    assert budgets.exceeded(budget, usage, usage.started or 0.0) is None


def test_a_stop_by_the_budget_ends_budget_exceeded() -> None:
    ending = stoprules.ending(
        stoprules.StopRequest(by=stoprules.BY_BUDGET, reason="3 attempts over 2")
    )
    assert (ending.phase, ending.reason) == ("Cancelled", Reason.BUDGET_EXCEEDED)
    assert ending.message == "Budget exceeded: 3 attempts over 2"


CHAIN_BUDGET = Budget(max_cost=10.0)
OWN_BUDGET = Budget(max_cost=1.0)


def test_the_first_agent_is_held_to_the_chain_budget_only() -> None:
    found = budgets.limits(CHAIN_BUDGET, ChainUsage(), "lead", True, OWN_BUDGET, ChainUsage())
    assert found == [budgets.Limit(CHAIN_BUDGET, ChainUsage())]


def test_a_later_agent_is_held_to_both_and_a_breach_names_it() -> None:
    found = budgets.limits(
        None, ChainUsage(cost=5.0), "coder", False, OWN_BUDGET, ChainUsage(cost=1.5)
    )
    assert found == [budgets.Limit(OWN_BUDGET, ChainUsage(cost=1.5), "coder")]
    assert budgets.breached(found, 0.0) == "agent coder: cost 1.5 USD over 1 USD"
    assert budgets.limits(None, ChainUsage(), "coder", False, None, ChainUsage()) == []


@given(usages, usages)
def test_a_later_agents_breach_stands_whatever_the_chain_used(
    chain: ChainUsage, agent: ChainUsage
) -> None:
    own = Budget(max_cost=agent.cost / 2) if agent.cost > 0 else Budget(max_cost=0.0)
    found = budgets.limits(Budget(), chain, "coder", False, own, agent)
    expected = budgets.exceeded(own, agent, 0.0)
    assert budgets.breached(found, 0.0) == (f"agent coder: {expected}" if expected else None)


@given(usages, usages)
def test_the_chain_budget_is_checked_first(chain: ChainUsage, agent: ChainUsage) -> None:
    found = budgets.limits(Budget(max_attempts=1), chain, "coder", False, Budget(), agent)
    assert budgets.breached(found, 0.0) == budgets.exceeded(Budget(max_attempts=1), chain, 0.0)
