"""Webhook delivery to agent container started, against a bare Job to container started.

The figure: a signed ``issues.opened`` delivery POSTed to the operator's webhook (as
GitHub sends it, ``e2e/delivering.py``) until the agent's container runs its first
command. The agent's command prints ``started-at $(date +%s.%N)`` first thing; the
container shares this machine's kernel clock, so that stamp and the bench's
``time.time()`` before the POST are on one clock, to the microsecond. The container's
``state.running.startedAt`` says the same thing a few milliseconds earlier (runc's
start, before the shell), but in whole seconds (RFC 3339 without fractions), too coarse
for a figure of one to two seconds; and a container this short often goes from waiting
to terminated between two of the kubelet's looks, so the running state may never be
written at all.

The baseline, in the same run on the same node and image: the bench creates a batch Job
with the same container (admin, one request) and times it the same way, so the ratio is
what agentchain adds on top of Kubernetes' own path (Job controller, scheduler, kubelet,
sandbox, container): the webhook's checks and queue, the AgentJob's create, the
engine's reaction and its batch Job, token Secret and status writes. Deliveries and bare
Jobs alternate, one at a time, after one warm-up each, so the machine's load weighs on
both alike.

A third side, in the same turns: the bare Job whose pod takes a Secret as the operator's
do (``harness.with_secret``: the bench creates the Secret, then the Job). The product
gives every job a Secret (its token, and the prompt as a file), and the node's cost of
that Secret is most of the gap to the bare Job; the rows against this side, without
targets, say what the operator adds beyond it.

Each run is split where the pod appears (its first event on a pod watch the bench holds
open, ``arrivals``): up to the pod is the control path (agentchain's part, then the Job
controller's), after it the node's (sandbox, volumes, container). Their p50s are rows of
their own, without targets, to say which side the gap is on.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from e2e import chaining, delivering, operating

from bench.harness import create_floor_job, percentile, with_secret
from bench.table import Row, emit

GROUP, VERSION = "labrats.work", "v1alpha1"
AGENTJOB_LABEL = f"{GROUP}/agentjob"
START_LABEL = "bench.labrats.work/start"
AGENT = "dl-start"
STARTED = re.compile(r"^started-at (\d+(?:\.\d+)?)$", re.MULTILINE)
# Kubernetes' own path (the baseline) is about one second on the real node: a sandbox,
# the bridge plugin, runc, the shell. The operator's part is a few API writes, which
# should cost well under half of that at the median; the tail carries the machine's
# noise on top of the operator's, hence more room there.
TARGET_P50_RATIO = 1.5
TARGET_P95_RATIO = 2.0
TIMEOUT_SECONDS = 120.0
NAME = "webhook delivery -> agent container started"

Obj = dict[str, Any]


def start_command() -> list[str]:
    """The agent: its first (and only) act is to print the time it started."""
    return ["sh", "-c", 'echo "started-at $(date +%s.%N)"']


def started_at(log: str) -> float:
    """The ``started-at`` stamp a container printed; ValueError when it printed none."""
    match = STARTED.search(log)
    if match is None:
        raise ValueError(f"no started-at line in the container's log: {log[:200]!r}")
    return float(match.group(1))


def agent() -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AiAgent",
        "metadata": {"name": AGENT},
        "spec": {
            "triggerName": AGENT,
            "eventTriggers": [{"source": "github", "events": ["issues.opened"]}],
            "command": start_command(),
        },
    }


def bare_job(name: str, image: str) -> Obj:
    return chaining.bare_job(name, image, start_command(), {START_LABEL: name})


@dataclass
class Starts:
    delivered: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    # Each run's share up to its pod's first watch event (the rest is the node's).
    delivered_to_pod: list[float] = field(default_factory=list)
    bare_to_pod: list[float] = field(default_factory=list)
    # The bare Job whose pod takes a Secret (the Secret's create first, then the Job's).
    secret: list[float] = field(default_factory=list)
    secret_to_pod: list[float] = field(default_factory=list)


class Arrivals(Protocol):
    """When each pod's first watch event reached the bench (``time.time()``), by name."""

    seen: dict[str, float]


def _wait(check: Callable[[], Any], what: str) -> Any:
    return operating.wait_until(check, timeout=TIMEOUT_SECONDS, interval=0.1, what=what)


