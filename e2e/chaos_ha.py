"""Two operator replicas; the leader SIGKILLed or frozen again and again (issue 20).

``python -m e2e.chaos_ha failover [--chains 20] [--failovers 30] [--seed 1]`` (or
``deliveries [--deliveries 1000]``) starts a private cluster as ``e2e.chaos`` does and two operator
processes (``e2e/replicating.py``), each under the operator's own ServiceAccount,
sharing one leader-election Lease; ``e2e/test_ha.py`` runs the same functions in
reduced form.

**Failover.**  While chains (triage → developer → reviewer, as ``chaos.py``) run, the
current leader is, at a seeded-random moment, SIGKILLed (a crash) or, every other
time, SIGSTOPped (a frozen node: the process keeps its sockets and wakes up later,
believing it still leads).  The run measures how long until the other replica reports
``leader`` on its ``/readyz``; a frozen leader is woken up (SIGCONT) only after that,
while the new leader is acting, and must exit by itself with status 1 (it lost the Lease) without
having written anything: the counts say so.  The stopped replica is then started
again, as the Deployment would, and follows.  At the end ``chaos._count`` checks exactly
once (every chain complete, three AgentJobs each, one batch Job and one pod per job, one
report printed per pod, every transition recorded, one ChainComplete Event per chain)
and the run prints the longest failover and the longest pause between a job's
container ending and its child's container starting.

**Deliveries** (``e2e/chaos_deliveries.py``): signed deliveries to both replicas at
once, a tenth of them redelivered, the leader SIGKILLed midway; one AgentJob per
delivery, none twice.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import kubernetes

from e2e import chaos, chaos_deliveries, operating, realnodes
from e2e.controlplane.cluster import ClusterInfo, finish_workdir, make_workdir, say
from e2e.replicating import leader, replicas

Obj = dict[str, Any]
# The replicas' own timing is the product default (10/7/2): the figures are the real ones.
FAILOVER_LIMIT_SECONDS = 15.0
PAUSE_LIMIT_SECONDS = 20.0
# A frozen leader, once woken, must notice and exit within this.
WAKE_EXIT_SECONDS = 15.0
MAX_DELAY_SECONDS = 3.0  # Random wait before each failover, after the previous one.
LOST_EXIT_CODE = 1  # replica.LOST_EXIT_CODE
# Crashes and freezes take turns, so even a short run has both.
MODES = ("kill", "stop")


@dataclass
class HaReport:
    chaos: chaos.ChaosReport
    failovers: list[tuple[str, float]] = field(default_factory=list)
    longest_pause: float = 0.0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds = Counter(kind for kind, _ in self.failovers)
        worst = max((s for _, s in self.failovers), default=0.0)
        lines = [
            self.chaos.summary(),
            f"failovers: {len(self.failovers)} ({kinds['kill']} SIGKILL, {kinds['stop']} SIGSTOP)",
            f"longest failover: {worst:.1f}s (limit {FAILOVER_LIMIT_SECONDS}s)",
            f"longest pause between a job's end and its child's start: {self.longest_pause:.0f}s"
            f" (limit {PAUSE_LIMIT_SECONDS}s)",
            f"ha problems: {len(self.problems)}",
        ]
        lines += [f"  - {p}" for p in self.problems[:50]]
        return "\n".join(lines)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.chaos.problems


def fail_over(ops: list[operating.OperatorProcess], mode: str, rng: random.Random) -> float:
    """Take the leader down (``kill`` or ``stop``); seconds until the other one leads."""
    old = leader(ops)
    new = next(op for op in ops if op is not old)
    assert old.process is not None
    pid = old.process.pid
    started = time.monotonic()
    if mode == "kill":
        old.kill()
    else:
        os.killpg(pid, signal.SIGSTOP)
    operating.wait_until(
        lambda: new.role() == "leader", timeout=60, interval=0.05, what=f"{new.name} to lead"
    )
    took = time.monotonic() - started
    if mode == "stop":
        _wake_and_expect_exit(old, rng)
    old.start(lead=False)
    return took


def _wake_and_expect_exit(old: operating.OperatorProcess, rng: random.Random) -> None:
    """SIGCONT a frozen old leader while the new one acts: it must exit on its own."""
    time.sleep(rng.uniform(0.0, 2.0))
    process = old.process
    assert process is not None
    os.killpg(process.pid, signal.SIGCONT)
    try:
        code = process.popen.wait(timeout=WAKE_EXIT_SECONDS)
    except Exception as exc:
        old.kill()
        raise AssertionError(f"{old.name} woke up and did not exit: {exc}") from exc
    old.process = None
    if code != LOST_EXIT_CODE:
        raise AssertionError(f"{old.name} woke up and exited {code}, not {LOST_EXIT_CODE}")


def run_failovers(
    info: ClusterInfo,
    namespace: str,
    *,
    chains: int,
    failovers: int,
    seed: int,
    timeout: float = 1800.0,
) -> HaReport:
    """``chains`` chains through ``failovers`` leader failures; counted, not asserted."""
    rng = random.Random(seed)
    sleeps = {agent: round(rng.uniform(1.0, 2.0), 2) for agent in chaos.AGENTS}
    report = HaReport(chaos.ChaosReport(chains=chains, kills=0, sleeps=sleeps))
    loader = kubernetes.config.new_client_from_config
    api: kubernetes.client.ApiClient = loader(config_file=str(info.kubeconfig))  # type: ignore[no-untyped-call]
    started = time.monotonic()
    deadline = started + timeout
    with api, replicas(info, namespace) as ops:
        kc = chaos._Cluster(api, namespace)
        for manifest in chaos.agent_manifests(sleeps):
            kc.create("aiagents", manifest)
        _failover_loop(ops, kc, rng, report, chains, failovers, deadline)
        chaos._wait_complete(kc, chains, deadline)
        report.chaos.seconds = round(time.monotonic() - started, 1)
        time.sleep(2 * chaos.RESYNC_SECONDS + 1)  # A late duplicate would show up now.
        chaos._count(kc, report.chaos)
        report.longest_pause = longest_pause(kc)
    report.chaos.kills = len(report.failovers)
    _judge(report, failovers)
    return report


def start_schedule(chains: int, failovers: int) -> list[int]:
    """How many chains have been started before each failover: evenly spread, so that
    each failover (about ten seconds, longer than a chain without one) meets a chain
    started just before it."""
    return [min(chains, math.ceil(chains * (k + 1) / failovers)) for k in range(failovers)]


def _failover_loop(
    ops: list[operating.OperatorProcess],
    kc: chaos._Cluster,
    rng: random.Random,
    report: HaReport,
    chains: int,
    failovers: int,
    deadline: float,
) -> None:
    started = 0
    for target in start_schedule(chains, failovers):
        if time.monotonic() > deadline:
            break
        if chaos.completed(kc.agentjobs()) >= started:
            if started == chains:
                break  # Nothing in flight and nothing left: a failover would prove nothing.
            target = max(target, started + 1)
        for i in range(started, target):
            kc.create("agentjobs", chaos.root_job(f"ha-{i:03d}"))
        started = target
        time.sleep(rng.uniform(0.0, MAX_DELAY_SECONDS))
        mode = MODES[len(report.failovers) % len(MODES)]
        try:
            report.failovers.append((mode, fail_over(ops, mode, rng)))
        except AssertionError as exc:
            report.problems.append(str(exc))
            for op in ops:
                if op.process is None:
                    op.start(lead=False)
    for i in range(started, chains):
        kc.create("agentjobs", chaos.root_job(f"ha-{i:03d}"))


def _judge(report: HaReport, failovers: int) -> None:
    if len(report.failovers) < failovers:
        report.problems.append(f"only {len(report.failovers)} of {failovers} failovers landed")
    for mode, seconds in report.failovers:
        if seconds >= FAILOVER_LIMIT_SECONDS:
            report.problems.append(f"a {mode} failover took {seconds:.1f}s")
    if report.longest_pause >= PAUSE_LIMIT_SECONDS:
        report.problems.append(f"a chain paused {report.longest_pause:.0f}s between two jobs")


def _container_times(pod: Any) -> tuple[float | None, float | None]:
    """(started, finished) of the agent container, from the pod's status (whole seconds)."""
    for status in pod.status.container_statuses or []:
        state = status.state
        if state.terminated is not None:
            return _seconds(state.terminated.started_at), _seconds(state.terminated.finished_at)
        if state.running is not None:
            return _seconds(state.running.started_at), None
    return None, None


