"""What the local node reports to the API server: the Node object and pod statuses.

Kept pure (state in, JSON out) so that the process-running code only mutates small
records and then sends whatever `pod_status` renders. Each status write carries the whole
`status` as a JSON merge patch; lists are therefore replaced, never merged, and the API
server always sees one consistent picture of the pod, as the kubelet's status manager does.
"""

from __future__ import annotations

import datetime as dt
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from e2e.controlplane.localnode_env import NODE_IP

RUNTIME = "local"
KUBELET_VERSION = "v1.34.0-agentchain-local"


def now() -> str:
    """RFC 3339 in UTC, second precision, as Kubernetes timestamps are."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerRun:
    """Observed state of one container; `state` is waiting, running or terminated."""

    name: str
    image: str
    state: str = "waiting"
    reason: str = "ContainerCreating"
    message: str = ""
    pid: int | None = None
    exit_code: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    restart_count: int = 0
    last_state: dict[str, Any] = field(default_factory=dict)

    def start(self, pid: int) -> None:
        self.state, self.pid, self.started_at = "running", pid, now()
        self.reason, self.message, self.exit_code, self.finished_at = "", "", None, None

    def finish(self, exit_code: int, reason: str = "", message: str = "") -> None:
        self.state, self.exit_code, self.finished_at = "terminated", exit_code, now()
        self.reason = reason or ("Completed" if exit_code == 0 else "Error")
        self.message = message
        self.started_at = self.started_at or self.finished_at

    def wait(self, reason: str, message: str = "") -> None:
        self.state, self.reason, self.message = "waiting", reason, message

    def restart(self) -> None:
        """Keep the ended run as `lastState` before starting again, like the kubelet."""
        self.last_state = {"terminated": self._terminated()}
        self.restart_count += 1
        self.wait("ContainerCreating")

    @property
    def container_id(self) -> str:
        return f"{RUNTIME}://{self.pid}" if self.pid is not None else ""

    @property
    def succeeded(self) -> bool:
        return self.state == "terminated" and self.exit_code == 0

    def _terminated(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
        }
        if self.message:
            body["message"] = self.message
        if self.container_id:
            body["containerID"] = self.container_id
        return body

    def status(self) -> dict[str, Any]:
        """This container's entry in `containerStatuses`."""
        if self.state == "running":
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        elif self.state == "terminated":
            state = {"terminated": self._terminated()}
        else:
            waiting = {"reason": self.reason, **({"message": self.message} if self.message else {})}
            state = {"waiting": waiting}
        body: dict[str, Any] = {
            "name": self.name,
            "state": state,
            "lastState": self.last_state,
            "ready": self.state == "running",
            "started": self.state == "running",
            "restartCount": self.restart_count,
            "image": self.image or "local",
            "imageID": f"{RUNTIME}://{self.image or 'none'}",
        }
        if self.container_id:
            body["containerID"] = self.container_id
        return body


@dataclass
class PodRun:
    """Observed state of one pod on this node."""

    init: list[ContainerRun]
    main: list[ContainerRun]
    start_time: str = field(default_factory=now)
    phase: str = "Pending"
    reason: str = ""
    message: str = ""

    @property
    def initialized(self) -> bool:
        return all(c.succeeded for c in self.init)

    @property
    def all_running(self) -> bool:
        return bool(self.main) and all(c.state == "running" for c in self.main)


def _condition(kind: str, ok: bool, reason: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"type": kind, "status": "True" if ok else "False"}
    body["lastTransitionTime"] = now()
    body["lastProbeTime"] = None
    if reason and not ok:
        body["reason"] = reason
    return body


def _conditions(run: PodRun) -> list[dict[str, Any]]:
    ended = run.phase in ("Succeeded", "Failed")
    not_ready = "PodCompleted" if ended else "ContainersNotReady"
    return [
        _condition("PodReadyToStartContainers", not ended),
        _condition("PodScheduled", True),
        _condition("Initialized", run.initialized, "ContainersNotInitialized"),
        _condition("ContainersReady", run.all_running and not ended, not_ready),
        _condition("Ready", run.all_running and not ended, not_ready),
    ]


def pod_status(run: PodRun) -> dict[str, Any]:
    """The full pod `status` for a merge patch on the `pods/status` subresource."""
    status: dict[str, Any] = {
        "phase": run.phase,
        "conditions": _conditions(run),
        "hostIP": NODE_IP,
        "hostIPs": [{"ip": NODE_IP}],
        "podIP": NODE_IP,
        "podIPs": [{"ip": NODE_IP}],
        "startTime": run.start_time,
        "containerStatuses": [c.status() for c in run.main],
        "qosClass": "BestEffort",
    }
    if run.init:
        status["initContainerStatuses"] = [c.status() for c in run.init]
    # Clearing with None removes a reason left by an earlier write (merge-patch semantics).
    status["reason"] = run.reason or None
    status["message"] = run.message or None
    return status


def decide_phase(run: PodRun, restart_policy: str) -> str:
    """Pod phase from its containers, following the kubelet's `getPhase` rules."""
    if any(c.state == "terminated" and not c.succeeded for c in run.init):
        return "Failed" if restart_policy == "Never" else "Pending"
    if not run.initialized:
        return "Pending"
    if not all(c.state == "terminated" for c in run.main):
        # A container waiting to be restarted has run before: the pod is still Running.
        started = any(c.state != "waiting" or c.restart_count > 0 for c in run.main)
        return "Running" if started else "Pending"
    return "Succeeded" if all(c.succeeded for c in run.main) else "Failed"


def node_body(name: str, port: int, ready_since: str) -> dict[str, Any]:
    """The Node this process registers; also used, status only, as the heartbeat."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    beat = now()

    def condition(kind: str, ok: str, reason: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": ok,
            "reason": reason,
            "message": f"local node: {reason}",
            "lastHeartbeatTime": beat,
            "lastTransitionTime": ready_since,
        }

    pressures: Sequence[tuple[str, str]] = (
        ("MemoryPressure", "KubeletHasSufficientMemory"),
        ("DiskPressure", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "KubeletHasSufficientPID"),
    )
    conditions = [condition(kind, "False", reason) for kind, reason in pressures]
    conditions.append(condition("Ready", "True", "KubeletReady"))
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch,
        "agentchain.labrats.work/local-node": "true",
    }
    node_info = {
        "machineID": name,
        "systemUUID": name,
        "bootID": ready_since,
        "kernelVersion": platform.release(),
        "osImage": "agentchain local node (processes, images ignored)",
        "containerRuntimeVersion": f"{RUNTIME}://0.1.0",
        "kubeletVersion": KUBELET_VERSION,
        "kubeProxyVersion": KUBELET_VERSION,
        "operatingSystem": "linux",
        "architecture": arch,
    }
    status = {
        "capacity": resources,
        "allocatable": resources,
        "addresses": [
            {"type": "InternalIP", "address": NODE_IP},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "conditions": conditions,
        "nodeInfo": node_info,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": status,
    }
