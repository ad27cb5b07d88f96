"""Operator-wide settings, read once from the environment.

Every knob has a default that works on the local control plane, so the demo
and tests need no configuration; the Helm chart sets the same variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


def _list(name: str) -> tuple[str, ...]:
    raw = os.environ.get(name, "")
    return tuple(part.strip() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class Settings:
    redis_url: str = "redis://127.0.0.1:6379/0"
    # Namespaces to watch; empty means cluster-wide.
    namespaces: tuple[str, ...] = ()
    default_image: str = "ghcr.io/labrats-work/agentchain:latest"
    default_command: tuple[str, ...] = ("agentchain", "demo-agent")
    default_timeout_seconds: int = 3600
    max_chain_jobs: int = 10
    # Resync timer: finds AgentJobs whose Job ended while the operator was down.
    resync_seconds: int = 30
    # URL agents use to reach the job API (env AGENT_API_URL in their pods).
    api_url: str = "http://agentchain.agentchain-system.svc:8080"
    listen_host: str = "0.0.0.0"
    listen_port: int = 8080
    webhook_secrets: tuple[str, ...] = ()
    admin_tokens: tuple[str, ...] = ()
    webhook_max_bytes: int = 25 * 1024 * 1024
    # Bytes of webhook bodies read at once, before their signature is checked; past it
    # a delivery is refused with 503 + Retry-After (never below webhook_max_bytes).
    webhook_inflight_bytes: int = 64 * 1024 * 1024
    # Seconds a webhook body has to arrive in full once its headers did (408 after).
    webhook_read_timeout_seconds: float = 10.0
    # Port of the internal listener (same host): /metrics, /healthz, /readyz, dashboard.
    internal_port: int = 8081
    job_token_ttl_seconds: int = 24 * 3600
    extra_labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            redis_url=os.environ.get("AGENTCHAIN_REDIS_URL", cls.redis_url),
            namespaces=_list("AGENTCHAIN_NAMESPACES"),
            default_image=os.environ.get("AGENTCHAIN_DEFAULT_IMAGE", cls.default_image),
            default_command=_list("AGENTCHAIN_DEFAULT_COMMAND") or cls.default_command,
            default_timeout_seconds=_int("AGENTCHAIN_DEFAULT_TIMEOUT", cls.default_timeout_seconds),
            max_chain_jobs=_int("AGENTCHAIN_MAX_CHAIN_JOBS", cls.max_chain_jobs),
            resync_seconds=_int("AGENTCHAIN_RESYNC_SECONDS", cls.resync_seconds),
            api_url=os.environ.get("AGENTCHAIN_API_URL", cls.api_url),
            listen_host=os.environ.get("AGENTCHAIN_LISTEN_HOST", cls.listen_host),
            listen_port=_int("AGENTCHAIN_LISTEN_PORT", cls.listen_port),
            webhook_secrets=_secrets("AGENTCHAIN_WEBHOOK_SECRETS"),
            admin_tokens=_secrets("AGENTCHAIN_ADMIN_TOKENS"),
            webhook_max_bytes=_int("AGENTCHAIN_WEBHOOK_MAX_BYTES", cls.webhook_max_bytes),
            webhook_inflight_bytes=_int(
                "AGENTCHAIN_WEBHOOK_INFLIGHT_BYTES", cls.webhook_inflight_bytes
            ),
            webhook_read_timeout_seconds=_float(
                "AGENTCHAIN_WEBHOOK_READ_TIMEOUT", cls.webhook_read_timeout_seconds
            ),
            internal_port=_int("AGENTCHAIN_INTERNAL_PORT", cls.internal_port),
            job_token_ttl_seconds=_int("AGENTCHAIN_JOB_TOKEN_TTL", cls.job_token_ttl_seconds),
        )


def _secrets(name: str) -> tuple[str, ...]:
    """Secrets come from a file (a mounted Secret) or, for local runs, the variable.

    A file keeps them out of ``/proc/<pid>/environ`` and lets a rotated Secret be
    picked up on restart; one secret per line, so two can be live during rotation.
    """
    path = os.environ.get(f"{name}_FILE")
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            return tuple(line.strip() for line in fh if line.strip())
    return _list(name)
