"""Every Redis key prefix and every TTL the product uses, in one place.

Shaped after arq's ``constants.py``: one named constant per prefix and per lifetime, each
with a comment saying what lives there and why it lasts that long, so an operator reading
``redis-cli --scan`` output can find the owner of any key here, and a reviewer can see
every retention decision at a glance (SPEC §4: "every key prefix and TTL is a named
constant in one module").

Tenancy is structural, not a convention: every per-tenant key embeds the Kubernetes
namespace, and every variable component goes through :func:`encode`, which
percent-encodes ``%`` and ``:``. Because ``:`` is the separator and can never appear
inside an encoded component, the mapping from component tuples to key names is
injective: tenant ``a:b`` with key ``c`` can never produce the same Redis key as tenant
``a`` with key ``b:c``. Builders take ``str`` and return ``str``; redis-py encodes them
as UTF-8.

A name is not an identity: an AgentJob deleted and created again under the same name,
or in a namespace deleted and created again, is another object with another uid. A
record that describes one run of one object (its captured output and ending, which
stops claim too; its anchor) therefore embeds the object's uid as well, and a builder
of such a key refuses an empty one. Records keyed by a chain id need nothing more: a
root's chain id is derived from its uid (``core/rules/naming.chain_id_for``), and its
descendants inherit it. Deterministic names of the objects the operator creates stay
what exactly-once rests on; only what one run *recorded* is bound to the uid.
"""

from __future__ import annotations

# --- root -------------------------------------------------------------------------------
# Root of every key; lets a shared Redis host other applications without collisions.
ROOT_PREFIX = "agentchain:"

# --- shared context store (SPEC §4, seed 000) -------------------------------------------
# Hash per entry: value, writer, created/updated (µs), expires (ms); Redis TTL is the truth.
CONTEXT_ENTRY_PREFIX = ROOT_PREFIX + "ctx:entry:"
# Sorted set per (tenant, namespace): member = key, score = updated µs; for "N most recent".
CONTEXT_RECENT_PREFIX = ROOT_PREFIX + "ctx:recent:"
# Sorted set per (tenant, namespace): member = key, score 0; ZRANGEBYLEX gives literal prefixes.
CONTEXT_LEX_PREFIX = ROOT_PREFIX + "ctx:lex:"
# Sorted set per (tenant, namespace): member = key, score = expiry ms; finds stale index rows.
CONTEXT_EXPIRY_PREFIX = ROOT_PREFIX + "ctx:expiry:"
# Sorted set per tenant: entry key -> expiry ms (NEVER in entries.py if none), every live
# entry of the tenant's store namespaces; the quota's count. Bounded by the quota.
CONTEXT_TALLY_PREFIX = ROOT_PREFIX + "ctx:tally:"
# Hash per tenant: entry key -> its bytes, and "#total"; the quota's size.
CONTEXT_SIZES_PREFIX = ROOT_PREFIX + "ctx:sizes:"
# Default lifetime for write-and-extend and get-and-extend: knowledge nobody reads ages out.
DEFAULT_CONTEXT_TTL_SECONDS = 90 * 24 * 3600

# --- captured job output (SPEC §2) ------------------------------------------------------
# Hash per AgentJob incarnation (tenant, name, uid): the captured container output
# (bounded), and how the attempt ended, which a stop claims too. Keyed by the uid because
# it describes one run: an AgentJob deleted and created again under the same name (or in
# a namespace deleted and created again) is a new run that must not read the old ending.
OUTPUT_PREFIX = ROOT_PREFIX + "output:"
# A week: long enough to debug a chain after the fact, short enough to bound memory.
OUTPUT_TTL_SECONDS = 7 * 24 * 3600
# Hash per AgentJob incarnation (tenant, name, uid): the final answer its runner handed
# over through the job API for one attempt (``store/answers.py``), until the capture of
# that attempt copies it into the output record. It lives no longer than the job token
# that wrote it could: a job cannot run, nor its hop wait, longer than that.
ANSWER_PREFIX = ROOT_PREFIX + "answer:"
ANSWER_TTL_SECONDS = 24 * 3600

