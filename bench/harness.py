"""What the control-plane benches share: identities, the audit log, /proc samples.

* :func:`identity` gives a bench's floor controller a ServiceAccount of its own, so the
  API server's audit log tells its requests from the operator's and from the bench's
  own (admin) bookkeeping.
* :class:`Audit` reads the audit log that ``AGENTCHAIN_E2E_AUDIT_LOG=1`` turns on
  (e2e/controlplane/knobs.py) and counts requests by user in a time window. A watch
  counts once, when it starts (stage ``ResponseStarted``), not per event it carries;
  every other request counts at ``ResponseComplete``.
* :class:`ProcSample` reads a process's RSS, peak RSS and CPU time from ``/proc``;
  :func:`platform_cpu` the CPU time of every component of a local control plane and
  its real node.
* :func:`with_secret`, :func:`create_floor_job`: a floor's Job whose pod takes a Secret
  as the operator's pods take theirs, so a floor can pay what a Secret costs the node.
* :func:`percentile`: the nearest-rank percentile the latency rows report.
"""

from __future__ import annotations

import collections
import datetime
import json
import math
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml
from e2e.controlplane import knobs
from e2e.controlplane.cluster import ClusterInfo
from kubernetes.client.exceptions import ApiException

OPERATOR_USER = "system:serviceaccount:agentchain-system:agentchain-operator"
FLOOR_NAMESPACE = "agentchain-bench"
# Settings the benches pin, because the e2e harness's own differ from the product's
# (it resyncs every 3 s so tests see repairs quickly; the product default is 30 s).
OPERATOR_ENV = {"AGENTCHAIN_RESYNC_SECONDS": "30"}


def identity(info: ClusterInfo, name: str, rules: list[dict[str, Any]], path: Path) -> str:
    """A ServiceAccount ``name`` with ``rules`` cluster-wide; its kubeconfig at ``path``.

    Returns the user name the audit log records for it.
    """
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLOOR_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": FLOOR_NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": FLOOR_NAMESPACE}],
        },
    ]
    info.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(d) for d in docs))
    token = info.kubectl(
        "create", "token", name, "-n", FLOOR_NAMESPACE, "--duration=24h"
    ).stdout.strip()
    admin = yaml.safe_load(info.kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": "bench", "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return f"system:serviceaccount:{FLOOR_NAMESPACE}:{name}"


def with_secret(job: dict[str, Any], secret: str) -> dict[str, Any]:
    """``job`` (a batch Job of one container), its pod taking Secret ``secret`` as the
    operator's pods take theirs (one key as a read-only file, two as ``secretKeyRef``
    variables: ``hop/rules/jobspec``)."""
    pod_spec = job["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    container["env"] = [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
        for name, key in (("AGENT_PROMPT", "prompt"), ("AGENT_TOKEN", "token"))
    ]
    container["volumeMounts"] = [{"name": "prompt", "mountPath": "/prompt", "readOnly": True}]
    items = [{"key": "prompt", "path": "prompt"}]
    volume = {"secretName": secret, "items": items, "defaultMode": 0o444}
    pod_spec["volumes"] = [{"name": "prompt", "secret": volume}]
    return job


def floor_secret(name: str) -> dict[str, Any]:
    """A floor job's Secret: a prompt and a token, as the operator writes for each job."""
    data = {"prompt": "bench", "token": secrets.token_urlsafe(32)}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data}


