"""AiAgent: what an agent is, how it is triggered, and where its chain goes next.

Field names and shapes follow seed 003's manifests exactly, so its examples
apply unchanged.  Runtime fields are optional and fall back to operator-wide
defaults; everything the schema can check is checked here (enums, patterns,
bounds) so the API server refuses bad manifests before the operator sees them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from agentchain.models.base import KubeModel
from agentchain.models.conditions import Condition

TRIGGER_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DEFAULT_ASSOCIATIONS = ["OWNER", "MEMBER", "COLLABORATOR"]
DEFAULT_HANDOFF_HEADING = "## Downstream Directives"

Source = Literal["github", "manual", "schedule"]
StepCondition = Literal["always", "on-success", "on-failure"]
FailurePolicy = Literal["stop", "skip", "notify"]
ContextWindow = Literal["tail", "head"]


class ChainStep(KubeModel):
    """The next agent to run when the agent started by this trigger ends."""

    agent_trigger_name: str = Field(
        pattern=TRIGGER_NAME_PATTERN,
        max_length=63,
        description="triggerName of the agent to run next.",
    )
    condition: StepCondition = Field(
        default="on-success", description="When the next agent runs, by the parent's exit."
    )
    failure_policy: FailurePolicy = Field(
        default="stop",
        description=(
            "What happens when the condition is not met: stop ends the chain; skip records "
            "the next agent as a Skipped AgentJob and continues with that agent's own next, "
            "for which the skip counts as a success; notify runs it anyway and raises a "
            "Warning Event."
        ),
    )
    context_window: ContextWindow = Field(
        default="tail",
        description="Which 4,000 characters of the parent's output the child sees.",
    )


class TriggerFilters(KubeModel):
    label: str | None = Field(
        default=None,
        description="Issue/PR label that must be present; on a labeled or unlabeled "
        "action, the label added or removed.",
    )
    repository: str | None = Field(default=None, description="owner/name the event must come from.")
    sender: str | None = Field(default=None, description="GitHub login that must have sent it.")
    mention: bool | None = Field(
        default=None,
        description="true: what the sender wrote (the comment, the review, or the issue or "
        "pull request they opened) must mention the operator's App, @<app-slug>, outside "
        "code and quotes.",
    )
    assigned_to_app: bool | None = Field(
        default=None,
        description="true: the event must assign the issue or pull request to the "
        "operator's App (an assigned action whose assignee is <app-slug>[bot]).",
    )


# A cron expression as the schema can check it: 5 or 6 fields, or one @macro; the
# operator parses it fully and reports a bad one on the AiAgent (condition and Event).
CRON_PATTERN = r"^\s*(@[a-z]+|\S+(\s+\S+){4,5})\s*$"
TIME_ZONE_PATTERN = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$"


class TriggerSchedule(KubeModel):
    """When a ``schedule`` trigger fires (docs/schedules.md)."""

    cron: str = Field(
        min_length=1,
        max_length=256,
        pattern=CRON_PATTERN,
        description='Cron expression: 5 fields ("0 3 * * *"), 6 with seconds first, or '
        "@hourly, @daily, @weekly, @monthly, @yearly.",
    )
    time_zone: str = Field(
        default="UTC",
        max_length=64,
        pattern=TIME_ZONE_PATTERN,
        description='IANA time zone the expression is read in, e.g. "Europe/Paris".',
    )
    starting_deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        le=7 * 24 * 3600,
        description="A tick missed (operator down) runs late only within this many "
        "seconds; at most the latest missed tick runs. Default 300.",
    )

    def describe(self) -> str:
        """``<cron> in <zone>``: how events, conditions and logs name a schedule."""
        return f"{' '.join(self.cron.split())} in {self.time_zone}"


class EventTrigger(KubeModel):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.source == 'schedule' ? has(self.schedule) : !has(self.schedule)",
                    "message": "source schedule needs a schedule, and only it has one",
                }
            ]
        }
    )

    source: Source = Field(
        description="github (webhook deliveries), manual (API, chains) or schedule (cron)."
    )
    events: list[str] = Field(
        default_factory=list,
        description='GitHub events: "issues.opened" (event.action) or "push" (every action).',
    )
    filters: TriggerFilters | None = None
    schedule: TriggerSchedule | None = Field(
        default=None, description="source schedule: when it fires."
    )
    next: ChainStep | None = None


class SenderPolicy(KubeModel):
    """Who may start this agent from a GitHub event (untrusted text is data)."""

    allowed_associations: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ASSOCIATIONS),
        description="author_association values allowed to start the agent.",
    )
    allow_bots: bool = Field(default=False, description="Whether Bot senders may start it.")


# --- who may reach this agent: delegation and repository binding -------------
ANY_AGENT = "*"
ALLOWED_CALLER_PATTERN = r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"
# owner/name or owner/*; GitHub owners and names are letters, digits, '-', '_' and '.'.
REPOSITORY_PATTERN = r"^[A-Za-z0-9_.-]+/([A-Za-z0-9_.-]+|\*)$"


class DelegationPolicy(KubeModel):
    """Which running agents may delegate to this one through the job API."""

    allowed_from: list[Annotated[str, Field(pattern=ALLOWED_CALLER_PATTERN, max_length=63)]] = (
        Field(
            default_factory=list,
            max_length=100,
            description=(
                'triggerNames of agents whose jobs may delegate to this agent; "*" allows '
                "every agent of the namespace."
            ),
        )
    )
    allow_chain: bool = Field(
        default=True,
        description=(
            "Whether the agents of this agent's own chains (linked to it by next steps, "
            "in either direction) may delegate to it without being listed in allowedFrom."
        ),
    )


class ContextStoreAccess(KubeModel):
    read_namespaces: list[str] = Field(
        default_factory=list,
        description=(
            "Store namespaces whose entries go in the prompt; an entry written by a chain "
            "whose GitHub sender this agent's senderPolicy does not admit is withheld."
        ),
    )
    max_entries: int = Field(default=10, ge=0, le=100)


class LearningsRef(KubeModel):
    config_map_name: str = Field(description="ConfigMap whose data entries are learnings.")


ConcurrencyPolicy = Literal["queue", "cancel-in-progress", "refuse"]


class Concurrency(KubeModel):
    """A concurrency group: chains started by this agent whose group renders the same
    share ``limit`` slots; a chain holds its slot until it is complete."""

    group: str = Field(
        min_length=1,
        max_length=512,
        description=(
            "Template over the event, rendered in the prompt sandbox, e.g. "
            "'{{ repository }}#{{ issue.number }}'; variables: event, repository, issue "
            "(number, title), number, sender, agent."
        ),
    )
    limit: int = Field(default=1, ge=1, le=1000, description="Chains of the group at once.")
    policy: ConcurrencyPolicy = Field(
        default="queue",
        description=(
            "queue: a new chain waits in phase Queued, first in first out; "
            "cancel-in-progress: a new chain stops the oldest running one (Cancelled, "
            "reason Superseded, supersededBy naming the new job); refuse: a new chain over "
            "the limit ends Failed with reason ConcurrencyLimited."
        ),
    )


# --- GitHub App: the job token and write-back ----------------------------------
PermissionLevel = Literal["read", "write"]


class GitHubPermissions(KubeModel):
    """What a job's installation token may do, by GitHub permission (unset: nothing).

    ``metadata: read`` comes with every token; the App itself must have been granted at
    least as much, or the job gets no token (an Event says which permission is missing).
    """

    contents: PermissionLevel | None = Field(default=None, description="Code: clone, push.")
    issues: PermissionLevel | None = Field(default=None, description="Issues and comments.")
    pull_requests: PermissionLevel | None = Field(
        default=None, description="Pull requests and their comments."
    )
    checks: PermissionLevel | None = Field(default=None, description="Check runs.")
    statuses: PermissionLevel | None = Field(default=None, description="Commit statuses.")
    actions: PermissionLevel | None = Field(default=None, description="Workflow runs.")


class GitHubWriteBack(KubeModel):
    """How a chain this agent starts from an issue or pull request shows on GitHub."""

    comment: bool = Field(
        default=True, description="Keep one comment on the issue or PR up to date."
    )
    check_run: bool = Field(default=True, description="A Check Run on the PR's head commit.")
    allow_mentions: bool = Field(
        default=False,
        description=(
            "Write the outcome as Markdown, so agent text may @mention people and use "
            "closing keywords (fixes #1). Otherwise it is shown as text in a code block."
        ),
    )


RetryReason = Literal[
    "ContainerFailed",
    "DeadlineExceeded",
    "OutputLost",
    "CompletionMarkerMissing",
    "WorkspacePrepareFailed",
    # A runner runtime's failures that a later attempt may not meet.
    "ModelRateLimited",
    "ModelUnavailable",
    "AgentFailed",
]


def _retry_on_default() -> list[RetryReason]:
    # A runner runtime's job ends with its provider's reason instead of ContainerFailed;
    # the transient ones are retried as a non-zero exit always was.
    return ["ContainerFailed", "ModelRateLimited", "ModelUnavailable"]


class Backoff(KubeModel):
    """Exponential backoff: attempt N+1 waits base * factor^(N-1) seconds, at most max."""

    base_seconds: float = Field(default=10.0, ge=0, le=86400)
    factor: float = Field(default=2.0, ge=1, le=10)
    max_seconds: float = Field(default=600.0, ge=0, le=86400)


class RetryPolicy(KubeModel):
    """Which failed attempts are retried (within backoffLimit) and how long each waits."""

    backoff: Backoff = Field(default_factory=Backoff)
    on: list[RetryReason] = Field(
        default_factory=_retry_on_default,
        description="Endings that are retried (the job's status.reason); a runner "
        "runtime's ModelAuthFailed, TurnLimitReached, ModelRequestRejected and "
        "RunnerMisconfigured would fail again and cannot be listed.",
    )
    exit_codes: list[int] | None = Field(
        default=None,
        max_length=64,
        description="Only these exit codes count for ContainerFailed (default: any non-zero).",
    )


class Budget(KubeModel):
    """Limits of each chain this agent starts (as its first job) over the whole chain; on
    an agent later in a chain, limits of that agent's own jobs in the chain.  Past one,
    the chain is stopped (its running job ends Cancelled, reason BudgetExceeded) and
    nothing more of it starts."""

    max_chain_seconds: int | None = Field(
        default=None,
        ge=1,
        description="Wall time from the chain's first launch (later agent: its first job's).",
    )
    max_attempts: int | None = Field(
        default=None,
        ge=1,
        description="Attempts (batch Jobs) across the chain's jobs (later agent: its jobs').",
    )
    max_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Tokens the chain's agents report (later agent: its jobs report).",
    )
    max_cost: float | None = Field(
        default=None,
        ge=0,
        description="Cost the chain's agents report, in currency (later agent: its jobs').",
    )
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")


RepositoryPermission = Literal["read", "write", "admin", "off"]


class Approval(KubeModel):
    """Each job of this agent waits in AwaitingApproval until approved or rejected (the
    job API with an admin token, the labrats.work/approval annotation, or a comment
    command from an allowed GitHub user), or until timeoutSeconds pass (then it fails
    and the chain's failure policy applies)."""

    approvers: list[str] = Field(
        default_factory=list, max_length=100, description="GitHub logins who may approve."
    )
    associations: list[str] = Field(
        default_factory=list,
        max_length=10,
        description=(
            "Author associations whose comments may approve or reject, whatever their "
            "permission on the repository (MEMBER: any member of the organisation)."
        ),
    )
    repository_permission: RepositoryPermission = Field(
        default="write",
        description=(
            "Commenters with at least this permission on the event's repository may approve "
            "or reject, as GitHub answers with the App's installation token. Without a "
            "GitHub App (or when GitHub does not answer) only the repository's OWNER "
            "counts. off: nobody by permission, only approvers and associations."
        ),
    )
    timeout_seconds: int | None = Field(default=None, ge=1, le=30 * 24 * 3600)


class GitHubFollowUps(KubeModel):
    """Follow-up rounds on the pull request this agent's chain opened (docs/github.md,
    "The pull-request loop"): the agent runs again on the same branch when the pull
    request's checks fail (``checks``) or an allowed reviewer requests changes
    (``reviews``), at most ``maxRounds`` times per pull request."""

    checks: bool = Field(
        default=False,
        description=(
            "Run again when a check of the chain's pull request fails (check_run, "
            "check_suite or workflow_run completed with a failing conclusion)."
        ),
    )
    reviews: bool = Field(
        default=False,
        description=(
            "Run again when an allowed sender (senderPolicy) submits a review "
            "requesting changes on the chain's pull request."
        ),
    )
    max_rounds: int = Field(
        default=3,
        ge=1,
        le=20,
        description=(
            "Follow-up rounds per pull request; the one after the last starts nothing "
            "and one comment on the pull request says so."
        ),
    )


class GitHubAccess(KubeModel):
    permissions: GitHubPermissions | None = Field(
        default=None,
        description=(
            "Permissions of the installation token each job gets as GITHUB_TOKEN, limited "
            "to the event's repository. None: no token."
        ),
    )
    write_back: GitHubWriteBack = Field(
        default_factory=GitHubWriteBack,
        description="Progress and outcome on the issue or PR (when the operator has an App).",
    )
    review: bool = Field(
        default=False,
        description=(
            "Post this agent's review (the agentchain-review block of its output) as a "
            "pull request review on its chain's pull request (when the operator has an App)."
        ),
    )
    follow_ups: GitHubFollowUps | None = Field(
        default=None,
        description=(
            "Run this agent again on the pull request its chain opened when its checks "
            "fail or a reviewer requests changes. None: never."
        ),
    )


# --- workspaces: the chain's repository checked out once ----------------------
# Plain schema patterns, not CEL rules: with a CEL rule anywhere in the schema the API
# server adds "validation rules were not checked" to every other error, which makes the
# messages of unrelated mistakes harder to read.
WORKSPACE_REPOSITORY_PATTERN = r"^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|https://[!-~]+)$"
QUANTITY_PATTERN = r"^[0-9]+([.][0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"
DURATION_PATTERN = r"^(0|([0-9]+(s|m|h|d))+)$"
BRANCH_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]*$"
REF_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._/-]*$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class Workspace(KubeModel):
    """A volume with the chain's repository checked out, shared by every step of the
    chain (docs/workspaces.md).  Declared by the chain's first agent that has one; the
    agents after it inherit it, read-write unless they ask for ``readOnly``."""

    repository: str | None = Field(
        default=None,
        max_length=512,
        pattern=WORKSPACE_REPOSITORY_PATTERN,
        description=(
            "The repository to check out: owner/name on GitHub or a full https:// git URL. "
            "Default: the repository of the event that started the chain."
        ),
    )
    ref: str | None = Field(
        default=None,
        max_length=255,
        pattern=REF_PATTERN,
        description=(
            "Branch, tag or commit to check out. Default: for a pull request event its head "
            "commit, otherwise the repository's default branch."
        ),
    )
    size: str = Field(
        default="1Gi",
        max_length=32,
        pattern=QUANTITY_PATTERN,
        description="Size of the volume, a quantity such as 1Gi or 500Mi.",
    )
    storage_class_name: str | None = Field(
        default=None,
        max_length=253,
        description="StorageClass of the volume (default: the cluster's default class).",
    )
    publish: bool = Field(
        default=False,
        description=(
            "When the chain completes successfully, push the workspace's commits to "
            "branch and (with a GitHub App) open or update one pull request."
        ),
    )
    publish_from_forks: bool = Field(
        default=False,
        description=(
            "Also publish a chain started on a pull request whose head is a fork (or not "
            "known to be this repository). Off by default: the published branch holds the "
            "fork's commits, and the repository's push and pull_request workflows would "
            "run that code with the repository's secrets."
        ),
    )
    publish_after_step: bool = Field(
        default=False,
        description=(
            "When a job of this agent succeeds and the chain goes on, push the workspace's "
            "commits so far to branch (and open or update the pull request) without "
            "waiting for it; the chain's workspace must have publish: true."
        ),
    )
    branch: str | None = Field(
        default=None,
        max_length=200,
        pattern=BRANCH_PATTERN,
        description="The branch published to. Default: agentchain/<chain id>.",
    )
    read_only: bool = Field(
        default=False,
        description=(
            "This agent mounts the chain's workspace read-only (on an agent later in a "
            "chain; the other fields then come from the chain's workspace)."
        ),
    )
    credentials_secret: str | None = Field(
        default=None,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description=(
            "For a repository not on GitHub: a Secret of this namespace whose key token is "
            "the password for https git (cloning, publishing; the agent gets it only with "
            "github.permissions.contents: write)."
        ),
    )
    keep_for: str = Field(
        default="0",
        max_length=32,
        pattern=DURATION_PATTERN,
        description=(
            "How long the volume is kept after the chain completes (and publishing "
            "ended), for debugging: 0 (default), 30m, 2h, 1d..."
        ),
    )