# --- chain records (SPEC §2, §5) --------------------------------------------------------
# Hash per chain: completion flag, outcome, last job, completion time.
CHAIN_META_PREFIX = ROOT_PREFIX + "chain:meta:"
# List per chain: JSON hop records, oldest first, capped by CHAIN_MAX_HOPS.
CHAIN_HOPS_PREFIX = ROOT_PREFIX + "chain:hops:"
# Set per chain: identities of hops already recorded, so a replayed transition adds nothing.
CHAIN_HOP_IDS_PREFIX = ROOT_PREFIX + "chain:hop-ids:"
# Hash per chain: agent -> the one job (name/uid) whose prompt gets its learnings; claimed
# before the prompt is built, and that same job keeps it when its prompt is rebuilt.
CHAIN_LEARNINGS_PREFIX = ROOT_PREFIX + "chain:learnings:"
# Hash per chain: its workspace ("spec", JSON, set once by the first job that
# declares one) and what became of it ("published", "pr", "released", and "pull": a
# pending pull request's retry state, JSON, while it is in WORKSPACE_PULLS_PREFIX).
CHAIN_WORKSPACE_PREFIX = ROOT_PREFIX + "chain:workspace:"
# Sorted set per tenant: chain id -> when its workspace volume is to be deleted (its
# chain completed and publishing ended, plus keepFor); the resync deletes the due ones.
WORKSPACE_RELEASE_PREFIX = ROOT_PREFIX + "workspace:release:"
# Sorted set per tenant: chain id -> when to try its pull request again (GitHub failed
# transiently after the push); the resync retries the due ones (the chain's hash holds
# the rest, field "pull").
WORKSPACE_PULLS_PREFIX = ROOT_PREFIX + "workspace:pulls:"
# A month: chains are audited after the fact; every write pushes the expiry forward.
CHAIN_TTL_SECONDS = 30 * 24 * 3600

# --- job tokens (SPEC §7) ---------------------------------------------------------------
# Hash per sha256(token): tenant, job, chain, or only ``revoked`` (a tombstone, so a
# replay cannot revive it). Redis never holds a token itself: tokens derive from the
# operator key and the job's uid (tokens.py), so issuing again gives the same one.
JOB_TOKEN_PREFIX = ROOT_PREFIX + "token:"
# Legacy, read only to revoke: before tokens were derived, the plaintext per (tenant, job).
# Revoking a job that started before the upgrade deletes it; none outlives its 24 h TTL.
LEGACY_JOB_TOKEN_BY_JOB_PREFIX = ROOT_PREFIX + "token-job:"
# Hard cap on a job token's life even if nobody revokes it (jobs time out well before);
# also how long a revoked token's tombstone stays.
JOB_TOKEN_MAX_TTL_SECONDS = 24 * 3600

# --- webhook delivery dedup (SPEC §7) ---------------------------------------------------
# String per X-GitHub-Delivery id: JSON {jobs: ["namespace/name"...], sha256: body digest}
# of the first accepted copy. Not tenant-scoped on purpose: one delivery may fan out into
# several namespaces. Not keyed by X-GitHub-Hook-ID, which the signature does not cover.
DELIVERY_PREFIX = ROOT_PREFIX + "delivery:id:"
# String per sha256 of a signed body: the same record, so a replayed body under another
# (unsigned) delivery id or hook id is a duplicate too. Claimed with the one above.
DELIVERY_BODY_PREFIX = ROOT_PREFIX + "delivery:body:"
# GitHub redelivers for up to three days; dedup must outlive that and operator restarts.
DELIVERY_TTL_SECONDS = 72 * 3600
# Sorted set per namespace: AgentJob name -> time (unix s) it is next due for a create
# attempt; the webhook enqueues, the dispatcher leases (pushes the score ahead) and removes.
WEBHOOK_QUEUE_PREFIX = ROOT_PREFIX + "webhook:queue:"
# Hash per namespace: AgentJob name -> HMAC (64 hex, operator key) + its JSON body, for
# the entries of the queue above; the dispatcher drops an entry whose HMAC does not match.
WEBHOOK_QUEUE_BODY_PREFIX = ROOT_PREFIX + "webhook:body:"
# Set of namespaces whose queue may hold entries, so a cluster-wide dispatcher finds them.
WEBHOOK_QUEUE_NAMESPACES = ROOT_PREFIX + "webhook:namespaces"
# Refreshed on every enqueue: a job that could not be created while GitHub could still
# redeliver its event is moot, and a queue nobody feeds must not stay forever.
WEBHOOK_QUEUE_TTL_SECONDS = DELIVERY_TTL_SECONDS

# --- anchors (SPEC §6, seed 004) --------------------------------------------------------
# String per AgentJob incarnation (tenant, name, uid): compact JSON job anchor, written
# only through that job's token; a later AgentJob of the same name does not resume from it.
JOB_ANCHOR_PREFIX = ROOT_PREFIX + "anchor:job:"
# String per chain: compact JSON team anchor, kept by the operator.
TEAM_ANCHOR_PREFIX = ROOT_PREFIX + "anchor:team:"
# Anchors outlive their job for audit, like chain records.
ANCHOR_TTL_SECONDS = 30 * 24 * 3600

