"""What a chain does when one of its jobs ends (SPEC §2), and where a job stands in it.

Aspects covered:
- ``condition_met`` for every condition by outcome, "skipped" counting as success;
- ``next_step`` for every condition by outcome by failure policy with a valid target
  (Spawn, Spawn with notify, Skip, Stop);
- every refusal (LoopDetected, MaxChainDepthExceeded, NextAgentNotFound,
  DuplicateTriggerName, NextAgentDisabled) under every policy that would create a
  record, and Stop winning over a bad target because nothing is created;
- the order of refusals, for every combination of the five faults;
- an ambiguous target (two AiAgents with its triggerName) is refused naming both,
  never run on one of them; a parent whose own triggerName became ambiguous stops;
- a Skip says ``Skipped``, not ``ChildSpawned``, and that the skipped agent's own
  next follows as after a success;
- the default limit: the 11th job is refused, the 10th runs; custom limits;
- the child plan: deterministic name, position, parent, context window, own next;
- End: no next step, or the parent is a refusal record;
- skip carrying on with the skipped agent's own next, and a loop through a skip;
- messages naming the path;
- property: following decisions from any root over any agents never runs or skips a
  job whose path repeats an agent or whose depth reaches the limit, and always ends.

Positions, annotations and labels are in ``test_chain_positions.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.core.rules import naming
from agentchain.hop.rules import chains
from agentchain.hop.rules.chains import (
    AgentInfo,
    ChainPosition,
    Decision,
    End,
    Finished,
    Limits,
    Outcome,
    Refuse,
    Skip,
    Spawn,
    Stop,
)
from agentchain.models.aiagent import ChainStep
from agentchain.models.conditions import Reason

CONDITIONS = ("always", "on-success", "on-failure")
OUTCOMES: tuple[Outcome, ...] = ("succeeded", "failed", "skipped")
POLICIES = ("stop", "skip", "notify")

CONDITION_TABLE = {
    ("always", "succeeded"): True,
    ("always", "failed"): True,
    ("always", "skipped"): True,
    ("on-success", "succeeded"): True,
    ("on-success", "failed"): False,
    ("on-success", "skipped"): True,
    ("on-failure", "succeeded"): False,
    ("on-failure", "failed"): True,
    ("on-failure", "skipped"): False,
}

REVIEW_STEP = ChainStep(agent_trigger_name="ai-reviewer")


def step(
    target: str = "ai-developer",
    condition: str = "on-success",
    policy: str = "stop",
    window: str = "tail",
) -> ChainStep:
    return ChainStep.model_validate(
        {
            "agentTriggerName": target,
            "condition": condition,
            "failurePolicy": policy,
            "contextWindow": window,
        }
    )


def agent(name: str, *, enabled: bool = True, next_: ChainStep | None = None) -> AgentInfo:
    return AgentInfo(trigger_name=name, enabled=enabled, manual_next=next_)


def finished(
    next_: ChainStep | None,
    outcome: Outcome = "succeeded",
    *,
    path: tuple[str, ...] = ("ai-triage",),
    refused: bool = False,
) -> Finished:
    position = ChainPosition(chain_id="c0ffee", depth=len(path) - 1, path=path)
    return Finished(
        name=f"job-{len(path)}",
        agent=path[-1],
        position=position,
        outcome=outcome,
        step=next_,
        refused=refused,
    )


AGENTS: Mapping[str, AgentInfo] = {
    "ai-triage": agent("ai-triage"),
    "ai-developer": agent("ai-developer", next_=REVIEW_STEP),
    "ai-reviewer": agent("ai-reviewer"),
}


def matrix_id(condition: str, outcome: str, policy: str) -> str:
    return f"{condition}-{outcome}-{policy}"


# --- condition_met ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "outcome", "met"),
    [pytest.param(c, o, m, id=f"{c}-{o}") for (c, o), m in CONDITION_TABLE.items()],
)
def test_condition_met(condition: str, outcome: Outcome, met: bool) -> None:
    assert chains.condition_met(condition, outcome) is met


def test_unknown_condition_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown chain condition"):
        chains.condition_met("sometimes", "succeeded")


# --- the decision matrix ----------------------------------------------------------------


def expected_kind(condition: str, outcome: str, policy: str) -> str:
    if CONDITION_TABLE[(condition, outcome)]:
        return "spawn"
    return {"stop": "stop", "skip": "skip", "notify": "notify"}[policy]


MATRIX = [
    pytest.param(c, o, p, expected_kind(c, o, p), id=matrix_id(c, o, p))
    for c, o, p in itertools.product(CONDITIONS, OUTCOMES, POLICIES)
]


def kind_of(decision: Decision) -> str:
    if isinstance(decision, Spawn):
        return "notify" if decision.notify else "spawn"
    return type(decision).__name__.lower()


@pytest.mark.parametrize(("condition", "outcome", "policy", "kind"), MATRIX)
def test_decision_for_a_valid_target(
    condition: str, outcome: Outcome, policy: str, kind: str
) -> None:
    parent = finished(step(condition=condition, policy=policy), outcome)
    decision = chains.next_step(parent, AGENTS, Limits())
    assert kind_of(decision) == kind
    if isinstance(decision, Stop):
        assert decision.reason == Reason.CHAIN_STOPPED
        assert "ai-triage" in decision.message and outcome in decision.message
    else:
        assert isinstance(decision, Spawn | Skip)
        assert decision.child.agent == "ai-developer"
        assert decision.child.step == REVIEW_STEP


FAULTS = {
    "loop": Reason.LOOP_DETECTED,
    "depth": Reason.MAX_CHAIN_DEPTH_EXCEEDED,
    "missing": Reason.NEXT_AGENT_NOT_FOUND,
    "ambiguous": Reason.DUPLICATE_TRIGGER_NAME,
    "disabled": Reason.NEXT_AGENT_DISABLED,
}


def faulty(
    faults: set[str],
    condition: str = "on-success",
    outcome: Outcome = "succeeded",
    policy: str = "stop",
) -> tuple[Finished, dict[str, AgentInfo], Limits]:
    """A parent whose next step, to ``ai-x``, has exactly the given faults."""
    path: tuple[str, ...] = ("ai-x", "ai-triage") if "loop" in faults else ("ai-triage",)
    limits = Limits(max_jobs=len(path) if "depth" in faults else 10)
    agents = dict(AGENTS)
    if "missing" not in faults:
        agents["ai-x"] = agent("ai-x", enabled="disabled" not in faults)
    if "missing" not in faults and "ambiguous" in faults:
        agents["ai-x"] = dataclasses.replace(agents["ai-x"], holders=("x-one", "x-two"))
    parent = finished(step("ai-x", condition, policy), outcome, path=path)
    return parent, agents, limits


@pytest.mark.parametrize(
    ("condition", "outcome", "policy", "kind"),
    [p for p in MATRIX if p.values[3] != "stop"],
)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_every_refusal_under_every_policy_that_creates_a_record(
    fault: str, condition: str, outcome: Outcome, policy: str, kind: str
) -> None:
    parent, agents, limits = faulty({fault}, condition, outcome, policy)
    decision = chains.next_step(parent, agents, limits)
    assert isinstance(decision, Refuse)
    assert decision.reason == FAULTS[fault]
    assert decision.child.agent == "ai-x"
    assert decision.child.step is None


@pytest.mark.parametrize("fault", list(FAULTS))
def test_stop_wins_over_a_bad_target_because_nothing_is_created(fault: str) -> None:
    parent, agents, limits = faulty({fault}, "on-success", "failed", "stop")
    decision = chains.next_step(parent, agents, limits)
    assert isinstance(decision, Stop)


ORDER = ("loop", "depth", "missing", "ambiguous", "disabled")
COMBINATIONS = [
    pytest.param(set(c), id="+".join(c))
    for n in range(1, 6)
    for c in itertools.combinations(ORDER, n)
]


@pytest.mark.parametrize("faults", COMBINATIONS)
def test_refusal_order_is_loop_depth_missing_ambiguous_disabled(faults: set[str]) -> None:
    parent, agents, limits = faulty(faults)
    decision = chains.next_step(parent, agents, limits)
    assert isinstance(decision, Refuse)
    first = next(f for f in ORDER if f in faults)
    assert decision.reason == FAULTS[first]


# --- limits -----------------------------------------------------------------------------


def parent_at_depth(depth: int) -> Finished:
    path = tuple(f"ai-{i}" for i in range(depth + 1))
    return finished(step(), path=path)


def test_the_tenth_job_runs_with_the_default_limit() -> None:
    decision = chains.next_step(parent_at_depth(8), AGENTS, Limits())
    assert isinstance(decision, Spawn)
    assert decision.child.position.depth == 9


def test_the_eleventh_job_is_refused_with_the_default_limit() -> None:
    decision = chains.next_step(parent_at_depth(9), AGENTS, Limits())
    assert isinstance(decision, Refuse)
    assert decision.reason == Reason.MAX_CHAIN_DEPTH_EXCEEDED
    assert decision.child.position.depth == 10
    assert "job 11 of at most 10" in decision.message


@pytest.mark.parametrize("max_jobs", [1, 2, 3, 25])
def test_custom_limit(max_jobs: int) -> None:
    refused = chains.next_step(parent_at_depth(max_jobs - 1), AGENTS, Limits(max_jobs))
    assert isinstance(refused, Refuse)
    if max_jobs > 1:
        allowed = chains.next_step(parent_at_depth(max_jobs - 2), AGENTS, Limits(max_jobs))
        assert isinstance(allowed, Spawn)


@pytest.mark.parametrize("max_jobs", [0, -1])
def test_a_limit_below_one_job_is_an_error(max_jobs: int) -> None:
    with pytest.raises(ValueError, match="max_jobs"):
        Limits(max_jobs)


# --- the child plan, End, and messages ---------------------------------------------------


def test_child_plan() -> None:
    parent = finished(step(window="head"), path=("ai-triage",))
    decision = chains.next_step(parent, AGENTS, Limits())
    assert isinstance(decision, Spawn)
    child = decision.child
    assert child.name == naming.child_name("job-1", "ai-developer")
    assert child.parent == "job-1"
    assert child.position == ChainPosition("c0ffee", 1, ("ai-triage", "ai-developer"))
    assert child.context_window == "head"
    assert child.step == REVIEW_STEP


def test_decisions_are_deterministic() -> None:
    parent = finished(step())
    assert chains.next_step(parent, AGENTS, Limits()) == chains.next_step(parent, AGENTS, Limits())


def test_no_next_step_ends_the_chain() -> None:
    decision = chains.next_step(finished(None), AGENTS, Limits())
    assert isinstance(decision, End)
    assert "ai-triage has no next step" in decision.message


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_a_refusal_record_ends_the_chain(outcome: Outcome) -> None:
    parent = finished(step(condition="always"), outcome, refused=True)
    assert isinstance(chains.next_step(parent, AGENTS, Limits()), End)


def test_loop_message_names_the_path() -> None:
    parent = finished(step("ai-a"), path=("ai-a", "ai-b"))
    decision = chains.next_step(parent, {"ai-a": agent("ai-a")}, Limits())
    assert isinstance(decision, Refuse)
    assert decision.message == "Loop detected: ai-a → ai-b → ai-a"
    assert decision.child.position.path == ("ai-a", "ai-b", "ai-a")


def test_self_loop_is_detected() -> None:
    parent = finished(step("ai-triage", condition="always"))
    decision = chains.next_step(parent, AGENTS, Limits())
    assert isinstance(decision, Refuse)
    assert decision.reason == Reason.LOOP_DETECTED


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        pytest.param("missing", "no AiAgent has triggerName ai-x", id="missing"),
        pytest.param("disabled", "ai-x has enabled: false", id="disabled"),
        pytest.param(
            "ambiguous", "ai-x is used by AiAgents x-one, x-two; none is run", id="ambiguous"
        ),
    ],
)
def test_configuration_refusals_say_what_to_fix(fault: str, words: str) -> None:
    parent, agents, limits = faulty({fault})
    decision = chains.next_step(parent, agents, limits)
    assert isinstance(decision, Refuse)
    assert words in decision.message
    assert "ai-triage → ai-x" in decision.message


def test_a_parent_whose_trigger_became_ambiguous_stops_naming_why() -> None:
    why = "triggerName 'ai-triage' is used by 2 AiAgents (t-one, t-two)"
    parent = dataclasses.replace(finished(None), ambiguity=why)
    decision = chains.next_step(parent, AGENTS, Limits())
    assert isinstance(decision, Stop)
    assert decision.reason == Reason.DUPLICATE_TRIGGER_NAME
    assert why in decision.message


# --- skip ---------------------------------------------------------------------------------


@pytest.mark.parametrize("condition", ["on-success", "on-failure"])
def test_a_skip_is_recorded_as_skipped_not_spawned(condition: str) -> None:
    outcome: Outcome = "failed" if condition == "on-success" else "succeeded"
    decision = chains.next_step(
        finished(step(condition=condition, policy="skip"), outcome), AGENTS, Limits()
    )
    assert isinstance(decision, Skip)
    assert decision.reason == Reason.SKIPPED != Reason.CHILD_SPAWNED
    assert "passes over ai-developer" in decision.message
    assert "its own next follows as if it succeeded" in decision.message


def as_finished(plan: chains.ChildPlan, outcome: Outcome, refused: bool = False) -> Finished:
    return Finished(plan.name, plan.agent, plan.position, outcome, plan.step, refused)


def test_skip_continues_with_the_skipped_agents_own_next() -> None:
    parent = finished(step(policy="skip"), "failed")
    skipped = chains.next_step(parent, AGENTS, Limits())
    assert isinstance(skipped, Skip)
    then = chains.next_step(as_finished(skipped.child, "skipped"), AGENTS, Limits())
    assert isinstance(then, Spawn) and not then.notify
    assert then.child.position.path == ("ai-triage", "ai-developer", "ai-reviewer")
    assert then.child.position.depth == 2


def test_a_loop_through_a_skip_is_refused() -> None:
    agents = {"ai-a": agent("ai-a"), "ai-b": agent("ai-b", next_=step("ai-a", "always"))}
    parent = finished(step("ai-b", policy="skip"), "failed", path=("ai-a",))
    skipped = chains.next_step(parent, agents, Limits())
    assert isinstance(skipped, Skip)
    then = chains.next_step(as_finished(skipped.child, "skipped"), agents, Limits())
    assert isinstance(then, Refuse) and then.reason == Reason.LOOP_DETECTED


# --- property: chains always end, without repeats or excess depth -----------------------

NAMES = ("a", "b", "c", "d", "e", "f")
steps = st.builds(
    step,
    target=st.sampled_from(NAMES),
    condition=st.sampled_from(CONDITIONS),
    policy=st.sampled_from(POLICIES),
)
configs = st.dictionaries(
    st.sampled_from(NAMES[:-1]),  # "f" is never configured: a missing agent
    st.tuples(st.booleans(), st.none() | steps),
)


@given(
    config=configs,
    root_step=st.none() | steps,
    outcomes=st.lists(st.sampled_from(("succeeded", "failed")), min_size=12, max_size=12),
    max_jobs=st.integers(min_value=1, max_value=12),
)
def test_following_decisions_never_repeats_or_exceeds_the_limit(
    config: dict[str, tuple[bool, ChainStep | None]],
    root_step: ChainStep | None,
    outcomes: list[Outcome],
    max_jobs: int,
) -> None:
    agents = {n: agent(n, enabled=e, next_=s) for n, (e, s) in config.items()}
    limits = Limits(max_jobs)
    job = Finished("root", "a", chains.root_position("c", "a"), outcomes[0], root_step)
    for hop in range(max_jobs + 1):
        decision = chains.next_step(job, agents, limits)
        if isinstance(decision, Stop | End):
            return
        position = decision.child.position
        assert position.depth == hop + 1 == len(position.path) - 1
        if isinstance(decision, Refuse):
            job = as_finished(decision.child, "failed", refused=True)
            continue
        assert len(set(position.path)) == len(position.path)
        assert position.depth < max_jobs
        outcome = "skipped" if isinstance(decision, Skip) else outcomes[hop + 1]
        job = as_finished(decision.child, outcome)
    pytest.fail("the chain did not end within max_jobs + 1 decisions")