# --- agent runtimes: the AiAgent names an agent CLI, the operator builds its pod -----------
# The combinations one field cannot check are CEL rules (x-kubernetes-validations), each
# with a message that says what to change.  They cost a note on other errors: when the
# API server refuses an AiAgent for a type, enum, required or length error it adds "some
# validation rules were not checked", since it skips CEL then.
RuntimeType = Literal["command", "claude-code", "codex", "gemini", "opencode"]
RUNNER_RUNTIMES = ("claude-code", "codex", "opencode", "gemini")
"""Runtime types the runner (``agentchain agent run``) drives today."""
CredentialKind = Literal["apiKey", "oauthToken"]
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
MCP_SERVER_NAME_PATTERN = r"^[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"
BASE_URL_PATTERN = r"^https?://[!-~]+$"
INSTRUCTIONS_MAX_CHARS = 32768


def _rules(*rules: tuple[str, str]) -> dict[str, Any]:
    """A model's CEL rules, as the CRD carries them (``crdgen`` copies them)."""
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


class KeyRef(KubeModel):
    """One key of a Secret or ConfigMap in the AiAgent's namespace."""

    name: str = Field(max_length=253, pattern=DNS_SUBDOMAIN_PATTERN, description="Its name.")
    key: str = Field(max_length=253, pattern=SECRET_KEY_PATTERN, description="The key.")