# --- flow control ------------------------------------------------------------
# String per chain: JSON {by, reason} of a chain stop; jobs of the chain that start after
# it are cancelled instead of run. Lives as long as chain records.
CHAIN_STOP_PREFIX = ROOT_PREFIX + "flow:chain-stop:"
# Sorted set per (tenant, concurrency group): chain id -> ticket (µs), the chains holding a
# slot, from admission to the chain's completion.
FLOW_HOLDERS_PREFIX = ROOT_PREFIX + "flow:holders:"
# Sorted set per (tenant, concurrency group): chain id -> ticket, the chains waiting, FIFO.
FLOW_QUEUE_PREFIX = ROOT_PREFIX + "flow:queue:"
# Hash per (tenant, concurrency group): chain id -> its root AgentJob, and "#limit".
FLOW_JOBS_PREFIX = ROOT_PREFIX + "flow:jobs:"
# String per (tenant, chain): the concurrency group the chain holds or waits for.
FLOW_CHAIN_GROUP_PREFIX = ROOT_PREFIX + "flow:chain-group:"
# Set per tenant: its concurrency groups (the slot repair walks them); and the set of
# tenants that have any.
FLOW_GROUPS_PREFIX = ROOT_PREFIX + "flow:groups:"
FLOW_TENANTS = ROOT_PREFIX + "flow:tenants"
# Groups with no admission for a month are forgotten; every admission pushes it ahead.
FLOW_TTL_SECONDS = 30 * 24 * 3600
# Hash per (tenant, chain): tokens, cost (reported by its agents), started (first launch,
# unix s), and "job:<name>:tokens"/"job:<name>:cost" per job; the chain's budget usage.
# Per agent of the chain also "agent:<trigger>:tokens"/":cost"/":started" (its own budget).
FLOW_USAGE_PREFIX = ROOT_PREFIX + "flow:usage:"
# Set per (tenant, chain): "<job>#<attempt>" of every attempt launched, for max attempts.
FLOW_ATTEMPTS_PREFIX = ROOT_PREFIX + "flow:attempts:"
# Set per (tenant, chain, agent): the same "<job>#<attempt>" for that agent's jobs only.
FLOW_AGENT_ATTEMPTS_PREFIX = ROOT_PREFIX + "flow:agentattempts:"
# --- GitHub write-back and job tokens -----------------------------------------
# Hash per chain: the id of its comment and Check Run on GitHub and the digest of the body
# last written to each, so the same comment is edited (never a second one) and an
# unchanged render costs no request, also after a restart or a redelivery.
GITHUB_CHAIN_PREFIX = ROOT_PREFIX + "github:chain:"
# String per chain while one writer creates its comment or Check Run (SET NX, owner token):
# two replicas or flushes never create two; a crashed holder's claim ends with its TTL,
# which is longer than a search and a create take (each request times out after 20 s)
# and short enough that a restarted operator is not kept waiting long.
GITHUB_CLAIM_PREFIX = ROOT_PREFIX + "github:claim:"
GITHUB_CLAIM_TTL_SECONDS = 30
# String per job: JSON scope of its GitHub token (uid, installation, repository,
# permissions), fixed at launch from the AiAgent; a refresh mints this and nothing wider.
GITHUB_JOB_SCOPE_PREFIX = ROOT_PREFIX + "github:job-scope:"
# List per job: its installation tokens, sealed (AES-GCM under an operator sub-key) with
# their expiry, kept only to revoke them when the job ends.
GITHUB_JOB_TOKENS_PREFIX = ROOT_PREFIX + "github:job-tokens:"
# Installation tokens live one hour; the records outlive them a day at most, like job tokens.
GITHUB_JOB_TTL_SECONDS = JOB_TOKEN_MAX_TTL_SECONDS

# --- dashboard sessions ------------------------------------------------------
# Hash per sha256(session id): the admin token's digest (HMAC under the operator key), the
# CSRF token and the login time. Redis never holds a session id itself, nor a token.
DASHBOARD_SESSION_PREFIX = ROOT_PREFIX + "ui:session:"
# Eight hours from login (a working day), not extended by use; logout deletes it at once.
DASHBOARD_SESSION_TTL_SECONDS = 8 * 3600