class StartBench:
    """Deliveries to ``op`` and bare Jobs in ``namespace``, timed to the container's start."""

    def __init__(
        self, core: Any, batch: Any, custom: Any, namespace: str, op: operating.OperatorProcess,
        image: str, arrivals: Arrivals,
    ) -> None:  # fmt: skip
        self.core, self.batch, self.custom = core, batch, custom
        self.namespace, self.op, self.image = namespace, op, image
        self.arrivals = arrivals
        self.issue = 0

    def prepare(self) -> None:
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "aiagents", agent()
        )

        # The webhook matches against its AiAgent listing, up to 2 s old: until it lists
        # this one, a stranger's issue (refused, not run) says so.
        def listed() -> bool:
            probe = delivering.issue_opened(number=900000, association="NONE")
            status, answer = delivering.send(
                self.op, *delivering.signed(self.op.webhook_secret, probe)
            )
            ignored = answer.get("ignored") or []
            return status in (200, 202) and any(i["namespace"] == self.namespace for i in ignored)

        _wait(listed, "the webhook to list the start agent")

    def delivered(self) -> tuple[float, float]:
        """Delivery to the container's start, and to its pod's appearing."""
        self.issue += 1
        body, headers = delivering.signed(
            self.op.webhook_secret, delivering.issue_opened(number=self.issue)
        )
        sent = time.time()
        status, answer = delivering.send(self.op, body, headers)
        jobs = [j for j in answer.get("jobs") or [] if j["namespace"] == self.namespace]
        if status not in (200, 202) or len(jobs) != 1:
            raise RuntimeError(f"the delivery was not one job here: {status} {answer}")
        return self._started(f"{AGENTJOB_LABEL}={jobs[0]['name']}", sent)

    def bare(self, name: str) -> tuple[float, float]:
        """A bare Job's create to its container's start, and to its pod's appearing."""
        sent = time.time()
        self.batch.create_namespaced_job(self.namespace, bare_job(name, self.image))
        return self._started(f"{START_LABEL}={name}", sent)

    def bare_with_secret(self, name: str) -> tuple[float, float]:
        """The same with a Secret of its own, created first, as the operator does."""
        job = with_secret(bare_job(name, self.image), name)
        sent = time.time()
        create_floor_job(self.core, self.batch, self.namespace, job)
        return self._started(f"{START_LABEL}={name}", sent)

    def _started(self, selector: str, sent: float) -> tuple[float, float]:
        pod = _wait(lambda: self._ended(selector), f"the ended pod {selector}")
        log = self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace)
        appeared = self.arrivals.seen[pod.metadata.name]
        return started_at(str(log)) - sent, appeared - sent

    def _ended(self, selector: str) -> Any:
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        for pod in pods:
            statuses = pod.status.container_statuses or []
            if any(cs.state and cs.state.terminated for cs in statuses):
                return pod
        return None


def measure(bench: StartBench, runs: int, say: Callable[[str], None]) -> Starts:
    """One warm-up each, then ``runs`` of each side, in turns."""
    bench.prepare()
    bench.delivered()
    bench.bare("start-warm-up")
    bench.bare_with_secret("start-secret-warm-up")
    starts = Starts()
    for i in range(runs):
        total, to_pod = bench.delivered()
        starts.delivered.append(total)
        starts.delivered_to_pod.append(to_pod)
        bare_total, bare_to_pod = bench.bare(f"start-{i:03d}")
        starts.bare.append(bare_total)
        starts.bare_to_pod.append(bare_to_pod)
        secret_total, secret_to_pod = bench.bare_with_secret(f"start-secret-{i:03d}")
        starts.secret.append(secret_total)
        starts.secret_to_pod.append(secret_to_pod)
        say(
            f"start {i + 1}/{runs}: delivery {total * 1e3:.0f}ms (pod at {to_pod * 1e3:.0f}) "
            f"bare Job {bare_total * 1e3:.0f}ms (pod at {bare_to_pod * 1e3:.0f}) "
            f"with a Secret {secret_total * 1e3:.0f}ms (pod at {secret_to_pod * 1e3:.0f})"
        )
    return starts


def _row(
    name: str, values: list[float], baseline: list[float], q: float, note: str,
    target: float | None = None,
) -> Row:  # fmt: skip
    """A row of ``values``' percentile ``q`` against ``baseline``'s, in milliseconds."""
    return Row(
        name,
        percentile(values, q) * 1e3,
        "ms",
        baseline=percentile(baseline, q) * 1e3,
        target=target,
        note=note,
    )


def _node_path(totals: list[float], to_pod: list[float]) -> list[float]:
    """Each run's share after its pod appeared: total less the part up to the pod."""
    return [t - p for t, p in zip(totals, to_pod, strict=True)]


def rows(starts: Starts) -> list[Row]:
    """The p50 and p95 rows, each against the bare Jobs' same percentile; then, without
    targets, each run split where its pod appeared, and the same against the Job with a
    Secret."""
    made = [
        _row(
            f"{NAME} p{round(q * 100)}", starts.delivered, starts.bare, q,
            "signed delivery POSTed -> the container's first output; baseline: a batch Job "
            f"created -> the same container's; {len(starts.delivered)} each",
            target,
        )
        for q, target in ((0.5, TARGET_P50_RATIO), (0.95, TARGET_P95_RATIO))
    ]  # fmt: skip
    node = _node_path(starts.delivered, starts.delivered_to_pod) if starts.delivered_to_pod else []
    if node:
        made.append(
            _row(
                f"{NAME}: to the pod, p50", starts.delivered_to_pod, starts.bare_to_pod, 0.5,
                "the control path: delivery (baseline: the Job's create) -> the pod's first "
                "watch event",
            )
        )  # fmt: skip
        made.append(
            _row(
                f"{NAME}: pod to started, p50", node,
                _node_path(starts.bare, starts.bare_to_pod), 0.5,
                "the node's path: the pod's first watch event -> the container's first output "
                "(the operator's pods take a Secret, the bare Job's none)",
            )
        )  # fmt: skip
    if starts.secret:
        made += [
            _row(
                f"{NAME}, against a Job with a Secret, p{round(q * 100)}", starts.delivered,
                starts.secret, q,
                "baseline: a Secret and a batch Job created -> the container's first output, "
                "its pod taking the Secret as the operator's do",
            )
            for q in (0.5, 0.95)
        ]  # fmt: skip
    if starts.secret_to_pod and node:
        made.append(
            _row(
                f"{NAME}: pod to started, against a Job with a Secret, p50", node,
                _node_path(starts.secret, starts.secret_to_pod), 0.5,
                "the node's path, both pods taking a Secret",
            )
        )  # fmt: skip
    return made


def report(starts: Starts) -> None:
    for row in rows(starts):
        emit(row)