def create_floor_job(core: Any, batch: Any, namespace: str, job: dict[str, Any]) -> None:
    """The job's Secret first (when its pod takes one), then the Job, each at most once:
    ``AlreadyExists`` is a later event for the same pod, or this bench's own create."""
    volumes = job["spec"]["template"]["spec"].get("volumes") or []
    creates = [(core.create_namespaced_secret, floor_secret(v["secret"]["secretName"]))
               for v in volumes] + [(batch.create_namespaced_job, job)]  # fmt: skip
    for create, body in creates:
        try:
            create(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise


def audit_enabled() -> None:
    """Turn the audit log on for clusters this process starts from now on."""
    os.environ[knobs.AUDIT_LOG_ENV] = "1"


def _when(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Request:
    user: str
    verb: str
    resource: str  # resource[/subresource], with the API group for non-core kinds
    name: str
    uri: str
    at: float  # when the API server received it, time.time() scale

    @property
    def kind(self) -> str:
        return f"{self.verb} {self.resource}"


class Audit:
    """The audit log of one local control plane."""

    def __init__(self, info: ClusterInfo) -> None:
        self.path = info.workdir / knobs.AUDIT_LOG_NAME
        if not self.path.exists():
            raise RuntimeError(f"no audit log at {self.path}: set {knobs.AUDIT_LOG_ENV}=1")

    def requests(self, start: float, end: float, users: set[str] | None = None) -> list[Request]:
        return [
            r for r in self._all() if start <= r.at <= end and (users is None or r.user in users)
        ]

    def _all(self) -> Iterator[Request]:
        with self.path.open() as log:
            yield from _complete_lines(log)

    def follow(self) -> Iterator[list[Request]]:
        """Each ``next()`` gives the requests logged since the previous one."""
        with self.path.open() as log:
            while True:
                yield list(_complete_lines(log))


def _complete_lines(log: TextIO) -> Iterator[Request]:
    while True:
        mark = log.tell()
        line = log.readline()
        if not line.endswith("\n"):
            log.seek(mark)  # The end, or a line still being written: read it next time.
            return
        request = _request(json.loads(line))
        if request is not None:
            yield request


def _request(event: dict[str, Any]) -> Request | None:
    watch = event.get("verb") == "watch"
    if event.get("stage") != ("ResponseStarted" if watch else "ResponseComplete"):
        return None
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "-")
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    if ref.get("apiGroup"):
        resource += "." + ref["apiGroup"]
    return Request(
        user=event["user"]["username"],
        verb=event.get("verb", "-"),
        resource=resource,
        name=ref.get("name", ""),
        uri=event.get("requestURI", ""),
        at=_when(event["requestReceivedTimestamp"]),
    )


def by_kind(requests: list[Request]) -> dict[str, int]:
    """Request counts by ``verb resource``, most frequent first."""
    return dict(collections.Counter(r.kind for r in requests).most_common())


def breakdown(title: str, requests: list[Request], per: float = 1.0) -> str:
    lines = [f"{title}: {len(requests) / per:.1f}"]
    lines += [f"    {n / per:7.2f}  {kind}" for kind, n in by_kind(requests).items()]
    return "\n".join(lines)


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least ``q`` (0 < q <= 1) of the sample at
    or below it; always one of the values (20 samples: p50 the 10th, p95 the 19th)."""
    if not values:
        raise ValueError("a percentile of no values")
    if not 0 < q <= 1:
        raise ValueError(f"q must be in (0, 1], not {q}")
    ordered = sorted(values)
    # Rounded first: 0.7 * 10 is 7.000000000000001 in floating point, not rank 8.
    rank = math.ceil(round(q * len(ordered), 9))
    return ordered[max(1, rank) - 1]


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcSample:
    """One look at a process: resident set now and at its peak (MiB), CPU seconds."""

    rss_mib: float
    peak_mib: float
    cpu_seconds: float

    @classmethod
    def of(cls, pid: int) -> ProcSample:
        fields: dict[str, float] = {}
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
        stat = Path(f"/proc/{pid}/stat").read_text()
        # Fields after the command name (which may hold spaces): utime, stime are 14, 15.
        after = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(after[11]) + int(after[12])) / CLOCK_TICKS
        return cls(fields["VmRSS"], fields["VmHWM"], cpu)


def _program(argv: list[str]) -> str:
    """A component's name: its binary, or the module or script a Python process runs."""
    if not Path(argv[0]).name.startswith("python"):
        return Path(argv[0]).name
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1].rsplit(".", 1)[-1]
    scripts = [a for a in argv[1:] if not a.startswith("-")]
    return Path(scripts[0]).stem if scripts else "python"


def platform_cpu(workdir: Path) -> dict[str, float]:
    """CPU seconds so far of every process whose command line names ``workdir`` (the
    local control plane's: etcd, kube-apiserver, the controller-manager, the scheduler,
    the provisioner; the real node's: kubelet, containerd, kube-proxy, CoreDNS,
    kube-router, and each pod's ``containerd-shim-runc-v2``, whose ``-address`` is the
    socket in the workdir), by component; a process's reaped children count with it
    (runc and the containers' processes with their shim, the CNI plugins with
    containerd). A shim that exited (its pod deleted) takes its share with it."""
    found: dict[str, float] = collections.defaultdict(float)
    needle = str(workdir).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if needle not in cmdline:
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # Gone meanwhile.
        argv = [a.decode(errors="replace") for a in cmdline.split(b"\0") if a]
        after = stat[stat.rindex(")") + 2 :].split()
        # utime, stime, cutime, cstime: fields 14-17.
        found[_program(argv)] += sum(int(t) for t in after[11:15]) / CLOCK_TICKS
    return dict(found)