# --- comment command answers on GitHub ---------------------------------------
# String per GitHub comment id (SET NX) once its /agentchain command was answered (reaction
# and/or reply), so a redelivery of the same comment never answers twice.  Kept as long as
# GitHub may redeliver (its deliveries can be redelivered for three days).
GITHUB_COMMAND_PREFIX = ROOT_PREFIX + "github:command:"
GITHUB_COMMAND_TTL_SECONDS = DELIVERY_TTL_SECONDS
# String per GitHub comment id (SET NX) once its /agentchain command was applied, so a
# comment acts at most once: a replayed delivery, or the same comment delivered again under
# a new delivery id or with another body, finds it claimed.  Kept as long as a delivery's
# own record (three days), past which GitHub no longer redelivers.
GITHUB_COMMAND_APPLIED_PREFIX = ROOT_PREFIX + "github:applied:"
GITHUB_COMMAND_APPLIED_TTL_SECONDS = DELIVERY_TTL_SECONDS

# --- follow-up rounds on a chain's pull request (github/roundrecords.py) ------------------
# String per pull request (<repo, lower case>#<n>, SET NX), sealed: the namespace and chain
# that opened it; the first chain keeps it.  Kept as long as the chain's records.
GITHUB_PULL_CHAIN_PREFIX = ROOT_PREFIX + "github:pull-chain:"
# Hash per pull request and agent (<repo>#<n>:<agent>): delivery id -> its round's number.
GITHUB_PULL_ROUNDS_PREFIX = ROOT_PREFIX + "github:pull-rounds:"


# --- traces (traces/) ---------------------------------------------------------------------
# String per span (SET NX, trace id and span id in hex) once the span was put in the outbox,
# so a hop replayed after a crash never records its span twice.  Kept a week: a span is
# recorded when what it describes has ended, and no replay comes later than that.
TRACE_SPAN_PREFIX = ROOT_PREFIX + "trace:span:"
TRACE_SPAN_TTL_SECONDS = 7 * 24 * 3600
# List: the spans recorded and not yet exported (JSON), oldest first; the leader's exporter
# drains it.  Durable, so a SIGKILL loses no span between its hop and its export.
TRACE_OUTBOX = ROOT_PREFIX + "trace:outbox"
# At most this many spans wait: past it the oldest are dropped (a collector down for long
# must not fill Redis); the exporter logs how many.
TRACE_OUTBOX_MAX = 100_000
# List: the batch an exporter took out of the outbox and is sending; removed once the
# collector accepted it, else sent again by whichever exporter holds the lease next.
TRACE_SENDING = ROOT_PREFIX + "trace:sending"
# String: the exporter that may send (its process's random id), so two never send at
# once.  Renewed at every batch; longer than one export may take (the OTLP exporter gives
# up after its timeout, 10 s by default), so it lapses only when its holder is gone.
TRACE_EXPORTER = ROOT_PREFIX + "trace:exporter"
TRACE_EXPORTER_LEASE_MS = 20_000


def encode(component: str) -> str:
    """Percent-encode the characters that could make two component tuples collide."""
    return component.replace("%", "%25").replace(":", "%3A")


def _join(prefix: str, *components: str) -> str:
    return prefix + ":".join(encode(c) for c in components)


def _uid(uid: str) -> str:
    """The uid component of a record about one object: never empty, so that a caller
    that lost the uid fails loudly instead of sharing one record between incarnations."""
    if not uid:
        raise ValueError("a record of one AgentJob run needs the AgentJob's uid")
    return uid


def context_entry(tenant: str, namespace: str, key: str) -> str:
    return _join(CONTEXT_ENTRY_PREFIX, tenant, namespace, key)


def context_recent(tenant: str, namespace: str) -> str:
    return _join(CONTEXT_RECENT_PREFIX, tenant, namespace)


def context_lex(tenant: str, namespace: str) -> str:
    return _join(CONTEXT_LEX_PREFIX, tenant, namespace)


def context_expiry(tenant: str, namespace: str) -> str:
    return _join(CONTEXT_EXPIRY_PREFIX, tenant, namespace)


def context_tally(tenant: str) -> str:
    return _join(CONTEXT_TALLY_PREFIX, tenant)


def context_sizes(tenant: str) -> str:
    return _join(CONTEXT_SIZES_PREFIX, tenant)


def output(tenant: str, job_name: str, uid: str) -> str:
    return _join(OUTPUT_PREFIX, tenant, job_name, _uid(uid))


def answer(tenant: str, job_name: str, uid: str) -> str:
    return _join(ANSWER_PREFIX, tenant, job_name, _uid(uid))


