"""Whether a failed attempt is retried, and after how long: pure, from the AiAgent's spec.

Without ``spec.retry`` an agent retries as it always did: only a container that exited
non-zero (for a runner runtime: one that ended ``ModelRateLimited`` or
``ModelUnavailable``), at once, at most ``backoffLimit`` times.  With it:

* ``on`` names the endings that are retried (``ContainerFailed``, ``DeadlineExceeded``,
  ``OutputLost``, ``CompletionMarkerMissing``, ``WorkspacePrepareFailed``, and a runner
  runtime's ``ModelRateLimited``, ``ModelUnavailable``, ``AgentFailed``);
  ``exitCodes``, when given, narrows ``ContainerFailed`` to those codes (a code that
  means "bad input" is not retried);
* the wait before attempt N+1 is ``baseSeconds * factor ** (N - 1)``, at most
  ``maxSeconds``: exponential backoff, as the Job controller's own (10 s doubling to
  6 min) but configurable, because agents fail on rate limits that need longer.

``backoffLimit`` still bounds the number of retries.  The engine records when the next
attempt is due in the job's status (``retryAt``), so the wait survives a restart.
"""

from __future__ import annotations

from agentchain.core.rules.outcomes import Ending
from agentchain.models.aiagent import AiAgentSpec
from agentchain.models.conditions import Reason

DEFAULT_ON = (Reason.FAILED, Reason.MODEL_RATE_LIMITED, Reason.MODEL_UNAVAILABLE)


def delay_before(
    ending: Ending, exit_code: int | None, attempt: int, agent: AiAgentSpec
) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or None when it is not retried."""
    if attempt > agent.backoff_limit or ending.phase != "Failed":
        return None
    retry = agent.retry
    on = tuple(retry.on) if retry is not None else DEFAULT_ON
    if ending.reason not in on:
        return None
    codes = retry.exit_codes if retry is not None else None
    if ending.reason == Reason.FAILED and codes and exit_code not in codes:
        return None
    if retry is None:
        return 0.0
    backoff = retry.backoff
    delay = backoff.base_seconds * backoff.factor ** (attempt - 1)
    return float(min(delay, backoff.max_seconds))


def why(ending: Ending, exit_code: int | None) -> str:
    """The retry message's cause: ``exited with code 3``, ``ended DeadlineExceeded``."""
    if ending.reason == Reason.FAILED:
        return f"exited with code {exit_code}"
    return f"ended {ending.reason}"
