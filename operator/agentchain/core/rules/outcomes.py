"""Pure decisions about one job: which step it follows, how it ended, when it is settled.

These sit apart from the chain decision (``chains.next_step``) because they
read the job's own record; the handlers feed them observed facts only.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentchain.core.rules import runnerexits
from agentchain.models.agentjob import (
    RESULT_MAX_CHARS,
    TERMINAL_PHASES,
    AgentJobStatus,
    EndPhase,
    JobEvent,
)
from agentchain.models.aiagent import AiAgentSpec, ChainStep
from agentchain.models.conditions import Reason

RUNNER_MESSAGE_MAX_CHARS = 300

# A refusal record is terminal and never continues its chain.
REFUSAL_REASONS = frozenset(
    {
        Reason.LOOP_DETECTED,
        Reason.MAX_CHAIN_DEPTH_EXCEEDED,
        Reason.NEXT_AGENT_NOT_FOUND,
        Reason.NEXT_AGENT_DISABLED,
        Reason.DUPLICATE_TRIGGER_NAME,  # Also a created job whose agentRole two agents share.
    }
)
# Actions after which the chain continues in another job.  "refused" belongs
# here too: the refusal is itself a job record, and the chain is completed on
# that record (its own decision is End).  Were it left out, the refused job's
# parent would stay unsettled, and the next resync would mark the chain
# complete a second time, on the parent.
CONTINUING_ACTIONS = frozenset({"spawned", "skipped", "refused"})


def event_matches(selector: str, event: JobEvent | None) -> bool:
    name, _, action = selector.partition(".")
    if event is None or event.name != name:
        return False
    return not action or action == event.action


def trigger_step(agent: AiAgentSpec, origin: str, event: JobEvent | None) -> ChainStep | None:
    """The ``next`` of the trigger that started this job (SPEC §2).

    A GitHub-started job follows the first github trigger whose events match; a
    scheduled run, the schedule trigger whose schedule it names; anything else (chain,
    manual, API, delegation) follows the manual trigger.
    """
    if origin == "github":
        for trigger in agent.event_triggers:
            if trigger.source == "github" and any(event_matches(s, event) for s in trigger.events):
                return trigger.next
        return None
    if origin == "schedule":
        named = event.schedule if event is not None else None
        for trigger in agent.event_triggers:
            if trigger.schedule is not None and trigger.schedule.describe() == named:
                return trigger.next
        return None
    for trigger in agent.event_triggers:
        if trigger.source == "manual":
            return trigger.next
    return None


@dataclass(frozen=True)
class Ending:
    phase: EndPhase
    reason: str
    message: str


def job_ending(
    exit_code: int | None,
    output: str | None,
    *,
    completion_marker: str | None,
    deadline_exceeded: bool = False,
    lost_reason: str | None = None,
    prepare_failed: bool = False,
    runner: bool = False,
) -> Ending:
    """How a job ended, from what was observed of its container (``prepare_failed``:
    its workspace could not be prepared, so the agent never ran; ``runner``: the
    container ran ``agentchain agent run``, whose exit codes say why it failed)."""
    if deadline_exceeded:
        return Ending("Failed", Reason.DEADLINE_EXCEEDED, "The job ran past its timeoutSeconds.")
    if prepare_failed:
        why = lost_reason or "The workspace could not be prepared."
        return Ending("Failed", Reason.WORKSPACE_PREPARE_FAILED, why)
    if exit_code is None:
        return Ending("Failed", Reason.OUTPUT_LOST, lost_reason or "The container's end was lost.")
    if exit_code != 0:
        # Only the runner's codes mean something: 80 from an arbitrary command does not.
        known = runnerexits.reason_of_exit(exit_code) if runner else None
        if known is not None:
            return Ending("Failed", known.reason, runner_message(output) or known.summary)
        return Ending("Failed", Reason.FAILED, f"The agent exited with code {exit_code}.")
    if completion_marker and completion_marker not in (output or ""):
        msg = f"Exit code 0 but the output lacks the completion marker {completion_marker!r}."
        return Ending("Failed", Reason.COMPLETION_MARKER_MISSING, msg)
    return Ending("Succeeded", Reason.SUCCEEDED, "The agent finished with exit code 0.")


def runner_message(output: str | None) -> str:
    """The runner's one-line message: the last non-blank line of the pod's log (it ends
    with it on failure), flattened and bounded; untrusted text, shown as data."""
    lines = (output or "")[-4 * RUNNER_MESSAGE_MAX_CHARS :].splitlines()
    last = next((line for line in reversed(lines) if line.strip()), "")
    flat = " ".join("".join(c if c.isprintable() else " " for c in last).split())
    if len(flat) <= RUNNER_MESSAGE_MAX_CHARS:
        return flat
    return flat[: RUNNER_MESSAGE_MAX_CHARS - 1] + "…"


def result_excerpt(text: str) -> tuple[str, bool, int]:
    """``status.result``: the last 4,000 characters, whether cut, and the full size."""
    if len(text) <= RESULT_MAX_CHARS:
        return text, False, len(text)
    return text[-RESULT_MAX_CHARS:], True, len(text)


def is_terminal(status: AgentJobStatus) -> bool:
    return status.phase in TERMINAL_PHASES


def is_settled(status: AgentJobStatus) -> bool:
    """Nothing left for the operator to do on this job (resync may skip it)."""
    if not is_terminal(status) or not status.next:
        return False
    last = status.next[-1].action
    return last in CONTINUING_ACTIONS or bool(status.chain_complete or status.branch_ended)


def outcome(status: AgentJobStatus) -> str:
    if status.phase == "Succeeded":
        return "succeeded"
    if status.phase == "Skipped":
        return "skipped"
    if status.phase == "Cancelled":
        return "cancelled"
    return "failed"
