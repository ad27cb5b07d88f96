"""Kubebuilder-style status conditions and every reason the operator emits.

Reasons are constants in one place so the troubleshooting doc can be checked
against them by a test, and so handlers never invent ad-hoc strings.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field

from agentchain.models.base import KubeModel

ConditionStatus = Literal["True", "False", "Unknown"]

# Condition types.
READY = "Ready"
"""AiAgent: whether it can run (its triggerName unique, its ``next`` agent there)."""
LOOP_FREE = "LoopFree"
"""AiAgent: False when its ``next`` steps lead back to it (a warning; Ready is unaffected)."""
SCHEDULED = "Scheduled"
"""AiAgent with a ``schedule`` trigger: whether every schedule can be followed (False,
``InvalidSchedule``: a bad cron expression or time zone, which then never fires)."""
GITHUB_WRITE_BACK = "GitHubWriteBack"
"""AiAgent: whether its chains' last GitHub write-back went through (False: the cause as
reason, e.g. ``NotInstalled``); absent until one of its chains is written back."""
EGRESS_POLICY = "EgressPolicy"
"""AiAgent, with the operator's ``agent_egress`` on: True when its pods' egress is what its
spec asks (``EgressPolicyApplied``, or ``EgressNotRestricted`` for ``policy: none``),
False (``EgressPolicyFailed``) when the API server refused the NetworkPolicy."""
COMPLETE = "Complete"
"""AgentJob: set when it ends; True when it Succeeded, was Skipped or was Cancelled (it
ended without failing: a stop, a supersession or a budget), False when it Failed, with
the status' reason and message."""
DEPENDENCIES_READY = "DependenciesReady"
"""AgentJob with ``dependsOn``: False while it waits (or on a cycle), True once every
dependency ended and it was launched."""
AGENT_FOUND = "AgentFound"
"""AgentJob created before its AiAgent: False (``AgentNotFound``) while it waits for an
AiAgent with its ``agentRole`` (``AGENTCHAIN_AGENT_WAIT_SECONDS``), and when it ended for
want of one; True (``AgentFound``) once one appeared and the job was launched."""
CHAIN_COMPLETE = "ChainComplete"
"""AgentJob: its chain ended at this job."""
WORKSPACE_PUBLISHED = "WorkspacePublished"
"""AgentJob, the root of a chain whose workspace publishes: True once its commits are on
the chain's branch (and its pull request is open), False when the push was refused or
failed."""