class RuntimeInstructions(KubeModel):
    """Standing instructions (an AGENTS.md-style text) the CLI gets besides the prompt:
    Claude Code as an appended system prompt, Codex as developer instructions, OpenCode
    as an instructions file, Gemini CLI as its global GEMINI.md."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            ("has(self.text) != has(self.configMapRef)", "give either text or configMapRef"),
        )
    )

    text: str | None = Field(
        default=None, max_length=INSTRUCTIONS_MAX_CHARS, description="The instructions."
    )
    config_map_ref: KeyRef | None = Field(
        default=None, description="A ConfigMap key holding them (read when the pod starts)."
    )


class RuntimeCredentials(KubeModel):
    """The model provider's credential, from a Secret key, given to the CLI as its
    variable (ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN, OPENAI_API_KEY or GEMINI_API_KEY)
    through secretKeyRef: the operator never reads it."""

    secret_name: str = Field(
        max_length=253, pattern=DNS_SUBDOMAIN_PATTERN, description="Secret of this namespace."
    )
    key: str = Field(max_length=253, pattern=SECRET_KEY_PATTERN, description="Its key.")
    kind: CredentialKind = Field(
        default="apiKey",
        description="apiKey: the provider's API key; oauthToken: a Claude Code OAuth token "
        "(claude setup-token), claude-code only.",
    )


class McpEnvSource(KubeModel):
    secret_key_ref: KeyRef = Field(description="A Secret key of this namespace.")


class McpEnvVar(KubeModel):
    """A variable of an MCP server: a literal value, or a Secret key (never expanded)."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            ("has(self.value) != has(self.valueFrom)", "give either value or valueFrom"),
            (
                "!self.name.startsWith('AGENT_') && !self.name.startsWith('AGENTCHAIN_')",
                "AGENT_ and AGENTCHAIN_ variables are the operator's",
            ),
        )
    )

    name: str = Field(max_length=128, pattern=ENV_NAME_PATTERN)
    value: str | None = Field(default=None, max_length=4096)
    value_from: McpEnvSource | None = None


