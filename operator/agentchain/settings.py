"""Operator-wide settings: one pydantic-settings model, the single source of every knob.

Each field is read from ``AGENTCHAIN_<FIELD>`` in the environment and can be given as
``agentchain run --<field>`` on the command line (the flag wins).  The flags, their
``--help`` lines and ``docs/configuration.md`` are all generated from this model
(:func:`add_arguments`, :func:`reference`), and a test fails when the page drifts, so
there is no second list of settings to keep in step.

Every field has a default that works on the local control plane, so the demo and tests
need no configuration; the Helm chart sets the same variables.

Secrets (webhook secrets, admin tokens, operator keys; the Redis password) may come
from a file (``AGENTCHAIN_<NAME>_FILE``, one per line: a mounted Secret keeps them out of
the pod spec and ``/proc/<pid>/environ``) or, for local runs, from the variable itself.  They
have no command-line flag of their own, since a command line is visible to every user
of the machine; only the file's path is.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

ENV_PREFIX = "AGENTCHAIN_"
# Lists that hold secrets: read from ``<name>_file`` when it names a file, never a flag.
SECRET_LISTS = ("webhook_secrets", "admin_tokens", "operator_key")
# Single secrets: the file's first line (the whole line, commas included); never a flag.
SECRET_VALUES = ("redis_password",)
# Whole-file secrets (a PEM key spans lines): the file's text as it is; never a flag.
SECRET_FILES = ("github_private_key",)
SECRETS = SECRET_LISTS + SECRET_VALUES + SECRET_FILES


def _trace_url(value: Any) -> Any:
    """A trace viewer's URL template: http(s), naming ``{traceId}``; empty for none."""
    text = str(value or "").strip()
    if text and (not text.startswith(("http://", "https://")) or "{traceId}" not in text):
        raise ValueError("must be an http(s) URL containing {traceId}")
    return text


def _comma_list(value: Any) -> Any:
    # The environment and the command line give "a,b"; Python callers give a tuple.
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


CommaList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_comma_list)]


def _empty_none(value: Any) -> Any:
    # The chart sets every variable; an empty one means "not configured".
    return None if isinstance(value, str) and not value.strip() else value


