"""When a finished job is settled: nothing left for the operator to do (resync skips it).

Aspects covered:
- a job that handed its chain on to another job record (spawned, skipped or
  refused child) is settled at once: that record completes the chain, so the
  parent must never be completed too;
- a job whose chain ended with it (stopped, none) is settled only once marked complete;
- a job that has not ended, or whose next step is not yet recorded, is not settled.
"""

from __future__ import annotations

import pytest

from agentchain.core.rules.outcomes import is_settled, job_ending
from agentchain.flow.rules import retries
from agentchain.models.agentjob import AgentJobStatus
from agentchain.models.aiagent import AiAgentSpec


def _status(phase: str | None, action: str | None, complete: bool = False) -> AgentJobStatus:
    raw: dict[str, object] = {"phase": phase, "chainComplete": complete}
    if action is not None:
        raw["next"] = [{"action": action}]
    return AgentJobStatus.model_validate(raw)


@pytest.mark.parametrize("action", ["spawned", "skipped", "refused"])
def test_handing_the_chain_on_settles_the_parent(action: str) -> None:
    assert is_settled(_status("Succeeded", action))


@pytest.mark.parametrize("action", ["stopped", "none"])
def test_a_chain_ending_here_settles_only_once_complete(action: str) -> None:
    assert not is_settled(_status("Failed", action))
    assert is_settled(_status("Failed", action, complete=True))


@pytest.mark.parametrize(("phase", "action"), [("Running", None), ("Succeeded", None)])
def test_unfinished_or_undecided_is_not_settled(phase: str, action: str | None) -> None:
    assert not is_settled(_status(phase, action))


@pytest.mark.parametrize(
    ("code", "deadline", "marker_output", "attempt", "limit", "expected"),
    [
        (3, False, "done", 1, 1, True),
        (3, False, "done", 2, 1, False),  # The limit counts retries, not attempts.
        (3, False, "done", 1, 0, False),
        (3, False, "done", 10, 10, True),
        (None, True, "done", 1, 3, False),  # A timeout is not retried.
        (None, False, "done", 1, 3, False),  # Nor a lost end.
        (0, False, "no marker here", 1, 3, False),  # Nor a missing completion marker.
        (0, False, "done", 1, 3, False),
    ],
)
def test_should_retry_only_non_zero_exits_within_the_limit(
    code: int | None, deadline: bool, marker_output: str, attempt: int, limit: int, expected: bool
) -> None:
    ending = job_ending(code, marker_output, completion_marker="done", deadline_exceeded=deadline)
    again = retries.delay_before(
        ending, code, attempt, AiAgentSpec(trigger_name="a", backoff_limit=limit)
    )
    assert (again is not None) is expected


def test_a_failed_workspace_prepare_is_its_own_ending_and_not_retried_by_default() -> None:
    why = "The workspace could not be prepared: container workspace-prepare exited 4."
    ending = job_ending(None, None, completion_marker=None, lost_reason=why, prepare_failed=True)
    assert (ending.phase, ending.reason, ending.message) == (
        "Failed",
        "WorkspacePrepareFailed",
        why,
    )
    assert retries.delay_before(ending, None, 1, AiAgentSpec(trigger_name="a")) is None
    late = job_ending(
        None, None, completion_marker=None, deadline_exceeded=True, prepare_failed=True
    )
    assert late.reason == "DeadlineExceeded"  # The deadline says more: the pod was killed.


# --- a runner runtime's exit codes (core/rules/runnerexits.py)

RUNNER_LOG = (
    "[runner] claude-code: 1 turns\nthe model provider refused the credentials: HTTP 401\n\n"
)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (80, "ModelAuthFailed"),
        (81, "ModelRateLimited"),
        (82, "ModelUnavailable"),
        (83, "TurnLimitReached"),
        (84, "ModelRequestRejected"),
        (85, "AgentFailed"),
        (86, "RunnerMisconfigured"),
    ],
)
def test_a_runner_s_exit_code_is_the_job_s_reason(code: int, reason: str) -> None:
    ending = job_ending(code, RUNNER_LOG, completion_marker=None, runner=True)
    assert (ending.phase, ending.reason) == ("Failed", reason)
    assert ending.message == "the model provider refused the credentials: HTTP 401"


@pytest.mark.parametrize("code", [1, 2, 80, 86, 137])
def test_the_same_code_of_an_arbitrary_command_is_container_failed(code: int) -> None:
    ending = job_ending(code, RUNNER_LOG, completion_marker=None)
    assert ending.reason == "ContainerFailed"
    assert ending.message == f"The agent exited with code {code}."


@pytest.mark.parametrize("code", [1, 137, 255])
def test_a_runner_s_foreign_code_is_container_failed(code: int) -> None:
    assert job_ending(code, RUNNER_LOG, completion_marker=None, runner=True).reason == (
        "ContainerFailed"
    )


def test_the_runner_s_message_is_one_bounded_line_of_data() -> None:
    log = "earlier\n" + "x\x1b[31m<b>" * 500 + "\n"
    ending = job_ending(81, log, completion_marker=None, runner=True)
    assert len(ending.message) <= 300 and "\n" not in ending.message
    assert "\x1b" not in ending.message and ending.message.endswith("…")
    # No log at all: the code's own summary.
    silent = job_ending(81, None, completion_marker=None, runner=True)
    assert silent.message == "the model provider kept rate-limiting the agent"