class McpServer(KubeModel):
    """An MCP server (stdio) the CLI starts beside ``agentchain mcp``; it must be in the
    runtime's image."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            ("self.name != 'agentchain'", "the name agentchain is the operator's own server"),
        )
    )

    name: str = Field(max_length=63, pattern=MCP_SERVER_NAME_PATTERN)
    command: str = Field(min_length=1, max_length=1024, description="The program to run.")
    args: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list, max_length=64)
    env: list[McpEnvVar] = Field(
        default_factory=list,
        max_length=64,
        description="Its variables; they are the pod's too (one value per name in the pod).",
    )


class AgentRuntime(KubeModel):
    """The agent CLI a job runs: ``command`` runs spec.command as it is; the others run
    the CLI through the in-pod runner (``agentchain agent run``, docs/agents.md)."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            (
                "self.type != 'command' || !(has(self.maxTurns) || has(self.allowedTools)"
                " || has(self.instructions) || has(self.credentials) || has(self.baseUrl)"
                " || has(self.mcpServers))",
                "type command runs spec.command as it is: maxTurns, allowedTools, "
                "instructions, credentials, baseUrl and mcpServers need an agent CLI type "
                "(claude-code, codex, gemini or opencode)",
            ),
            (
                "self.type != 'codex' || !has(self.maxTurns)",
                "codex has no turn limit: remove maxTurns",
            ),
            (
                "self.type != 'codex' || !has(self.allowedTools)",
                "codex has no tool allow-list: remove allowedTools",
            ),
            (
                "!has(self.credentials) || !has(self.credentials.kind)"
                " || self.credentials.kind == 'apiKey' || self.type == 'claude-code'",
                "credentials kind oauthToken is for type claude-code only",
            ),
        )
    )

    type: RuntimeType = Field(
        default="command",
        description="command (spec.command, the default), claude-code, codex, opencode, "
        "gemini (each runs in its reference image unless spec.image names another).",
    )
    max_turns: int | None = Field(
        default=None, ge=1, le=10000, description="The agent's turn limit (not codex)."
    )
    allowed_tools: list[Annotated[str, Field(min_length=1, max_length=256)]] | None = Field(
        default=None,
        max_length=100,
        description='Tools the CLI may use without asking, e.g. "Read", "Bash(git log:*)" '
        '(claude-code), "run_shell_command(git)" (gemini), or the only tools it may use, '
        'e.g. "read", "bash", "agentchain_*" (opencode); the agentchain MCP tools are '
        "allowed when mcp is true.",
    )
    instructions: RuntimeInstructions | None = None
    credentials: RuntimeCredentials | None = Field(
        default=None,
        description="The provider's credential. Absent: none (a baseUrl server "
        "that needs no key, or a key given in env).",
    )
    base_url: str | None = Field(
        default=None,
        max_length=2048,
        pattern=BASE_URL_PATTERN,
        description="A model server of the provider's API (Anthropic Messages for "
        "claude-code, OpenAI Responses for codex, OpenAI Chat Completions for opencode, "
        "the Gemini API for gemini, https unless localhost), e.g. a self-hosted one in the "
        "cluster (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL).",
    )
    mcp: bool = Field(
        default=True,
        description="Register agentchain mcp (delegation, store, anchors, progress notes) "
        "with the CLI.",
    )
    mcp_servers: list[McpServer] | None = Field(
        default=None, max_length=20, description="More MCP servers for the CLI, by name."
    )