OptionalInt = Annotated[int | None, BeforeValidator(_empty_none)]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")

    redis_url: str = Field(
        "redis://127.0.0.1:6379/0", description="Redis URL (store, tokens, delivery queue)."
    )
    redis_password: str = Field(
        "", description="Password of the Redis URL's user when the URL has none. Prefer _FILE."
    )
    redis_password_file: str | None = Field(
        None, description="File holding the Redis password (a mounted Secret)."
    )
    operator_key: CommaList = Field(
        (),
        description="Secret key(s) job tokens derive from and queued webhook jobs are sealed"
        " with; the first is current, more during a rotation. Required. Prefer _FILE.",
    )
    operator_key_file: str | None = Field(
        None, description="File holding the operator key(s), one per line (a mounted Secret)."
    )
    namespaces: CommaList = Field(
        (), description="Comma-separated namespaces to watch; empty means cluster-wide."
    )
    default_image: str = Field(
        "ghcr.io/labrats-work/agentchain:latest",
        description="Agent container image when an AiAgent names none.",
    )
    default_command: CommaList = Field(
        ("agentchain", "demo-agent"),
        description="Comma-separated agent command when an AiAgent names none.",
    )
    runtime_image_claude_code: str = Field(
        "ghcr.io/labrats-work/agentchain-claude-code:latest",
        description="Image of an AiAgent with runtime type claude-code that names no image:"
        " the runner (agentchain) and the claude CLI on PATH (docs/agents.md).",
    )
    runtime_image_codex: str = Field(
        "ghcr.io/labrats-work/agentchain-codex:latest",
        description="Image of an AiAgent with runtime type codex that names no image: the"
        " runner (agentchain) and the codex CLI on PATH.",
    )
    runtime_image_opencode: str = Field(
        "ghcr.io/labrats-work/agentchain-opencode:latest",
        description="Image of an AiAgent with runtime type opencode that names no image: the"
        " runner (agentchain) and the opencode CLI on PATH.",
    )
    runtime_image_gemini: str = Field(
        "ghcr.io/labrats-work/agentchain-gemini:latest",
        description="Image of an AiAgent with runtime type gemini that names no image: the"
        " runner (agentchain) and the gemini CLI (with its Node) on PATH.",
    )
    runtime_command: CommaList = Field(
        ("agentchain", "agent", "run"),
        description="Comma-separated command of a runtime's container (claude-code, codex,"
        " opencode, gemini): the in-pod runner.",
    )
    runtime_cli_path: str = Field(
        "",
        description="The agent CLI the runner starts (AGENTCHAIN_AGENT_CLI in runtime pods)."
        " Empty: claude or codex from the image's PATH.",
    )
    default_timeout_seconds: int = Field(
        3600, gt=0, description="Job activeDeadlineSeconds when an AiAgent sets no timeout."
    )
    max_chain_jobs: int = Field(10, gt=0, description="Most jobs in one chain (SPEC §2).")
    resync_seconds: int = Field(
        30, gt=0, description="Resync period: finds jobs whose end was missed while down."
    )
    schedule_tick_seconds: float = Field(
        5.0,
        gt=0,
        le=60,
        description="How often the leader looks for due schedule ticks: a scheduled run"
        " starts at most this late (docs/schedules.md).",
    )
    agent_wait_seconds: int = Field(
        60,
        ge=0,
        description="How long a job whose agentRole names no AiAgent waits for one (objects"
        " applied together arrive in any order) before it ends AgentNotFound; 0: at once.",
    )
    api_url: str = Field(
        "http://agentchain.agentchain-system.svc:8080",
        description="The job API's URL as agents reach it (AGENT_API_URL in their pods).",
    )
    listen_host: str = Field("0.0.0.0", description="Address the webhook and API listen on.")
    listen_port: int = Field(8080, ge=0, le=65535, description="Port of the webhook and API.")
    webhook_secrets: CommaList = Field(
        (), description="Webhook HMAC secrets (two during a rotation). Prefer the _FILE form."
    )
    webhook_secrets_file: str | None = Field(
        None, description="File holding the webhook secrets, one per line (a mounted Secret)."
    )
    admin_tokens: CommaList = Field(
        (), description="Admin Bearer tokens of the job API. Prefer the _FILE form."
    )
    admin_tokens_file: str | None = Field(
        None, description="File holding the admin tokens, one per line (a mounted Secret)."
    )
    webhook_max_bytes: int = Field(
        25 * 1024 * 1024, gt=0, description="Largest webhook body accepted (413 above it)."
    )
    webhook_inflight_bytes: int = Field(
        64 * 1024 * 1024,
        gt=0,
        description=(
            "Bytes of webhook bodies read at once before their signature is checked;"
            " past it 503 + Retry-After (never below webhook_max_bytes)."
        ),
    )
    webhook_read_timeout_seconds: float = Field(
        10.0, gt=0, description="Seconds a webhook body has to arrive in full (408 after)."
    )
    internal_port: int = Field(
        8081,
        ge=0,
        le=65535,
        description="Port of /metrics, /healthz, /readyz and the dashboard (never GitHub's).",
    )
    job_token_ttl_seconds: int = Field(
        24 * 3600, gt=0, description="Longest life of a job token, even if its job never ends."
    )
    store_quota_entries: int = Field(
        10_000, ge=0, description="Most store entries per Kubernetes namespace (0: none)."
    )
    store_quota_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Most store bytes per Kubernetes namespace (0: no limit).",
    )
    dashboard: bool = Field(
        True,
        description="Serve the dashboard under /ui/ on the internal port (login: an admin token).",
    )
    trace_url: Annotated[str, BeforeValidator(_trace_url)] = Field(
        "",
        description="Link the dashboard's job and chain pages to their chain's trace: an"
        " http(s) URL with {traceId}, e.g. https://jaeger.example/trace/{traceId}"
        " (traces: docs/observability.md); empty: no link.",
    )
    dashboard_cookie_secure: bool = Field(
        False,
        description="Mark the dashboard's session cookie Secure although the operator serves"
        " plain HTTP (a TLS-terminating proxy in front); over TLS it always is.",
    )

    github_app_id: OptionalInt = Field(
        None,
        gt=0,
        description="GitHub App id. With a private key, the operator writes chains back to"
        " GitHub and mints job tokens (docs/github.md); without, nothing is written back.",
    )
    github_private_key: str = Field(
        "", description="The GitHub App's private key (PEM). Prefer _FILE."
    )
    github_private_key_file: str | None = Field(
        None, description="File holding the GitHub App's private key (a mounted Secret)."
    )
    github_api_url: str = Field(
        "https://api.github.com",
        description="GitHub's REST API base URL (GitHub Enterprise Server:"
        " https://HOST/api/v3). Also GITHUB_API_URL in agent pods that get a token.",
    )
    github_dashboard_url: str = Field(
        "",
        description="The dashboard's URL as people reach it; chain comments link each job"
        " to <url>/ui/jobs/<namespace>/<name> (empty: no links).",
    )
    github_writeback_delay_seconds: float = Field(
        2.0,
        gt=0,
        description="Changes to one chain within this many seconds become one GitHub edit.",
    )
    github_check_name: str = Field(
        "agentchain", min_length=1, description="Name of the Check Run on pull requests."
    )
    github_app_slug: str = Field(
        "",
        pattern=r"^[A-Za-z0-9-]*$",
        description="The GitHub App's slug, which mention (@<slug>) and assignedToApp"
        " triggers look for; empty: asked of GitHub (GET /app) when an App is configured.",
    )
    leader_election: bool = Field(
        True,
        description="Run the engine only while holding the Lease (several replicas); false"
        " runs it unconditionally, for exactly one replica.",
    )
    leader_election_namespace: str = Field(
        "",
        description="Namespace of the leader-election Lease; empty: the pod's own (its"
        " service account's), else `default`.",
    )
    leader_election_name: str = Field("agentchain", description="Name of the Lease.")
    leader_election_identity: str = Field(
        "",
        description="This replica's name in the Lease; empty: `<hostname>_<pid>` (in a pod,"
        " the pod's name, so a restarted container takes its own lease back at once).",
    )
    leader_election_lease_seconds: float = Field(
        10.0, gt=0, description="A silent leader's lease lapses after this (failover time)."
    )
    leader_election_renew_deadline_seconds: float = Field(
        7.0,
        gt=0,
        description="A leader that has not renewed for this long stops (exits); below the"
        " lease duration.",
    )
    leader_election_retry_seconds: float = Field(
        2.0, gt=0, description="Period of renewals, and of a follower's attempts."
    )
    webhook_min_replicas: int = Field(
        0,
        ge=0,
        le=16,
        description="Redis replicas that must confirm a delivery's queued jobs (Redis WAIT)"
        " before the webhook answers 202; fewer within the timeout answers 503, so a"
        " delivery answered 202 survives a failover. 0: answer once the primary has it.",
    )
    webhook_replica_timeout_ms: int = Field(
        1000,
        ge=1,
        le=4000,
        description="How long the webhook waits for those replicas (milliseconds; within"
        " the 5 s a delivery's queueing may take).",
    )
    shutdown_drain_seconds: float = Field(
        5.0,
        ge=0,
        description="On SIGTERM, seconds the webhook and API keep serving (with /readyz"
        " answering 503) before the listeners close: the time a Service takes to stop"
        " routing to a terminating pod, so a rolling update refuses no delivery.",
    )
    workspace_image: str = Field(
        "ghcr.io/labrats-work/agentchain:latest",
        description="The operator's own image, run as the workspace-prepare, -report and"
        " -publish containers of workspace jobs (docs/workspaces.md).",
    )
    workspace_command: CommaList = Field(
        ("agentchain",),
        description="Comma-separated command of that image; `workspace prepare|report|publish`"
        " follow it.",
    )
    workspace_ca_configmap: str = Field(
        "",
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$",
        max_length=253,
        description="A ConfigMap in each namespace (e.g. kept there by trust-manager) whose"
        " key `ca.crt` holds the CA certificates (PEM) workspace git verifies the host"
        " against: for a host with a private CA (GitHub Enterprise Server, a company git"
        " server). It replaces the images' trust store for that git traffic. Empty: the"
        " images' own.",
    )
    github_git_url: str = Field(
        "https://github.com",
        description="Base URL a workspace's owner/name repository is cloned from"
        " (<url>/<owner>/<name>.git; GitHub Enterprise Server: https://HOST).",
    )
    max_workspaces_per_namespace: int = Field(
        20,
        ge=0,
        description="Most workspace volumes (one per chain) at once per namespace; a chain"
        " that would make one more fails its job with reason WorkspaceLimitReached (0: no"
        " limit).",
    )
    max_running_jobs_per_namespace: int = Field(
        0,
        ge=0,
        description=(
            "Most AgentJobs started (batch Job launched, not yet ended) at once per namespace;"
            " the others wait in phase Queued, first come first served (0: no limit)."
        ),
    )

    agent_egress: bool = Field(
        False,
        description="Keep a NetworkPolicy per AiAgent that lets its pods connect only to DNS,"
        " the job API, the model endpoint, GitHub and the git host and its spec.egress.allow"
        " (docs/agents.md, Egress); it takes effect where the network plugin enforces"
        " NetworkPolicy.",
    )
    agent_egress_operator_namespace: str = Field(
        "",
        description="Namespace of the operator's pods, which agents reach for the job API;"
        " empty: the namespace in api_url's host (<service>.<namespace>.svc).",
    )
    agent_egress_operator_pod_labels: CommaList = Field(
        (),
        description="Comma-separated key=value labels of the operator's pods; empty: every"
        " pod of that namespace (on the job API's port, listen_port).",
    )
    agent_egress_dns_namespace: str = Field(
        "kube-system",
        description="Namespace of the cluster's DNS pods (UDP and TCP 53); empty: port 53 to"
        " any address (a resolver that is not a pod, such as NodeLocal DNSCache).",
    )
    agent_egress_dns_pod_labels: CommaList = Field(
        ("k8s-app=kube-dns",),
        description="Comma-separated key=value labels of the cluster's DNS pods.",
    )
    agent_egress_external_except: CommaList = Field(
        (
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "100.64.0.0/10",
            "169.254.0.0/16",
            "127.0.0.0/8",
            "fc00::/7",
            "fe80::/10",
        ),
        description="Networks the external rule (GitHub, the git host, an external model"
        " endpoint: any address on the external ports) leaves out: private, link-local"
        " (cloud metadata) and loopback ranges; add the cluster's pod and service CIDRs when"
        " they are outside these.",
    )
    agent_egress_external_ports: Annotated[
        tuple[int, ...], NoDecode, BeforeValidator(_comma_list)
    ] = Field(
        (443,),
        description="Comma-separated TCP ports the external rule allows, besides the ports"
        " named in github_api_url, github_git_url and an AiAgent's runtime.baseUrl.",
    )

    @model_validator(mode="before")
    @classmethod
    def _read_secret_files(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        for name in SECRETS:
            path = data.get(f"{name}_file")
            if path and os.path.exists(path):
                with open(path, encoding="utf-8") as fh:
                    lines = tuple(line.strip() for line in fh if line.strip())
                data[name] = lines if name in SECRET_LISTS else next(iter(lines), "")
        for name in SECRET_FILES:
            path = data.get(f"{name}_file")
            if path and os.path.exists(path):
                with open(path, encoding="utf-8") as fh:
                    data[name] = fh.read()
        return data

    @property
    def github_enabled(self) -> bool:
        """Whether a GitHub App is configured: write-back and job tokens are on."""
        return self.github_app_id is not None and bool(self.github_private_key.strip())


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def _settable() -> Iterator[tuple[str, FieldInfo]]:
    yield from Settings.model_fields.items()


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _default_text(info: FieldInfo) -> str:
    default = info.get_default(call_default_factory=True)
    if isinstance(default, tuple):
        return ",".join(str(item) for item in default)
    if isinstance(default, bool):
        return str(default).lower()
    return "" if default is None else str(default)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting, with its variable and default in the help line.

    Flags default to "not given" so that only what the user typed overrides the
    environment; pydantic then validates flags and variables alike.
    """
    for field, info in _settable():
        if field in SECRETS:
            continue
        default = _default_text(info) or "none"
        parser.add_argument(
            _flag(field),
            dest=field,
            default=argparse.SUPPRESS,
            metavar="true|false" if info.annotation is bool else field.split("_")[-1].upper(),
            help=f"{info.description} [env {env_name(field)}; default: {default}]",
        )


def from_arguments(args: argparse.Namespace) -> Settings:
    """Settings from the environment, with every flag the user gave on top."""
    given = {field: value for field, value in vars(args).items() if field in Settings.model_fields}
    return Settings(**given)


def reference() -> str:
    """``docs/configuration.md``: every setting, its variable, flag and default."""
    lines = [
        "# Configuration",
        "",
        "<!-- Generated from operator/agentchain/settings.py by `python -m agentchain"
        " config-reference`; a test fails when it drifts. -->",
        "",
        "Every setting of the operator is an environment variable and a flag of"
        " `agentchain run` (the flag wins). The Helm chart sets the variables from its"
        " values. Secret lists have no flag: give a file (`…_FILE`, one per line, e.g. a"
        " mounted Secret) or, for local runs, the variable itself (comma-separated).",
        "",
        "| Variable | Flag | Default | Meaning |",
        "|---|---|---|---|",
    ]
    for field, info in _settable():
        flag = "—" if field in SECRETS else f"`{_flag(field)}`"
        default = _default_text(info)
        shown = f"`{default}`" if default else "—"
        lines.append(f"| `{env_name(field)}` | {flag} | {shown} | {info.description} |")
    return "\n".join(lines) + "\n"
