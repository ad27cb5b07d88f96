"""Signed deliveries to both HA replicas, with redeliveries and a leader kill (issue 20).

The second scenario of ``python -m e2e.chaos_ha`` (``deliveries``), and of
``e2e/test_ha.py`` in reduced form: signed ``issues.opened`` deliveries go to both
replicas at once from a thread pool, a share of them sent twice (to the other replica:
a redelivery), and the leader is SIGKILLed in the middle.  A delivery whose POST got no
answer (the killed replica) is sent again to the survivor, as GitHub's redelivery would.
Every delivery id must end with exactly one AgentJob, and no AgentJob may exist for
anything else.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import kubernetes

from e2e import chaos, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.replicating import leader, replicas

Obj = dict[str, Any]


@dataclass
class DeliveryReport:
    deliveries: int
    redeliveries: int = 0
    resent: int = 0
    agentjobs: int = 0
    answers: Counter[int] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"deliveries: {self.deliveries}, redeliveries: {self.redeliveries},"
            f" resent after the kill: {self.resent}",
            f"answers: {dict(sorted(self.answers.items()))}",
            f"agentjobs: {self.agentjobs}",
            f"problems: {len(self.problems)}",
        ]
        return "\n".join(lines + [f"  - {p}" for p in self.problems[:50]])


def delivery_agent() -> Obj:
    """One agent for ``issues.opened``, done at once: what is counted is AgentJobs, and a
    thousand Python starts would only slow the two-core machine down."""
    return {
        "apiVersion": f"{chaos.GROUP}/{chaos.VERSION}",
        "kind": "AiAgent",
        "metadata": {"name": "ha-intake"},
        "spec": {
            "triggerName": "ha-intake",
            "eventTriggers": [{"source": "github", "events": ["issues.opened"]}],
            "command": ["echo", "intake done"],
        },
    }


def run_deliveries(
    info: ClusterInfo, namespace: str, *, deliveries: int, share: float, seed: int
) -> DeliveryReport:
    """Deliveries to both replicas at once, ``share`` of them twice, a leader kill midway."""
    rng = random.Random(seed)
    report = DeliveryReport(deliveries)
    loader = kubernetes.config.new_client_from_config
    api: kubernetes.client.ApiClient = loader(config_file=str(info.kubeconfig))  # type: ignore[no-untyped-call]
    with api, replicas(info, namespace) as ops:
        kc = chaos._Cluster(api, namespace)
        kc.create("aiagents", delivery_agent())
        _wait_listed(ops, namespace)
        secret = ops[0].webhook_secret
        sends = _plan(secret, deliveries, share, rng)
        report.redeliveries = len(sends) - deliveries
        unanswered = _send_all(ops, sends, report, kill_at=len(sends) // 2)
        survivor = leader(ops)
        for body, headers, _ in unanswered:  # GitHub's redelivery, to whoever answers.
            status, _answer = delivering.post(survivor.url, body, headers)
            report.answers[status] += 1
            report.resent += 1
        _count_deliveries(kc, sends, report)
    return report


def _wait_listed(ops: list[operating.OperatorProcess], namespace: str) -> None:
    """Until each replica's webhook lists the agent (a stranger's issue names it refused)."""
    for op in ops:

        def listed(op: operating.OperatorProcess = op) -> bool:
            probe = delivering.issue_opened(number=9000, association="NONE")
            status, answer = delivering.send(op, *delivering.signed(op.webhook_secret, probe))
            ignored = answer.get("ignored") or []
            return status in (200, 202) and any(i["namespace"] == namespace for i in ignored)

        operating.wait_until(listed, timeout=60, interval=0.5, what=f"{op.name} to list agents")


def _plan(
    secret: str, deliveries: int, share: float, rng: random.Random
) -> list[tuple[bytes, dict[str, str], int]]:
    """(body, headers, replica index) per send; a redelivery goes to the other replica."""
    sends = []
    for n in range(deliveries):
        body, headers = delivering.signed(secret, delivering.issue_opened(number=n + 1))
        first = rng.randrange(2)
        sends.append((body, headers, first))
        if rng.random() < share:
            sends.append((body, headers, 1 - first))
    rng.shuffle(sends)
    return sends


def _send_all(
    ops: list[operating.OperatorProcess],
    sends: list[tuple[bytes, dict[str, str], int]],
    report: DeliveryReport,
    kill_at: int,
) -> list[tuple[bytes, dict[str, str], int]]:
    """Send everything (8 at once); SIGKILL the leader after ``kill_at`` sends were
    submitted.  What got no answer is returned, for resending."""
    urls = [op.url for op in ops]
    unanswered = []

    def one(item: tuple[bytes, dict[str, str], int]) -> tuple[int, bool]:
        body, headers, index = item
        try:
            return delivering.post(urls[index], body, headers, timeout=60)[0], True
        except OSError:
            return 0, False

    killed: operating.OperatorProcess | None = None
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = []
        for i, item in enumerate(sends):
            if i == kill_at:
                killed = leader(ops)
                killed.kill()
            futures.append((item, pool.submit(one, item)))
        for item, future in futures:
            status, answered = future.result()
            if answered:
                report.answers[status] += 1
            if not answered or status >= 500:
                unanswered.append(item)
    if killed is not None:
        # As a crashed pod's replacement would: back only after the other one leads
        # (restarted at once under its own name, it would take its own lease back).
        other = next(op for op in ops if op is not killed)
        operating.wait_until(lambda: other.role() == "leader", timeout=60, what="a failover")
        killed.start(lead=False)
    return unanswered


def _count_deliveries(
    kc: chaos._Cluster, sends: list[tuple[bytes, dict[str, str], int]], report: DeliveryReport
) -> None:
    wanted = {headers["X-GitHub-Delivery"] for _, headers, _ in sends}
    per: Counter[str] = Counter()

    def settled() -> bool:
        jobs = kc.agentjobs()
        per.clear()
        per.update(str(((j.get("spec") or {}).get("event") or {}).get("deliveryId")) for j in jobs)
        return set(per) >= wanted

    try:
        operating.wait_until(settled, timeout=300, interval=1.0, what="a job per delivery")
    except AssertionError as exc:
        report.problems.append(str(exc)[:300])
    time.sleep(2 * chaos.RESYNC_SECONDS + 1)
    settled()
    report.agentjobs = sum(per.values())
    missing = wanted - set(per)
    extra = set(per) - wanted
    twice = [d for d, n in per.items() if n > 1]
    if missing:
        report.problems.append(f"{len(missing)} deliveries made no job, e.g. {sorted(missing)[:3]}")
    if extra:
        report.problems.append(f"{len(extra)} jobs for no delivery, e.g. {sorted(extra)[:3]}")
    if twice:
        report.problems.append(f"{len(twice)} deliveries made more than one job: {twice[:3]}")
