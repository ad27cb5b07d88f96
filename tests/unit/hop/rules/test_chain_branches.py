"""A chain with branches (delegation): a job's end completes the chain only when it is the
last open job of it (SPEC §2 "when a chain has nothing more to run", §3 delegation).

Aspects covered:
- a delegated job with no next, ending while the job that delegated to it still runs,
  ends its branch only (``End`` with ``open``), naming where the chain goes on;
- the mirror: the delegating job ends while a job it delegated to still runs;
- a ``Stop`` (unmet condition, cancellation) on a branch stops that branch only, keeping
  its reason;
- the open jobs change nothing but whether an ending decision completes the chain
  (property, over every outcome, condition, policy and target);
- property: however the jobs of a chain end, one at a time (the chain lock), exactly one
  of them completes it, the last one;
- a message names at most three open jobs;
- ``is_settled``: a job whose branch ended is settled, one with only a ``none`` and
  neither mark is not.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from agentchain.core.rules.outcomes import is_settled
from agentchain.hop.rules import chains
from agentchain.hop.rules.chains import AgentInfo, ChainPosition, End, Finished, Limits, Stop
from agentchain.models.agentjob import AgentJobStatus, NextStatus
from agentchain.models.aiagent import ChainStep
from agentchain.models.conditions import Reason

AGENTS = {
    "ai-lead": AgentInfo("ai-lead", True, None),
    "ai-researcher": AgentInfo("ai-researcher", True, None),
    "ai-reviewer": AgentInfo("ai-reviewer", True, None),
}


def job(
    name: str,
    agent: str,
    *,
    step: ChainStep | None = None,
    outcome: chains.Outcome = "succeeded",
    others_open: tuple[str, ...] = (),
) -> Finished:
    path = ("ai-lead",) if agent == "ai-lead" else ("ai-lead", agent)
    position = ChainPosition("c0ffee", len(path) - 1, path)
    return Finished(name, agent, position, outcome, step, others_open=others_open)


def test_a_delegated_job_ending_while_its_caller_runs_ends_its_branch_only() -> None:
    delegated = job("ai-researcher-1", "ai-researcher", others_open=("ai-lead-0",))
    decision = chains.next_step(delegated, AGENTS, Limits())
    assert isinstance(decision, End)
    assert not decision.completes
    assert decision.open == ("ai-lead-0",)
    assert decision.message.startswith("Branch ends: ai-researcher has no next step.")
    assert "The chain goes on in ai-lead-0." in decision.message


def test_the_delegating_job_ending_last_completes_the_chain() -> None:
    decision = chains.next_step(job("ai-lead-0", "ai-lead"), AGENTS, Limits())
    assert isinstance(decision, End)
    assert decision.completes
    assert decision.message == "Chain complete: ai-lead has no next step."


def test_the_delegating_job_ending_first_leaves_the_chain_to_the_delegated_one() -> None:
    lead = job("ai-lead-0", "ai-lead", others_open=("ai-researcher-1",))
    first = chains.next_step(lead, AGENTS, Limits())
    assert isinstance(first, End) and first.open == ("ai-researcher-1",)
    last = chains.next_step(job("ai-researcher-1", "ai-researcher"), AGENTS, Limits())
    assert isinstance(last, End) and last.completes


def test_a_stop_on_a_branch_stops_that_branch_only_with_its_reason() -> None:
    on_success = ChainStep(agent_trigger_name="ai-reviewer")  # failurePolicy stop
    failed = job(
        "ai-researcher-1",
        "ai-researcher",
        step=on_success,
        outcome="failed",
        others_open=("ai-lead-0",),
    )
    decision = chains.next_step(failed, AGENTS, Limits())
    assert isinstance(decision, Stop)
    assert decision.reason == Reason.CHAIN_STOPPED
    assert not decision.completes
    cancelled = dataclasses.replace(failed, outcome="cancelled")
    stopped = chains.next_step(cancelled, AGENTS, Limits())
    assert isinstance(stopped, Stop) and stopped.reason == Reason.STOPPED
    assert stopped.open == ("ai-lead-0",)


def test_a_message_names_at_most_three_open_jobs() -> None:
    others = tuple(f"job-{i}" for i in range(5))
    decision = chains.next_step(
        job("ai-researcher-1", "ai-researcher", others_open=others), AGENTS, Limits()
    )
    assert decision.message.endswith("job-0, job-1, job-2 and 2 more.")


names = st.sampled_from(("ai-lead", "ai-researcher", "ai-reviewer", "ai-missing"))
steps = st.none() | st.builds(
    lambda t, c, p: ChainStep.model_validate(
        {"agentTriggerName": t, "condition": c, "failurePolicy": p}
    ),
    names,
    st.sampled_from(("always", "on-success", "on-failure")),
    st.sampled_from(("stop", "skip", "notify")),
)


@given(
    step=steps,
    outcome=st.sampled_from(("succeeded", "failed", "skipped", "cancelled")),
    refused=st.booleans(),
    others=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5, unique=True),
)
def test_open_jobs_change_only_whether_an_end_completes_the_chain(
    step: ChainStep | None, outcome: chains.Outcome, refused: bool, others: list[str]
) -> None:
    alone = dataclasses.replace(job("ai-researcher-1", "ai-researcher", step=step), refused=refused)
    beside = dataclasses.replace(alone, others_open=tuple(others))
    lone, branch = (chains.next_step(j, AGENTS, Limits()) for j in (alone, beside))
    if isinstance(lone, Stop | End):
        assert lone.completes
        assert type(branch) is type(lone) and not branch.completes
        assert branch.open == tuple(others)
        if isinstance(lone, Stop) and isinstance(branch, Stop):
            assert branch.reason == lone.reason
    else:
        assert branch == lone


@given(order=st.permutations(range(4)), running=st.integers(min_value=1, max_value=4))
def test_however_the_jobs_end_exactly_the_last_completes_the_chain(
    order: list[int], running: int
) -> None:
    """Jobs end one at a time, each deciding with the others not yet decided as open."""
    jobs = [f"job-{i}" for i in order[:running]]
    decided: set[str] = set()
    completions = []
    for name in jobs:
        others = tuple(n for n in jobs if n != name and n not in decided)
        decision = chains.next_step(
            job(name, "ai-researcher", others_open=others), AGENTS, Limits()
        )
        assert isinstance(decision, End)
        decided.add(name)
        if decision.completes:
            completions.append(name)
    assert completions == [jobs[-1]]


def test_a_job_whose_branch_ended_is_settled() -> None:
    end = NextStatus(action="none", reason=Reason.BRANCH_ENDED)
    status = AgentJobStatus(phase="Succeeded", next=[end])
    assert not is_settled(status)  # Neither mark: its completion is still to be written.
    assert is_settled(status.model_copy(update={"branch_ended": True}))
    assert is_settled(status.model_copy(update={"chain_complete": True}))
