"""Running the operator for end-to-end tests (and the demo) as a user would.

The operator is a subprocess (``python -m agentchain run``) so a test can
SIGKILL it at any instant and start it again.  It authenticates with a token
of its own ServiceAccount, bound to the chart's rules
(``charts/agentchain/files/rbac-rules.yaml``, cluster-wide; ``test_rbac_namespaced.py``
runs one under the chart's per-namespace Roles), never with the admin
certificate: a missing permission fails the suite exactly as it would in a
production cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from agentchain.faults import CRASHPOINT_ENV
from e2e.controlplane import processes
from e2e.controlplane.cluster import ClusterInfo

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_NAMESPACE = "agentchain-system"
SERVICE_ACCOUNT = "agentchain-operator"
AGENT_WAIT_SECONDS = 10
"""How long the e2e operators let a job wait for its AiAgent (AGENTCHAIN_AGENT_WAIT_SECONDS)."""
RULES_FILE = ROOT / "charts" / "agentchain" / "files" / "rbac-rules.yaml"
# The operator key of every operator the harness runs (and of in-process apps, see
# webharness.py): one key, so any of them opens what another queued. Not a secret: the
# harness's cluster and Redis live on loopback for one session.
OPERATOR_KEY = "e2e-operator-key-loopback-only"
T = TypeVar("T")


def rbac_rules(namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """The chart's rules for an operator serving ``namespaces`` (empty: every one)."""
    groups = yaml.safe_load(RULES_FILE.read_text())
    rules: list[dict[str, Any]] = groups["namespaced"]
    return rules if namespaces else rules + groups["clusterWide"]


def lease_rules() -> list[dict[str, Any]]:
    """The chart's rules for the leader-election Lease (a Role in the operator's namespace)."""
    rules: list[dict[str, Any]] = yaml.safe_load(RULES_FILE.read_text())["leaderElection"]
    return rules


def rbac_manifests() -> list[dict[str, object]]:
    rules = rbac_rules(())
    lease_role = {"name": "agentchain-leader-election", "namespace": SYSTEM_NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": SYSTEM_NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "agentchain-operator"},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "agentchain-operator"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "agentchain-operator",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": SYSTEM_NAMESPACE}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": lease_role,
            "rules": lease_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": lease_role,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": lease_role["name"],
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": SYSTEM_NAMESPACE}
            ],
        },
    ]


def install(info: ClusterInfo) -> None:
    """CRDs and the operator's RBAC, applied with the admin kubeconfig."""
    info.kubectl("apply", "--server-side", "-f", str(ROOT / "crds"))
    wait_established(info)
    docs = "\n---\n".join(yaml.safe_dump(m) for m in rbac_manifests())
    info.kubectl("apply", "-f", "-", input=docs)


CRD_NAMES = ("crd/agentjobs.labrats.work", "crd/aiagents.labrats.work")


def wait_established(info: ClusterInfo, timeout: float = 60.0) -> None:
    """Until the CRDs are ``Established``. Not ``kubectl wait --for=condition=...``: on a
    CRD the API server has not given a status yet, kubectl 1.34 fails at once
    (".status.conditions accessor error") instead of waiting; a busy machine hit it."""

    def established() -> bool:
        for name in CRD_NAMES:
            status = get_json(info, name).get("status") or {}
            conditions = status.get("conditions") or []
            if not any(
                c.get("type") == "Established" and c.get("status") == "True" for c in conditions
            ):
                return False
        return True

    wait_until(established, timeout=timeout, what="the CRDs established")


def operator_kubeconfig(
    info: ClusterInfo,
    path: Path,
    account: str = SERVICE_ACCOUNT,
    namespace: str = SYSTEM_NAMESPACE,
) -> Path:
    """A kubeconfig holding only the ServiceAccount ``namespace/account``'s token."""
    token = info.kubectl(
        "create", "token", account, "-n", namespace, "--duration=24h"
    ).stdout.strip()
    admin = yaml.safe_load(info.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "e2e", "user": SERVICE_ACCOUNT}}],
        "current-context": "operator",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@dataclass
