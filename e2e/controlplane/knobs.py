"""Opt-in settings of the local control plane for the benchmarks (bench/README.md).

Unset, the cluster starts exactly as it always has; the e2e suite never sets them.

* ``AGENTCHAIN_E2E_AUDIT_LOG=1``: the API server writes its audit log (Metadata level,
  one JSON line per request, no request bodies) to ``<workdir>/audit.log``, so a bench
  can count the requests each identity made.
* ``AGENTCHAIN_E2E_KUBE_API_QPS`` / ``AGENTCHAIN_E2E_KUBE_API_BURST``: the
  controller-manager's client rate limit. Its default (20 QPS, burst 30) throttles the
  Job controller long before the operator is busy when 100 chains run at once.
"""

from __future__ import annotations

import os
from pathlib import Path

AUDIT_LOG_ENV = "AGENTCHAIN_E2E_AUDIT_LOG"
AUDIT_LOG_NAME = "audit.log"
KUBE_API_QPS_ENV = "AGENTCHAIN_E2E_KUBE_API_QPS"
KUBE_API_BURST_ENV = "AGENTCHAIN_E2E_KUBE_API_BURST"
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""


def audit_flags(workdir: Path) -> list[str]:
    """kube-apiserver flags for the audit log, if the environment asks for it."""
    if os.environ.get(AUDIT_LOG_ENV) != "1":
        return []
    policy = workdir / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    # A large maxsize: no rotation, a bench reads one file.
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={workdir / AUDIT_LOG_NAME}",
        "--audit-log-maxsize=100000",
    ]


def client_rate_flags() -> list[str]:
    """kube-controller-manager flags for its client rate limit, if set."""
    flags = []
    for env, flag in (
        (KUBE_API_QPS_ENV, "--kube-api-qps"),
        (KUBE_API_BURST_ENV, "--kube-api-burst"),
    ):
        if os.environ.get(env):
            flags.append(f"{flag}={int(os.environ[env])}")
    return flags
