"""Chain budgets' pure side (policy/budgets.py, and the stop it leads to).

Aspects covered:
- nothing is exceeded at or under a limit, only past it (cost, tokens, attempts, wall
  time), and with no limit set nothing ever is (property-based);
- the first limit passed is named, with the currency for cost;
- a wall time is counted from the chain's first launch, and not before one;
- a stop by the budget ends the job Cancelled with reason BudgetExceeded.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.models.aiagent import Budget
from agentchain.models.conditions import Reason
from agentchain.policy import budgets, stops
from agentchain.policy.budgets import ChainUsage

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
    ending = stops.ending(stops.StopRequest(by=stops.BY_BUDGET, reason="3 attempts over 2"))
    assert (ending.phase, ending.reason) == ("Cancelled", Reason.BUDGET_EXCEEDED)
    assert ending.message == "Budget exceeded: 3 attempts over 2"
