"""Delegation between running agents (SPEC §3, seed 000).

Aspects covered:
- a delegation is appended as a new hop and returned as a new tuple; the caller's chain
  (tuple or list) is never changed;
- the target may not be the caller, nor appear anywhere in the chain as source or
  target (direct and indirect loops), with the seed's exact message;
- at most three steps: the fourth delegation is refused with the seed's exact message;
- the loop check comes before the depth check (the seed's order);
- refusals carry a machine-readable reason and are ordinary exceptions;
- property: any sequence of successful extensions yields at most three hops whose
  agents are all distinct.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.models.agentjob import DelegationHop
from agentchain.prompts.rules import delegation
from agentchain.prompts.rules.delegation import DelegationRefused


def hops(*pairs: str) -> tuple[DelegationHop, ...]:
    return tuple(DelegationHop(source=p[0], target=p[1]) for p in pairs)


def test_delegation_appends_a_hop() -> None:
    chain = delegation.extend_delegation((), "kik", "vajbcoder")
    chain = delegation.extend_delegation(chain, "vajbcoder", "reviewer")
    assert [(h.source, h.target) for h in chain] == [
        ("kik", "vajbcoder"),
        ("vajbcoder", "reviewer"),
    ]


def test_the_callers_chain_is_never_changed() -> None:
    original = [DelegationHop(source="a", target="b")]
    extended = delegation.extend_delegation(original, "b", "c")
    assert isinstance(extended, tuple)
    assert len(original) == 1
    assert len(extended) == 2
    assert extended[0] == original[0]


@pytest.mark.parametrize(
    ("chain", "source", "target"),
    [
        pytest.param((), "a", "a", id="self-on-empty-chain"),
        pytest.param(hops("ab"), "b", "b", id="self"),
        pytest.param(hops("ab"), "b", "a", id="back-to-a-source"),
        pytest.param(hops("ab", "bc"), "c", "a", id="indirect-loop"),
        pytest.param(hops("ab", "bc"), "c", "b", id="a-middle-agent"),
        pytest.param(hops("ab"), "x", "b", id="a-target-from-elsewhere"),
    ],
)
def test_an_agent_already_in_the_chain_is_refused(
    chain: tuple[DelegationHop, ...], source: str, target: str
) -> None:
    with pytest.raises(DelegationRefused) as refused:
        delegation.extend_delegation(chain, source, target)
    assert refused.value.reason == "AlreadyInChain"
    assert str(refused.value) == f"Agent '{target}' already in delegation chain"
    assert refused.value.message == str(refused.value)


@pytest.mark.parametrize("steps", [0, 1, 2])
def test_up_to_three_steps_are_allowed(steps: int) -> None:
    chain = hops(*["ab", "bc", "cd"][:steps])
    source = chain[-1].target if chain else "a"
    assert len(delegation.extend_delegation(chain, source, "z")) == steps + 1


def test_a_fourth_step_is_refused() -> None:
    with pytest.raises(DelegationRefused) as refused:
        delegation.extend_delegation(hops("ab", "bc", "cd"), "d", "e")
    assert refused.value.reason == "MaxDepth"
    assert str(refused.value) == "Maximum delegation depth reached"


def test_loop_is_reported_before_depth() -> None:
    with pytest.raises(DelegationRefused) as refused:
        delegation.extend_delegation(hops("ab", "bc", "cd"), "d", "a")
    assert refused.value.reason == "AlreadyInChain"


def test_limit_is_three() -> None:
    assert delegation.MAX_DELEGATION_STEPS == 3


def test_refusal_is_an_ordinary_exception() -> None:
    assert issubclass(DelegationRefused, Exception)


@given(moves=st.lists(st.sampled_from("abcdef"), max_size=10))
def test_successful_extensions_never_repeat_an_agent(moves: list[str]) -> None:
    chain: tuple[DelegationHop, ...] = ()
    source = "a"
    for target in moves:
        try:
            chain = delegation.extend_delegation(chain, source, target)
        except DelegationRefused:
            continue
        source = target
    agents = [chain[0].source, *(h.target for h in chain)] if chain else []
    assert len(chain) <= delegation.MAX_DELEGATION_STEPS
    assert len(set(agents)) == len(agents)