class OperatorProcess:
    """One operator; ``start`` after ``kill`` is a restart with the same identity."""

    info: ClusterInfo
    kubeconfig: Path
    port: int = field(default_factory=processes.free_port)
    # The internal listener: /metrics, /readyz, the dashboard (never the public port's).
    internal_port: int = field(default_factory=processes.free_port)
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    webhook_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    operator_key: str = OPERATOR_KEY
    extra_env: dict[str, str] = field(default_factory=dict)
    # Log files are ``logs/<name>-<start>.log``; a second operator in the same
    # session needs its own name so the two never write to one file.
    name: str = "operator"
    # The leader-election Lease (in SYSTEM_NAMESPACE); empty: one of its own, named after
    # ``name``. Replicas of one HA test share one. The process's identity in it is
    # ``name``, so a restart after ``kill`` takes its lease back at once, as a restarted
    # container (same pod name) does in a cluster.
    lease: str = ""
    # Where it listens and what AGENT_API_URL says; empty: the cluster's ``pod_host``
    # (loopback, or on the real node the bridge address, the only one of this machine
    # that pods reach).
    host: str = ""
    starts: int = 0
    process: processes.ManagedProcess | None = None

    def __post_init__(self) -> None:
        self.host = self.host or self.info.pod_host

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def internal_url(self) -> str:
        return f"http://{self.host}:{self.internal_port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        env.update(
            {
                "KUBECONFIG": str(self.kubeconfig),
                "AGENTCHAIN_REDIS_URL": self.info.redis_url,
                "AGENTCHAIN_LISTEN_HOST": self.host,
                "AGENTCHAIN_LISTEN_PORT": str(self.port),
                "AGENTCHAIN_INTERNAL_PORT": str(self.internal_port),
                "AGENTCHAIN_API_URL": self.url,
                "AGENTCHAIN_ADMIN_TOKENS": self.admin_token,
                "AGENTCHAIN_WEBHOOK_SECRETS": self.webhook_secret,
                "AGENTCHAIN_OPERATOR_KEY": self.operator_key,
                "AGENTCHAIN_RESYNC_SECONDS": "3",
                # A job naming no AiAgent waits this long for one (default 60): long
                # enough for a test to apply the agent after the job, short enough for
                # the tests of a job that never gets one.
                "AGENTCHAIN_AGENT_WAIT_SECONDS": str(AGENT_WAIT_SECONDS),
                # No Service routes here: a stop needs no drain (the rolling-update test
                # asks for one).
                "AGENTCHAIN_SHUTDOWN_DRAIN_SECONDS": "0",
                "AGENTCHAIN_DEFAULT_COMMAND": "agentchain,demo-agent",
                "AGENTCHAIN_LEADER_ELECTION_NAMESPACE": SYSTEM_NAMESPACE,
                "AGENTCHAIN_LEADER_ELECTION_NAME": self.lease or f"agentchain-{self.name}",
                "AGENTCHAIN_LEADER_ELECTION_IDENTITY": self.name,
                "PYTHONUNBUFFERED": "1",
            }
        )
        if self.info.agent_image:
            # An agent that names no image, and a workspace's containers, run in the
            # session's agent image (images/e2e-agent on the real node).
            env["AGENTCHAIN_DEFAULT_IMAGE"] = self.info.agent_image
            env["AGENTCHAIN_WORKSPACE_IMAGE"] = self.info.agent_image
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 60, *, lead: bool = True) -> None:
        """Start and wait until it serves; with ``lead``, also until it runs the engine
        (a second replica of a shared Lease passes ``lead=False``: it follows)."""
        self.starts += 1
        argv = [sys.executable, "-m", "agentchain", "run"]
        name = f"{self.name}-{self.starts}"
        self.process = processes.start(name, argv, self.info.workdir, env=self.env())
        processes.wait_for(
            self._healthy, what="agentchain operator", timeout=timeout, watch=[self.process]
        )
        if lead:
            processes.wait_for(
                lambda: self.role() == "leader",
                what=f"{self.name} to lead",
                timeout=timeout,
                watch=[self.process],
            )

    def role(self) -> str | None:
        """``leader`` or ``follower`` as its ``/readyz`` says; None if it does not answer."""
        try:
            try:
                # Generous: a leader busy with a thousand jobs still answers, only later.
                url = f"{self.internal_url}/readyz"
                with urllib.request.urlopen(url, timeout=15) as resp:
                    body = json.load(resp)
            except urllib.error.HTTPError as exc:  # 503: not ready, but it says its role.
                body = json.load(exc)
        except (urllib.error.URLError, OSError, ValueError):
            return None
        role = body.get("role") if isinstance(body, dict) else None
        return str(role) if role else None

    def _healthy(self) -> bool:
        try:
            # The internal listener starts after the public one: its answer means both are up.
            with urllib.request.urlopen(f"{self.internal_url}/healthz", timeout=1) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def kill(self) -> None:
        """SIGKILL, as a crashing node or OOM would: no cleanup runs."""
        if self.process is not None:
            os.killpg(self.process.pid, 9)
            self.process.popen.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def crash_at(self, crashpoint: str, begin: Callable[[], None], *, timeout: float) -> int:
        """Restart armed to die at ``crashpoint``, call ``begin`` (what leads there),
        and return the exit code once the operator died.

        The operator stays down on a normal return, so the caller can look at what
        the crash left before a fresh operator races to repair it; the caller
        restarts it.  On a failure it is restarted here: the next test needs one.
        """
        saved = dict(self.extra_env)
        self.kill()
        self.extra_env = {**saved, CRASHPOINT_ENV: crashpoint}
        returned = False
        try:
            self.start()
            begin()
            process = self.process
            assert process is not None
            wait_until(
                lambda: process.popen.poll() is not None,
                timeout=timeout,
                what=f"the operator to die at the {crashpoint} crashpoint",
            )
            code = int(process.popen.returncode)
            returned = True
            return code
        finally:
            self.extra_env = saved
            if self.process is not None and self.process.alive():
                self.kill()  # It never reached the crashpoint: the wait above failed.
            self.process = None
            if not returned:
                self.start()

    def log_text(self) -> str:
        logs = sorted((self.info.workdir / "logs").glob(f"{self.name}-*.log"))
        return "\n".join(p.read_text(errors="replace") for p in logs)