# --- egress: where an agent's pods may connect (docs/agents.md, Egress) ---------------
EgressPolicyMode = Literal["generated", "none"]
EgressProtocol = Literal["TCP", "UDP", "SCTP"]
# An IPv4 or IPv6 network in CIDR notation; the operator checks it exactly (``ipaddress``)
# and reports one it cannot use in an Event.
CIDR_PATTERN = r"^[0-9a-fA-F:.]+/[0-9]{1,3}$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class EgressPort(KubeModel):
    port: int = Field(ge=1, le=65535, description="Destination port.")
    protocol: EgressProtocol = Field(default="TCP")


class EgressAllow(KubeModel):
    """One more destination for the agent's pods: a network (``cidr``) or the pods of a
    namespace of this cluster (``namespace``, narrowed by ``podLabels``)."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            ("has(self.cidr) != has(self.__namespace__)", "give either cidr or namespace"),
            ("!has(self.podLabels) || has(self.__namespace__)", "podLabels needs namespace"),
        )
    )

    cidr: str | None = Field(
        default=None,
        max_length=49,
        pattern=CIDR_PATTERN,
        description="A network, e.g. 203.0.113.0/24 or 2001:db8::/32.",
    )
    namespace: str | None = Field(
        default=None,
        max_length=63,
        pattern=DNS_LABEL_PATTERN,
        description="A namespace of this cluster: its pods (all, or those with podLabels).",
    )
    pod_labels: dict[str, str] | None = Field(
        default=None, description="Only the namespace's pods carrying these labels."
    )
    ports: list[EgressPort] = Field(
        default_factory=list, max_length=32, description="Destination ports; empty: every port."
    )


class Egress(KubeModel):
    """What the agent's pods may connect to, when the operator generates egress policies
    (its agent_egress setting): DNS, the operator's job API, the model endpoint, GitHub
    and the git host, and ``allow``; nothing else."""

    policy: EgressPolicyMode = Field(
        default="generated",
        description="generated: the operator keeps a NetworkPolicy for this agent's pods; "
        "none: it keeps none (their egress is whatever the namespace's policies allow).",
    )
    allow: list[EgressAllow] = Field(
        default_factory=list, max_length=32, description="More destinations."
    )


class AiAgentSpec(KubeModel):
    model_config = ConfigDict(
        json_schema_extra=_rules(
            (
                "!has(self.runtime) || self.runtime.type == 'command'"
                " || (!has(self.command) && !has(self.args))",
                "spec.runtime runs the agent CLI through agentchain agent run: remove "
                "spec.command and spec.args, or use runtime type command",
            ),
        )
    )

    name: str | None = Field(default=None, description="Display name.")
    trigger_name: str = Field(
        pattern=TRIGGER_NAME_PATTERN,
        max_length=63,
        description="Unique per namespace; chains refer to the agent by it.",
    )
    default_model: str | None = None
    default_effort: str | None = None
    enabled: bool = True
    event_triggers: list[EventTrigger] = Field(default_factory=list)
    sender_policy: SenderPolicy | None = None
    delegation: DelegationPolicy | None = Field(
        default=None,
        description=("Who may delegate to this agent. Absent: only the agents of its own chains."),
    )
    repositories: list[Annotated[str, Field(pattern=REPOSITORY_PATTERN, max_length=201)]] = Field(
        default_factory=list,
        max_length=100,
        description=(
            'Repositories this agent serves ("owner/name" or "owner/*", any case). A '
            "GitHub event from another repository does not start it; with none listed it "
            "gets events from public repositories only, never from private ones."
        ),
    )
    image: str | None = Field(
        default=None,
        description="Agent container image. Default: the runtime's image from the "
        "operator's settings (type command: its default image).",
    )
    runtime: AgentRuntime | None = Field(
        default=None,
        description="The agent CLI the job runs (docs/agents.md). Absent: type command.",
    )
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[dict[str, Any]] | None = None
    env_from: list[dict[str, Any]] | None = None
    resources: dict[str, Any] | None = None
    service_account_name: str | None = Field(
        default=None,
        description=(
            "ServiceAccount the agent pod runs as, with its API token mounted. "
            "Unset or empty: no account token is mounted."
        ),
    )
    security_context: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The agent container's securityContext, over the default "
            "(allowPrivilegeEscalation: false, capabilities drop ALL): a key given "
            "here replaces that key of the default."
        ),
    )
    pod_security_context: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The agent pod's securityContext, over the default (runAsNonRoot, "
            "runAsUser/runAsGroup 10001, seccompProfile RuntimeDefault): a key given "
            "here replaces that key of the default."
        ),
    )
    timeout_seconds: int | None = Field(default=None, ge=1)
    termination_grace_period_seconds: int | None = Field(
        default=None,
        ge=0,
        le=3600,
        description=(
            "Seconds a stopped job's agent has between SIGTERM and SIGKILL to wind down "
            "(the pod's terminationGracePeriodSeconds). Unset: Kubernetes' 30."
        ),
    )
    backoff_limit: int = Field(
        default=0,
        ge=0,
        le=10,
        description=(
            "Retries after the container exits non-zero. Each retry is a new batch Job "
            "whose prompt is rebuilt, so it carries the job's anchor."
        ),
    )
    prompt_template: str | None = Field(
        default=None,
        description=(
            "Jinja template rendered in a sandbox with the event as data; variables: event "
            "(snake_case keys), agent, prompt (docs/prompts.md)."
        ),
    )
    context_store: ContextStoreAccess | None = None
    learnings: LearningsRef | None = None
    completion_marker: str | None = Field(
        default=None, description="Text the output must contain for exit 0 to count as success."
    )
    handoff_heading: str = Field(default=DEFAULT_HANDOFF_HEADING)
    concurrency: Concurrency | None = Field(
        default=None, description="Concurrency group of the chains this agent starts."
    )
    approval: Approval | None = Field(
        default=None, description="Hold each job of this agent until someone approves it."
    )
    budget: Budget | None = Field(
        default=None,
        description="Budget of each chain this agent starts (as its first job), and of "
        "this agent's own jobs in chains other agents start.",
    )
    retry: RetryPolicy | None = Field(
        default=None,
        description=(
            "Retry backoff and reasons; without it a non-zero exit is retried at once "
            "(within backoffLimit)."
        ),
    )
    github: GitHubAccess | None = Field(
        default=None,
        description=(
            "GitHub App access (docs/github.md): the job token's permissions, and how the "
            "chains this agent starts are written back. Absent: no token, default write-back."
        ),
    )
    workspace: Workspace | None = Field(
        default=None,
        description=(
            "The chain's repository checked out into a volume every step mounts at "
            "/workspace (AGENT_WORKSPACE); see docs/workspaces.md."
        ),
    )
    egress: Egress | None = Field(
        default=None,
        description="Where the agent's pods may connect (docs/agents.md, Egress). Absent: "
        "policy generated, nothing allowed beyond the defaults.",
    )


class AiAgentStatus(KubeModel):
    conditions: list[Condition] = Field(
        default_factory=list,
        description=(
            "Ready: whether the agent can run (enabled, unique triggerName, every next "
            "resolves). LoopFree: a warning, False when the agent's next steps lead back "
            "to it (reason StaticLoop, the ring in the message); Ready is unaffected."
        ),
    )
    observed_generation: int | None = None


class AiAgent(KubeModel):
    spec: AiAgentSpec
    status: AiAgentStatus = Field(default_factory=AiAgentStatus)

    def manual_next(self) -> ChainStep | None:
        """The step an agent follows when a chain (not an event) started it."""
        for trigger in self.spec.event_triggers:
            if trigger.source == "manual":
                return trigger.next
        return None