def chain_meta(tenant: str, chain_id: str) -> str:
    return _join(CHAIN_META_PREFIX, tenant, chain_id)


def chain_workspace(tenant: str, chain_id: str) -> str:
    return _join(CHAIN_WORKSPACE_PREFIX, tenant, chain_id)


def workspace_release(tenant: str) -> str:
    return _join(WORKSPACE_RELEASE_PREFIX, tenant)


def workspace_pulls(tenant: str) -> str:
    return _join(WORKSPACE_PULLS_PREFIX, tenant)


def chain_hops(tenant: str, chain_id: str) -> str:
    return _join(CHAIN_HOPS_PREFIX, tenant, chain_id)


def chain_hop_ids(tenant: str, chain_id: str) -> str:
    return _join(CHAIN_HOP_IDS_PREFIX, tenant, chain_id)


def chain_learnings(tenant: str, chain_id: str) -> str:
    return _join(CHAIN_LEARNINGS_PREFIX, tenant, chain_id)


def job_token(token_sha256_hex: str) -> str:
    return _join(JOB_TOKEN_PREFIX, token_sha256_hex)


def legacy_job_token_by_job(tenant: str, job_name: str) -> str:
    return _join(LEGACY_JOB_TOKEN_BY_JOB_PREFIX, tenant, job_name)


def delivery(delivery_id: str) -> str:
    return _join(DELIVERY_PREFIX, delivery_id)


def delivery_body(body_sha256_hex: str) -> str:
    return _join(DELIVERY_BODY_PREFIX, body_sha256_hex)


def webhook_queue(namespace: str) -> str:
    return _join(WEBHOOK_QUEUE_PREFIX, namespace)


def webhook_queue_body(namespace: str) -> str:
    return _join(WEBHOOK_QUEUE_BODY_PREFIX, namespace)


def job_anchor(tenant: str, job_name: str, uid: str) -> str:
    return _join(JOB_ANCHOR_PREFIX, tenant, job_name, _uid(uid))


def team_anchor(tenant: str, chain_id: str) -> str:
    return _join(TEAM_ANCHOR_PREFIX, tenant, chain_id)


def chain_stop(tenant: str, chain_id: str) -> str:
    return _join(CHAIN_STOP_PREFIX, tenant, chain_id)


def flow_holders(tenant: str, group: str) -> str:
    return _join(FLOW_HOLDERS_PREFIX, tenant, group)


def flow_queue(tenant: str, group: str) -> str:
    return _join(FLOW_QUEUE_PREFIX, tenant, group)


def flow_jobs(tenant: str, group: str) -> str:
    return _join(FLOW_JOBS_PREFIX, tenant, group)


def flow_chain_group(tenant: str, chain_id: str) -> str:
    return _join(FLOW_CHAIN_GROUP_PREFIX, tenant, chain_id)


def flow_groups(tenant: str) -> str:
    return _join(FLOW_GROUPS_PREFIX, tenant)


def flow_usage(tenant: str, chain_id: str) -> str:
    return _join(FLOW_USAGE_PREFIX, tenant, chain_id)


def flow_attempts(tenant: str, chain_id: str) -> str:
    return _join(FLOW_ATTEMPTS_PREFIX, tenant, chain_id)


def flow_agent_attempts(tenant: str, chain_id: str, agent: str) -> str:
    return _join(FLOW_AGENT_ATTEMPTS_PREFIX, tenant, chain_id, agent)


def github_chain(tenant: str, chain_id: str) -> str:
    return _join(GITHUB_CHAIN_PREFIX, tenant, chain_id)


def github_claim(tenant: str, chain_id: str) -> str:
    return _join(GITHUB_CLAIM_PREFIX, tenant, chain_id)


def github_job_scope(tenant: str, job_name: str) -> str:
    return _join(GITHUB_JOB_SCOPE_PREFIX, tenant, job_name)


def github_job_tokens(tenant: str, job_name: str) -> str:
    return _join(GITHUB_JOB_TOKENS_PREFIX, tenant, job_name)


def dashboard_session(session_sha256_hex: str) -> str:
    return _join(DASHBOARD_SESSION_PREFIX, session_sha256_hex)


def github_command(comment_id: int) -> str:
    return _join(GITHUB_COMMAND_PREFIX, str(comment_id))


def github_command_applied(comment_id: int) -> str:
    return _join(GITHUB_COMMAND_APPLIED_PREFIX, str(comment_id))


def trace_span(trace_id_hex: str, span_id_hex: str) -> str:
    return _join(TRACE_SPAN_PREFIX, trace_id_hex, span_id_hex)
