"""Retry decisions and backoff delays (flow/rules/retries.py).

Aspects covered:
- without ``spec.retry``: exactly the old rule (a non-zero exit, at once, within
  ``backoffLimit``), for every ending;
- the delay before attempt N+1 is base * factor^(N-1), capped at maxSeconds, never
  negative, and never shorter for a later attempt (property-based);
- ``on`` picks the endings retried (a deadline, lost output); ``exitCodes`` narrows
  ContainerFailed to those codes; a success, a skip or a cancellation is never retried;
- the message's cause names the exit code or the reason.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.core.rules.outcomes import Ending
from agentchain.flow.rules import retries
from agentchain.models.aiagent import AiAgentSpec, Backoff, RetryPolicy
from agentchain.models.conditions import Reason

FAILED = Ending("Failed", Reason.FAILED, "exit 3")
DEADLINE = Ending("Failed", Reason.DEADLINE_EXCEEDED, "late")
LOST = Ending("Failed", Reason.OUTPUT_LOST, "gone")
MARKER = Ending("Failed", Reason.COMPLETION_MARKER_MISSING, "no marker")
PREPARE = Ending("Failed", Reason.WORKSPACE_PREPARE_FAILED, "clone failed")
ENDINGS = [
    FAILED,
    DEADLINE,
    LOST,
    MARKER,
    PREPARE,
    Ending("Succeeded", Reason.SUCCEEDED, ""),
    Ending("Cancelled", Reason.STOPPED, ""),
]


def _agent(limit: int = 3, retry: RetryPolicy | None = None) -> AiAgentSpec:
    return AiAgentSpec(trigger_name="a", backoff_limit=limit, retry=retry)


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("attempt", [1, 2, 3, 4])
def test_without_a_policy_the_old_rule_holds(ending: Ending, attempt: int) -> None:
    delay = retries.delay_before(ending, 3, attempt, _agent())
    assert (delay is not None) is (ending.reason == Reason.FAILED and attempt <= 3)
    assert delay in (None, 0.0)


@given(
    base=st.floats(0, 1000),
    factor=st.floats(1, 10),
    cap=st.floats(0, 5000),
    attempt=st.integers(1, 9),
)
def test_the_delay_grows_exponentially_up_to_the_cap(
    base: float, factor: float, cap: float, attempt: int
) -> None:
    policy = RetryPolicy(backoff=Backoff(base_seconds=base, factor=factor, max_seconds=cap))
    agent = _agent(10, policy)
    delay = retries.delay_before(FAILED, 1, attempt, agent)
    later = retries.delay_before(FAILED, 1, attempt + 1, agent)
    assert delay is not None and later is not None
    assert delay == pytest.approx(min(base * factor ** (attempt - 1), cap))
    assert 0 <= delay <= later <= cap or delay == later == cap


def test_the_documented_example() -> None:
    policy = RetryPolicy(backoff=Backoff(base_seconds=2, factor=2, max_seconds=5))
    assert [retries.delay_before(FAILED, 1, n, _agent(5, policy)) for n in (1, 2, 3, 4)] == [
        2.0,
        4.0,
        5.0,
        5.0,
    ]
    assert retries.delay_before(FAILED, 1, 6, _agent(5, policy)) is None  # Past backoffLimit.


def test_on_picks_the_endings_retried() -> None:
    policy = RetryPolicy(on=["DeadlineExceeded", "OutputLost"])
    agent = _agent(2, policy)
    assert retries.delay_before(DEADLINE, None, 1, agent) is not None
    assert retries.delay_before(LOST, None, 1, agent) is not None
    assert retries.delay_before(FAILED, 3, 1, agent) is None
    assert retries.delay_before(MARKER, 0, 1, agent) is None
    assert retries.delay_before(PREPARE, None, 1, agent) is None
    prepare = _agent(2, RetryPolicy(on=["WorkspacePrepareFailed"]))
    assert retries.delay_before(PREPARE, None, 1, prepare) is not None


@pytest.mark.parametrize(("code", "retried"), [(75, True), (1, True), (2, False), (137, False)])
def test_exit_codes_narrow_container_failures(code: int, retried: bool) -> None:
    agent = _agent(2, RetryPolicy(exit_codes=[1, 75]))
    assert (retries.delay_before(FAILED, code, 1, agent) is not None) is retried


@pytest.mark.parametrize("ending", ENDINGS[4:])
def test_a_success_or_a_cancellation_is_never_retried(ending: Ending) -> None:
    every = RetryPolicy(on=["ContainerFailed", "DeadlineExceeded", "OutputLost"])
    assert retries.delay_before(ending, 0, 1, _agent(5, every)) is None


def test_the_cause_names_the_code_or_the_reason() -> None:
    assert retries.why(FAILED, 3) == "exited with code 3"
    assert retries.why(DEADLINE, None) == "ended DeadlineExceeded"


@pytest.mark.parametrize(
    ("reason", "retried"),
    [
        (Reason.MODEL_RATE_LIMITED, True),
        (Reason.MODEL_UNAVAILABLE, True),
        (Reason.MODEL_AUTH_FAILED, False),
        (Reason.TURN_LIMIT_REACHED, False),
        (Reason.MODEL_REQUEST_REJECTED, False),
        (Reason.AGENT_FAILED, False),
        (Reason.RUNNER_MISCONFIGURED, False),
    ],
)
def test_a_runner_s_transient_failures_are_retried_by_default(reason: str, retried: bool) -> None:
    ending = Ending("Failed", reason, "")
    assert (retries.delay_before(ending, 81, 1, _agent()) is not None) is retried
    # With a policy that does not say, the same default.
    with_policy = _agent(retry=RetryPolicy())
    assert (retries.delay_before(ending, 81, 1, with_policy) is not None) is retried


def test_retry_on_may_name_agent_failed() -> None:
    agent = _agent(retry=RetryPolicy.model_validate({"on": ["AgentFailed"]}))
    assert retries.delay_before(Ending("Failed", Reason.AGENT_FAILED, ""), 85, 1, agent)
    assert (
        retries.delay_before(Ending("Failed", Reason.MODEL_UNAVAILABLE, ""), 82, 1, agent) is None
    )