@contextlib.contextmanager
def running(
    info: ClusterInfo, extra_env: dict[str, str] | None = None, host: str = ""
) -> Iterator[OperatorProcess]:
    """CRDs, RBAC and a started operator under its own ServiceAccount; stopped on exit.

    Stopping it here, inside the cluster's own context, means the operator goes before
    Redis and the API server it talks to, so its last log lines are its own shutdown
    rather than a burst of connection errors.
    """
    install(info)
    kubeconfig = operator_kubeconfig(info, info.workdir / "operator.kubeconfig")
    op = OperatorProcess(info, kubeconfig, extra_env=dict(extra_env or {}), host=host)
    op.start()
    try:
        yield op
    finally:
        op.stop()


def wait_until(
    check: Callable[..., T], *, timeout: float, interval: float = 0.25, what: str = ""
) -> T:
    """Poll a zero-argument callable until it returns truthy; that answer. (``...``: a
    lambda binding a loop variable as a default argument is called with none too.)"""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        last = found = check()
        if found:
            return found
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


def stays(
    check: Callable[[], object], *, seconds: float, what: str, interval: float = 0.25
) -> None:
    """Poll a zero-argument callable for the whole of ``seconds``; fail at its first false
    answer (or the AssertionError it raises).

    The guard for "nothing happens within X": a fixed sleep before one look would see a
    forbidden change only at the end of the window, and not at all if it came and went.
    Polling the whole window fails as soon as the change shows and reads as the intent.
    A check made of ``assert`` statements must end with ``return True``: a forgotten
    return fails at once rather than passing in silence.
    """
    started = time.monotonic()
    deadline = started + seconds
    while True:
        last = check()
        if not last:
            elapsed = time.monotonic() - started
            raise AssertionError(f"{what} stopped holding after {elapsed:.1f}s: {last!r}")
        if time.monotonic() >= deadline:
            return
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def get_json(info: ClusterInfo, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(info.kubectl("get", *args, "-o", "json").stdout)
    return result
