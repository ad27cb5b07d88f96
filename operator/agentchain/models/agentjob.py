"""AgentJob: one run of one agent, and the record of what its chain did next.

The spec is what was asked (immutable in spirit: chain metadata is also put on
annotations at creation so it survives status loss); the status is what the
operator observed and decided.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field

from agentchain.models.base import KubeModel
from agentchain.models.conditions import Condition

Phase = Literal[
    "Pending",
    "Waiting",
    "Running",
    "Succeeded",
    "Failed",
    "Skipped",
    "Queued",
    "AwaitingApproval",
    "Cancelled",
]
EndPhase = Literal["Succeeded", "Failed", "Skipped", "Cancelled"]
"""The phases a job ends in (``TERMINAL_PHASES``)."""
TERMINAL_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed", "Skipped", "Cancelled"})
Origin = Literal["github", "manual", "chain", "delegation", "api", "schedule"]
MemoryScope = Literal["dependencies", "all"]
NextAction = Literal["spawned", "skipped", "stopped", "refused", "none"]

RESULT_MAX_CHARS = 4000


class JobEvent(KubeModel):
    """The event that caused the job: only the parts prompts use, all as data."""

    source: str = Field(default="manual")
    name: str | None = Field(default=None, description="e.g. issues")
    action: str | None = Field(default=None, description="e.g. opened")
    delivery_id: str | None = None
    hook_id: str | None = None
    repository: str | None = None
    sender: str | None = None
    sender_association: str | None = None
    number: int | None = None
    title: str | None = None
    body: str | None = None
    url: str | None = None
    labels: list[str] = Field(default_factory=list)
    installation_id: int | None = Field(
        default=None, description="The GitHub App installation the delivery came through."
    )
    subject: Literal["issue", "pull_request"] | None = Field(
        default=None, description="What number names: an issue or a pull request."
    )
    head_sha: str | None = Field(
        default=None, description="A pull request's head commit (its Check Run goes there)."
    )
    head_repository: str | None = Field(
        default=None,
        description=(
            "A pull request's head repository (owner/name): another than repository for a "
            "fork; unknown for events that do not carry it (comments)."
        ),
    )
    schedule: str | None = Field(
        default=None, description='A scheduled run\'s schedule: "<cron> in <timeZone>".'
    )
    scheduled_at: str | None = Field(
        default=None,
        description="A scheduled run's tick, ISO 8601 in the schedule's time zone.",
    )
    continues: str | None = Field(
        default=None,
        description=(
            "A follow-up round's: the id of the chain whose pull request it works on "
            "(its lineage; the round's jobs show in that chain's comment)."
        ),
    )
    round: int | None = Field(
        default=None, ge=1, description="A follow-up round's number on its pull request."
    )
    reply_to: int | None = Field(
        default=None,
        ge=1,
        description=(
            "A follow-up round started by a reply in a review thread: the thread's first "
            "comment, under which the round's answer is posted as a reply."
        ),
    )
    head_ref: str | None = Field(
        default=None,
        max_length=255,
        description=(
            "A follow-up round's branch when its chain was started on the pull request (a "
            "person's, in the same repository): the pull request's head branch, which the "
            "round checks out and pushes to. Unset for a round of a pull request its chain "
            "opened, which continues that chain's workspace."
        ),
    )


class DelegationHop(KubeModel):
    source: str
    target: str


class AgentJobSpec(KubeModel):
    agent_role: str = Field(min_length=1, max_length=63, description="triggerName of the agent.")
    type: str | None = Field(default=None, description="Kind of work, e.g. implement-issue.")
    prompt: str = Field(default="", description="The original prompt, before any context.")
    event: JobEvent | None = None
    origin: Origin = "manual"
    depends_on: list[str] = Field(default_factory=list, description="AgentJob names to wait for.")
    memory_scope: MemoryScope = Field(
        default="dependencies",
        description=(
            "dependencies: the results of dependsOn only; all: every ended job of this "
            "job's chain and of its dependencies' chains (a coordinator's synthesis)."
        ),
    )
    chain_context: str | None = Field(
        default=None, description="The <chain-context> block the operator built for this child."
    )
    delegation: list[DelegationHop] = Field(
        default_factory=list, description="Immutable snapshot of the delegation chain."
    )


class NextStatus(KubeModel):
    """What the chain did after this job."""

    action: NextAction = Field(
        description=(
            "spawned: the child ran; skipped: the child was recorded as Skipped (never run) "
            "and its own next follows, counting the skip as a success; refused: the child "
            "was recorded as Failed with the refusal's reason (loop, depth, next agent "
            "missing, disabled or ambiguous); stopped: the condition was not met under "
            "failurePolicy stop, or this job's own triggerName became ambiguous; none: no "
            "next step."
        )
    )
    agent: str | None = Field(default=None, description="triggerName of the next agent.")
    child: str | None = Field(default=None, description="The child AgentJob's name.")
    reason: str | None = Field(
        default=None,
        description=(
            "ChildSpawned, Skipped, the refusal's reason, ChainStopped, DuplicateTriggerName, "
            "ChainComplete, or BranchEnded (nothing follows this job but the chain goes on "
            "in another of its jobs, e.g. the one that delegated to it)."
        ),
    )
    message: str | None = None


class Usage(KubeModel):
    """Tokens and cost an agent reported (``POST /api/jobs/{ns}/{name}/usage``)."""

    tokens: int = 0
    cost: float = 0.0
    # No default: the API server would add "turns: 0" to every report that has none.
    turns: int | None = Field(
        default=None, ge=0, description="Agent turns, when its runtime reports them."
    )
    input_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Of tokens, the prompt's (cached input included), when its runtime"
        " splits them.",
    )
    output_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Of tokens, the model's output (reasoning included), when its runtime"
        " splits them.",
    )


class JobWorkspace(KubeModel):
    """The chain's workspace as this job mounts it (docs/workspaces.md)."""

    claim_name: str = Field(description="The chain's PersistentVolumeClaim.")
    repository: str = Field(description="The git URL checked out.")
    ref: str | None = Field(default=None, description="What was checked out (default branch).")
    read_only: bool = False


