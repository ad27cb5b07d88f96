"""A rolling update of the two HA replicas under a stream of deliveries (issue 20).

A Service is played by :class:`Endpoints`: like the endpoints controller and the proxies
behind it, it learns a pod's readiness only some time after it changes (here: it polls
each replica's ``/readyz`` once a second), and routes each delivery to a replica it last
saw ready.  The update is the chart's ``maxSurge: 1, maxUnavailable: 0`` done on two
processes: one replica is stopped with SIGTERM while the other serves, started again
(the new pod) and seen ready, then the same for the other one, leader or not.

Every delivery sent meanwhile must be answered 2xx (GitHub does not redeliver a refused
one by itself) and yield exactly its AgentJob; afterwards the job API answers on both
replicas, the follower as the leader.  Without the drain (``/readyz`` 503 while
the listeners stay open) a delivery routed in the second after the SIGTERM meets a
closed port.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

import kubernetes

from e2e import chaos, chaos_deliveries, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.replicating import leader, replicas

PROPAGATION_SECONDS = 1.0  # How late the "Service" learns of a readiness change.
SEND_INTERVAL_SECONDS = 0.12


@dataclass
class RollingReport:
    sent: int = 0
    answers: Counter[int] = field(default_factory=Counter)
    refused: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"deliveries sent: {self.sent}, answers: {dict(sorted(self.answers.items()))}",
            f"not answered: {len(self.refused)}",
            f"problems: {len(self.problems)}",
        ]
        return "\n".join(lines + [f"  - {p}" for p in (self.refused + self.problems)[:30]])


class Endpoints:
    """The replicas a Service would route to: the ones whose ``/readyz`` said 200 when
    it last looked, once every :data:`PROPAGATION_SECONDS`."""

    def __init__(self, ops: list[operating.OperatorProcess]) -> None:
        self.ops = ops
        self.ready: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Endpoints:
        self._look()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(PROPAGATION_SECONDS):
            self._look()

    def _look(self) -> None:
        self.ready = [op.url for op in self.ops if op.process is not None and _ready(op)]

    def has(self, op: operating.OperatorProcess) -> bool:
        return op.url in self.ready


def _ready(op: operating.OperatorProcess) -> bool:
    try:
        with urllib.request.urlopen(f"{op.internal_url}/readyz", timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def run_rolling(info: ClusterInfo, namespace: str, *, drain: float) -> RollingReport:
    """Roll both replicas while deliveries stream in; the report of what was answered."""
    report = RollingReport()
    loader = kubernetes.config.new_client_from_config
    api: kubernetes.client.ApiClient = loader(config_file=str(info.kubeconfig))  # type: ignore[no-untyped-call]
    env = {"AGENTCHAIN_SHUTDOWN_DRAIN_SECONDS": str(drain)}
    with api, replicas(info, namespace, extra_env=env) as ops:
        kc = chaos._Cluster(api, namespace)
        kc.create("aiagents", chaos_deliveries.delivery_agent())
        chaos_deliveries._wait_listed(ops, namespace)
        secret = ops[0].webhook_secret
        answered: list[str] = []
        with Endpoints(ops) as endpoints:
            done = threading.Event()
            sender = threading.Thread(
                target=_stream, args=(endpoints, secret, done, report, answered), daemon=True
            )
            sender.start()
            first = leader(ops)
            for op in [o for o in ops if o is not first] + [first]:  # The follower first.
                _replace(op, endpoints)
            done.set()
            sender.join()
        _count(kc, answered, report)
        _read_from_each(ops, kc, report)
    return report


def _read_from_each(
    ops: list[operating.OperatorProcess], kc: chaos._Cluster, report: RollingReport
) -> None:
    """The job API answers on the leader and on the follower alike."""
    jobs = kc.agentjobs()
    if not jobs:
        return
    name = jobs[0]["metadata"]["name"]
    for op in ops:
        url = f"{op.url}/api/jobs/{kc.namespace}/{name}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {op.admin_token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                body = json.load(resp)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            report.problems.append(f"the job API on {op.name} ({op.role()}): {exc}")
            continue
        if body.get("id") != name:
            report.problems.append(f"the job API on {op.name} answered {body!r:.200}")


def _replace(op: operating.OperatorProcess, endpoints: Endpoints) -> None:
    """SIGTERM one replica (returns once it exited), start its successor, and wait until
    the Service routes to it: only then may the next one go (``maxUnavailable: 0``)."""
    op.stop()
    op.start(lead=False)
    operating.wait_until(lambda: endpoints.has(op), timeout=30, what=f"{op.name} routed to")


def _stream(
    endpoints: Endpoints,
    secret: str,
    done: threading.Event,
    report: RollingReport,
    answered: list[str],
) -> None:
    n = 0
    while not done.is_set():
        urls = endpoints.ready
        if not urls:  # Never, with maxUnavailable 0: a problem of its own.
            report.problems.append("no replica was ready to route to")
            time.sleep(SEND_INTERVAL_SECONDS)
            continue
        url = urls[n % len(urls)]
        n += 1
        body, headers = delivering.signed(secret, delivering.issue_opened(number=10_000 + n))
        report.sent += 1
        try:
            status, _ = delivering.post(url, body, headers, timeout=30)
        except OSError as exc:
            report.refused.append(f"{url}: {type(exc).__name__}: {exc}"[:200])
        else:
            report.answers[status] += 1
            if status in (200, 202):
                answered.append(headers["X-GitHub-Delivery"])
            else:
                report.refused.append(f"{url}: HTTP {status}")
        time.sleep(SEND_INTERVAL_SECONDS)


def _count(kc: chaos._Cluster, answered: list[str], report: RollingReport) -> None:
    """Each answered delivery has exactly one AgentJob."""
    per: Counter[str] = Counter()

    def settled() -> bool:
        per.clear()
        per.update(
            str(((j.get("spec") or {}).get("event") or {}).get("deliveryId"))
            for j in kc.agentjobs()
        )
        return set(per) >= set(answered)

    try:
        operating.wait_until(settled, timeout=180, interval=1.0, what="a job per delivery")
    except AssertionError as exc:
        report.problems.append(str(exc)[:300])
    missing = set(answered) - set(per)
    twice = [d for d, k in per.items() if k > 1]
    if missing:
        report.problems.append(f"{len(missing)} answered deliveries made no job")
    if twice:
        report.problems.append(f"{len(twice)} deliveries made more than one job")
