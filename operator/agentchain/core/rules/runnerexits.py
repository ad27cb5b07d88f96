"""The runner's exit codes, and the reason each stands for. Pure: no I/O.

Shared by the runner (``runtimes/inpod/runner.py``, in the pod) and the operator
(``outcomes.job_ending``), so both read the codes from one place.

``agentchain agent run`` ends with one of these codes, and a one-line message as the
last line of its stderr, so whoever reads only the pod's exit code (the operator, from
the container's terminated state) can say why a job failed without parsing a log. The
codes sit in 80-86, clear of the shell's (1, 2, 126, 127, 128+signal) and of sysexits
(64-78), so a CLI's or a shell's own failure is not mistaken for one of them; any other
non-zero code is an unclassified failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentchain.models.conditions import Reason

EXIT_OK = 0
EXIT_MODEL_AUTH = 80  # the provider refused the credentials (401, 403)
EXIT_MODEL_RATE_LIMITED = 81  # the provider kept answering 429 after the CLI's retries
EXIT_MODEL_UNAVAILABLE = 82  # the provider failed (5xx, overloaded) or could not be reached
EXIT_TURN_LIMIT = 83  # the agent used its turns without finishing
EXIT_MODEL_REQUEST_REJECTED = 84  # another 4xx: the request itself (model name, size, ...)
EXIT_AGENT_FAILED = 85  # the CLI failed or ended with no answer, for another reason
EXIT_RUNNER_MISCONFIGURED = 86  # the runner's own settings are wrong (no prompt, no CLI)


@dataclass(frozen=True)
class ExitReason:
    """Why a runner exited non-zero: a condition-style ``reason`` and what it means."""

    reason: str
    summary: str


_REASONS = {
    EXIT_MODEL_AUTH: ExitReason(
        Reason.MODEL_AUTH_FAILED, "the model provider refused the credentials"
    ),
    EXIT_MODEL_RATE_LIMITED: ExitReason(
        Reason.MODEL_RATE_LIMITED, "the model provider kept rate-limiting the agent"
    ),
    EXIT_MODEL_UNAVAILABLE: ExitReason(
        Reason.MODEL_UNAVAILABLE, "the model provider failed or could not be reached"
    ),
    EXIT_TURN_LIMIT: ExitReason(Reason.TURN_LIMIT_REACHED, "the agent reached its turn limit"),
    EXIT_MODEL_REQUEST_REJECTED: ExitReason(
        Reason.MODEL_REQUEST_REJECTED, "the model provider rejected the request"
    ),
    EXIT_AGENT_FAILED: ExitReason(Reason.AGENT_FAILED, "the agent CLI failed without an answer"),
    EXIT_RUNNER_MISCONFIGURED: ExitReason(
        Reason.RUNNER_MISCONFIGURED, "the agent runner's settings are invalid"
    ),
}


def reason_of_exit(code: int) -> ExitReason | None:
    """The reason an exit code of the runner stands for; None for 0 and foreign codes."""
    return _REASONS.get(code)


def exit_codes() -> dict[int, ExitReason]:
    """Every code the runner may end with (besides 0), for docs and tests."""
    return dict(_REASONS)