def _seconds(value: Any) -> float | None:
    return float(value.timestamp()) if value is not None else None


def longest_pause(kc: chaos._Cluster) -> float:
    """The longest time between a job's container ending and its child's starting."""
    pods = kc.core.list_namespaced_pod(kc.namespace, label_selector=chaos.AGENTJOB_LABEL).items
    times = {p.metadata.labels[chaos.AGENTJOB_LABEL]: _container_times(p) for p in pods}
    worst = 0.0
    for job in kc.agentjobs():
        parent = (job.get("status") or {}).get("parentJobId")
        if not parent or parent not in times:
            continue
        ended, began = times[parent][1], times.get(job["metadata"]["name"], (None, None))[0]
        if ended is not None and began is not None:
            worst = max(worst, began - ended)
    return worst


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.chaos_ha", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="scenario", required=True)
    fail = sub.add_parser("failover", help="leader SIGKILL/SIGSTOP during running chains")
    fail.add_argument("--chains", type=int, default=20)
    fail.add_argument("--failovers", type=int, default=30)
    fail.add_argument("--timeout", type=float, default=1800.0)
    deliver = sub.add_parser("deliveries", help="deliveries to both replicas, a leader kill")
    deliver.add_argument("--deliveries", type=int, default=1000)
    deliver.add_argument("--redeliver", type=float, default=0.1)
    for p in (fail, deliver):
        p.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    workdir = make_workdir()
    ok = False
    try:
        with realnodes.cluster_with_agent_image(workdir) as info:
            operating.install(info)
            namespace = chaos._create_namespace(info)
            ok = _scenario(info, namespace, args)
    finally:
        finish_workdir(workdir, succeeded=ok)
    return 0 if ok else 1


def _scenario(info: ClusterInfo, namespace: str, args: argparse.Namespace) -> bool:
    if args.scenario == "failover":
        say(f"ha: {args.chains} chains, {args.failovers} failovers, seed {args.seed}")
        report = run_failovers(
            info,
            namespace,
            chains=args.chains,
            failovers=args.failovers,
            seed=args.seed,
            timeout=args.timeout,
        )
        print(report.summary(), flush=True)
        return report.ok
    say(f"ha: {args.deliveries} deliveries, {args.redeliver:.0%} redelivered, seed {args.seed}")
    delivered = chaos_deliveries.run_deliveries(
        info, namespace, deliveries=args.deliveries, share=args.redeliver, seed=args.seed
    )
    print(delivered.summary(), flush=True)
    return not delivered.problems


if __name__ == "__main__":
    raise SystemExit(main())