class AgentJobStatus(KubeModel):
    phase: Phase | None = Field(
        default=None,
        description=(
            "Pending: not running yet; with reason WaitingForAgent, no AiAgent has its "
            "agentRole yet and it waits for one (AGENTCHAIN_AGENT_WAIT_SECONDS after its "
            "creation, then it ends Failed, reason AgentNotFound). "
            "Waiting: for dependsOn jobs (a cycle of them ends each one Failed, reason "
            "DependencyCycle). Skipped: recorded by a failurePolicy skip, never run; counts "
            "as a success for its own next. Queued: waiting for a slot of its concurrency "
            "group. AwaitingApproval: waiting for an approval gate. Cancelled: stopped by "
            "someone (reason Stopped) or by a newer chain of its group (reason Superseded); "
            "nothing follows it."
        ),
    )
    reason: str | None = None
    message: str | None = None
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    chain_id: str | None = None
    chain_depth: int | None = None
    parent_job_id: str | None = None
    chain_path: list[str] = Field(default_factory=list)
    job_name: str | None = None
    attempt: int | None = Field(default=None, ge=1, description="Current attempt, from 1.")
    pod_name: str | None = None
    exit_code: int | None = None
    start_time: dt.datetime | None = None
    completion_time: dt.datetime | None = None
    result: str | None = Field(default=None, max_length=RESULT_MAX_CHARS + 200)
    result_truncated: bool | None = None
    result_size: int | None = None
    next: list[NextStatus] = Field(default_factory=list)
    chain_complete: bool | None = None
    branch_ended: bool | None = Field(
        default=None,
        description=(
            "Nothing follows this job, but its chain was not complete when it ended: another "
            "of its jobs (one it delegated to, or the one that delegated to it) still ran. "
            "The chain completes on its last job to end."
        ),
    )
    stopped_by: str | None = Field(
        default=None, description="Who stopped the job (Cancelled): api, annotation, ..."
    )
    superseded_by: str | None = Field(
        default=None, description="The AgentJob of the newer chain that superseded this one."
    )
    approved_by: str | None = Field(default=None, description="Who approved the job's start.")
    approved_at: dt.datetime | None = None
    usage: Usage | None = Field(
        default=None, description="What the job's agent reported through the job API."
    )
    retry_at: dt.datetime | None = Field(
        default=None, description="When the next attempt (status.attempt) starts (backoff)."
    )
    workspace: JobWorkspace | None = Field(
        default=None, description="The chain's workspace, when the job mounts one."
    )


class AgentJob(KubeModel):
    spec: AgentJobSpec
    status: AgentJobStatus = Field(default_factory=AgentJobStatus)