class Reason:
    """Machine-readable reasons for conditions, ``status.reason`` and Events."""

    # AiAgent readiness.
    AGENT_READY = "AgentReady"
    NEXT_AGENT_NOT_FOUND = "NextAgentNotFound"
    NEXT_AGENT_DISABLED = "NextAgentDisabled"
    DUPLICATE_TRIGGER_NAME = "DuplicateTriggerName"
    AGENT_DISABLED = "AgentDisabled"
    # AiAgent condition LoopFree.
    NO_STATIC_LOOP = "NoStaticLoop"
    STATIC_LOOP = "StaticLoop"
    # AiAgent condition EgressPolicy (and its Warning Events).
    EGRESS_POLICY_APPLIED = "EgressPolicyApplied"
    EGRESS_NOT_RESTRICTED = "EgressNotRestricted"
    EGRESS_POLICY_FAILED = "EgressPolicyFailed"
    EGRESS_RULE_IGNORED = "EgressRuleIgnored"
    # AiAgent condition Scheduled.
    SCHEDULE_VALID = "ScheduleValid"
    INVALID_SCHEDULE = "InvalidSchedule"
    # Normal Event on an AiAgent: a schedule's tick made its run's root AgentJob.
    SCHEDULED_RUN_CREATED = "ScheduledRunCreated"

    # AgentJob lifecycle.
    CREATED = "Created"
    WAITING_FOR_DEPENDENCIES = "WaitingForDependencies"
    DEPENDENCY_NOT_FOUND = "DependencyNotFound"
    DEPENDENCY_CYCLE = "DependencyCycle"
    DEPENDENCIES_ENDED = "DependenciesEnded"
    WAITING_FOR_AGENT = "WaitingForAgent"
    AGENT_FOUND = "AgentFound"
    JOB_CREATED = "JobCreated"
    JOB_REFUSED = "JobRefused"
    RETRYING = "Retrying"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "ContainerFailed"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    AGENT_NOT_FOUND = "AgentNotFound"
    AGENT_NOT_ENABLED = "AgentNotEnabled"
    PROMPT_RENDER_FAILED = "PromptRenderFailed"
    PROMPT_TOO_LARGE = "PromptTooLarge"
    OUTPUT_LOST = "OutputLost"
    WORKSPACE_PREPARE_FAILED = "WorkspacePrepareFailed"
    COMPLETION_MARKER_MISSING = "CompletionMarkerMissing"
    SKIPPED = "Skipped"
    INVALID_CHAIN_METADATA = "InvalidChainMetadata"

    # Chain decisions recorded on jobs.
    LOOP_DETECTED = "LoopDetected"
    MAX_CHAIN_DEPTH_EXCEEDED = "MaxChainDepthExceeded"
    CHAIN_STOPPED = "ChainStopped"
    CHAIN_NOTIFY = "ChainFailureNotified"
    CHILD_SPAWNED = "ChildSpawned"
    CHAIN_COMPLETE = "ChainComplete"
    BRANCH_ENDED = "BranchEnded"

    # Flow control.
    STOPPED = "Stopped"
    SUPERSEDED = "Superseded"
    QUEUED = "Queued"
    ADMITTED = "Admitted"
    CONCURRENCY_LIMITED = "ConcurrencyLimited"
    BUDGET_EXCEEDED = "BudgetExceeded"
    AWAITING_APPROVAL = "AwaitingApproval"
    APPROVAL_REJECTED = "ApprovalRejected"
    APPROVAL_TIMED_OUT = "ApprovalTimedOut"
    # Workspaces.
    WORKSPACE_UNAVAILABLE = "WorkspaceUnavailable"
    WORKSPACE_LIMIT_REACHED = "WorkspaceLimitReached"
    WORKSPACE_PUBLISHED = "WorkspacePublished"
    WORKSPACE_PUSH_REFUSED = "WorkspacePushRefused"
    WORKSPACE_PUBLISH_FAILED = "WorkspacePublishFailed"
    WORKSPACE_PULL_REQUEST_FAILED = "WorkspacePullRequestFailed"
    WORKSPACE_NOT_PUBLISHED = "WorkspaceNotPublished"

    # Agent runtimes: how a runner runtime's job failed (its exit code, see
    # core/rules/runnerexits.py), or why it could not start.
    MODEL_AUTH_FAILED = "ModelAuthFailed"
    MODEL_RATE_LIMITED = "ModelRateLimited"
    MODEL_UNAVAILABLE = "ModelUnavailable"
    TURN_LIMIT_REACHED = "TurnLimitReached"
    MODEL_REQUEST_REJECTED = "ModelRequestRejected"
    AGENT_FAILED = "AgentFailed"
    RUNNER_MISCONFIGURED = "RunnerMisconfigured"
    RUNTIME_UNSUPPORTED = "RuntimeUnsupported"

    @classmethod
    def all(cls) -> list[str]:
        return sorted(v for k, v in vars(cls).items() if k.isupper() and isinstance(v, str))


class Condition(KubeModel):
    type: str
    status: ConditionStatus
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024)
    message: str = Field(default="", max_length=32768)
    last_transition_time: dt.datetime | None = None
    observed_generation: int | None = Field(default=None, ge=0)


def set_condition(conditions: list[Condition], new: Condition, now: dt.datetime) -> list[Condition]:
    """Return conditions with ``new`` merged in, keeping the transition time stable.

    As in apimachinery's ``meta.SetStatusCondition``: the time only moves when
    the status itself changes, so watchers can tell flapping from re-asserting.
    """
    out: list[Condition] = []
    replaced = False
    for old in conditions:
        if old.type != new.type:
            out.append(old)
            continue
        replaced = True
        moved = old.status != new.status
        when = now if moved or old.last_transition_time is None else old.last_transition_time
        out.append(new.model_copy(update={"last_transition_time": when}))
    if not replaced:
        out.append(new.model_copy(update={"last_transition_time": now}))
    return out
