"""Prometheus metrics (SPEC §7), defined once in the process-wide registry.

Kept below both the engine and the web layer so that either can count without
importing the other; ``web`` only exposes them on ``/metrics``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

JOBS = Counter(
    "agentchain_jobs_total",
    "AgentJobs that reached a phase, by agent and phase.",
    ["namespace", "agent", "phase"],
)
CHAIN_OUTCOMES = Counter(
    "agentchain_chain_outcomes_total",
    "Chains marked complete, by outcome (succeeded, failed, stopped, refused); a chain "
    "whose job was stopped or superseded counts as stopped.",
    ["namespace", "outcome"],
)
HOP_LATENCY = Histogram(
    "agentchain_hop_latency_seconds",
    "Time from a parent's container exit to its child's batch Job creation.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
LOOPS_BLOCKED = Counter(
    "agentchain_loops_blocked_total", "Chain steps refused with LoopDetected.", ["namespace"]
)
DEPTH_REFUSALS = Counter(
    "agentchain_depth_refusals_total",
    "Chain steps refused with MaxChainDepthExceeded.",
    ["namespace"],
)
FAILURE_NOTIFICATIONS = Counter(
    "agentchain_failure_notifications_total",
    "Steps run under failurePolicy notify although their condition was not met.",
    ["namespace", "agent"],
)
WEBHOOK_DELIVERIES = Counter(
    "agentchain_webhook_deliveries_total",
    "GitHub webhook deliveries by result (accepted, ignored, duplicate, invalid, "
    "unauthorized, too_large, timeout, busy, unavailable, unreplicated).",
    ["result"],
)
WEBHOOK_JOBS = Counter(
    "agentchain_webhook_jobs_total",
    "AgentJobs queued by the webhook, by dispatch result (created, existed, failed, retried, "
    "forged: dropped because its seal was not the operator's).",
    ["result"],
)
LEADER = Gauge(
    "agentchain_leader",
    "1 while this replica holds the leader-election Lease and runs the engine, else 0.",
)
LEADER_TRANSITIONS = Counter(
    "agentchain_leader_acquisitions_total",
    "Times this replica became the leader (at most one per process: losing it exits).",
)
STOPS = Counter(
    "agentchain_stops_total",
    "AgentJobs ended Cancelled, by reason (Stopped: by the API or an annotation; "
    "Superseded: by a newer chain of its concurrency group).",
    ["namespace", "reason"],
)
ADMISSIONS = Counter(
    "agentchain_admissions_total",
    "Concurrency-group admissions of chains' root jobs, by verdict (admitted, queued, "
    "refused, superseded); a queued job is counted again at each look until admitted.",
    ["namespace", "verdict"],
)
USAGE_TOKENS = Counter(
    "agentchain_usage_tokens_total",
    "Tokens agents reported through the job API, by agent.",
    ["namespace", "agent"],
)
USAGE_COST = Counter(
    "agentchain_usage_cost_total",
    "Cost agents reported through the job API, by agent, in the currency of the chain's budget.",
    ["namespace", "agent", "currency"],
)
COMMENT_COMMANDS = Counter(
    "agentchain_comment_commands_total",
    "/agentchain comment commands, by verb and result (applied; refused: the commenter "
    "may not; no_job: nothing of that issue to act on; duplicate: that comment already "
    "acted; unavailable: Redis did not answer, nothing acted).",
    ["verb", "result"],
)
GITHUB_WRITEBACKS = Counter(
    "agentchain_github_writebacks_total",
    "Chain write-backs to GitHub by result (written, unchanged, skipped, rate_limited,"
    " retried, failed) and reason (BadAppKey, NotInstalled, PermissionMissing, ...).",
    ["result", "reason"],
)
GITHUB_JOB_TOKENS = Counter(
    "agentchain_github_job_tokens_total",
    "GitHub installation tokens for jobs by result (minted, reused, refreshed, revoked,"
    " refused, failed).",
    ["result"],
)

GITHUB_REVIEWS = Counter(
    "agentchain_github_reviews_total",
    "Reviewer agents' reviews of pull requests by result (posted; found: posted before a"
    " crash, recorded now; refused: not a review, or GitHub refused it).",
    ["result"],
)
GITHUB_COMMAND_ANSWERS = Counter(
    "agentchain_github_command_answers_total",
    "Answers to /agentchain comment commands on GitHub by result (sent, duplicate, silent:"
    " nothing to send, dropped: too many pending, rate_limited, retried, failed) and reason.",
    ["result", "reason"],
)
