"""Throughput: many three-agent chains at once, against the floor in the same run.

``python bench/bench_throughput.py [--chains 100] [--rounds 1] [--qps 200 --burst 400]``

``--chains`` chains are started at once (their roots created together), each of three
agents whose command is ``true``; a phase ends when all their jobs have ended. The
operator's phase (AgentJobs) and the floor's phase (the minimal controller of
bench_hop_latency.py, creating each next batch Job when a pod ends, under a
ServiceAccount of its own) take turns, ``--rounds`` times each. The figure is the jobs
that ran to their end per second of the phase (chains x 3 / time to drain); the target
is at least 0.8x the floor's. Each phase also reports the operator's (or the floor's)
CPU time over the phase's wall time, from ``/proc``: its share of one core; and what
the phase cost the rest of the machine, per job: the CPU time of the API server and
etcd, and of the Job controller, the scheduler and the real node (kubelet, containerd,
the containers' shims with the agents they reaped, kube-proxy, CoreDNS, kube-router:
``harness.platform_cpu``). Both sides' jobs run in the e2e agent image on the same real
node (``bench/node.py``). On two cores the platform's CPU is what the rate
is bounded by, so these rows say where a ratio below the target goes.

The control plane runs with the controller-manager's client at ``--qps`` /
``--burst`` (default 200/400; the controller-manager's own default is 20/30, which
throttles the Job controller so much that both sides measure the Job controller:
bench/README.md).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import secrets
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes

# Run as a script from anywhere: the cluster harness lives in the repository's e2e/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from e2e import operating
from e2e.controlplane import knobs, processes
from e2e.controlplane.cluster import ClusterInfo, say

from bench import harness, profiling
from bench.bench_hop_latency import (
    FLOOR_RULES,
    GROUP,
    VERSION,
    _api,
    _ended,
    agent_image,
    baseline_job,
)
from bench.node import bench_cluster
from bench.table import Row, emit

TARGET_RATIO = 0.8
AGENTS = ("tp-a", "tp-b", "tp-c")
COMMAND = ["true"]
PHASE_TIMEOUT_SECONDS = 900.0
FLOOR_CHAIN_LABEL = "bench.labrats.work/chain"


@dataclass
class Phase:
    seconds: float
    jobs: int
    cpu_share: float  # of one core, by the controller under test
    platform: dict[str, float] = field(default_factory=dict)  # CPU seconds by component

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


@dataclass
class Results:
    ours: list[Phase] = field(default_factory=list)
    floor: list[Phase] = field(default_factory=list)
    floor_secret: list[Phase] = field(default_factory=list)  # the floor, a Secret per job


def apply_agents(custom: Any, namespace: str) -> None:
    for i, agent in enumerate(AGENTS):
        trigger: dict[str, Any] = {"source": "manual"}
        if i + 1 < len(AGENTS):
            trigger["next"] = {"agentTriggerName": AGENTS[i + 1], "condition": "on-success"}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "AiAgent",
            "metadata": {"name": agent},
            "spec": {"triggerName": agent, "eventTriggers": [trigger], "command": COMMAND},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "aiagents", body)


Begun = tuple[float, harness.ProcSample, dict[str, float]]


def _drain(done: Any, total: int, jobs: int, pid: int, begun: Begun, workdir: Path) -> Phase:
    """Wait until ``done()`` counts ``total`` (earlier rounds' jobs included); the time
    since ``begun``, ``pid``'s CPU share in it and the platform's CPU seconds."""
    start, before, platform = begun
    while (count := done()) < total:
        if time.monotonic() - start > PHASE_TIMEOUT_SECONDS:
            raise TimeoutError(f"{count}/{total} jobs ended after {PHASE_TIMEOUT_SECONDS}s")
        time.sleep(0.25)
    seconds = time.monotonic() - start
    cpu = harness.ProcSample.of(pid).cpu_seconds - before.cpu_seconds
    after = harness.platform_cpu(workdir)
    spent = {name: after[name] - platform.get(name, 0.0) for name in after}
    return Phase(seconds, jobs, cpu / seconds, spent)


class Bench:
    def __init__(self, api: Any, namespace: str, chains: int, info: ClusterInfo) -> None:
        self.namespace, self.chains, self.workdir = namespace, chains, info.workdir
        self.image = agent_image(info)
        self.core: Any = kubernetes.client.CoreV1Api(api)
        self.batch: Any = kubernetes.client.BatchV1Api(api)
        self.custom: Any = kubernetes.client.CustomObjectsApi(api)

    def operator_phase(self, round_: int, pid: int) -> Phase:
        prefix = f"op{round_}"
        begun = self._begin(pid)
        for i in range(self.chains):
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "AgentJob",
                "metadata": {"name": f"{prefix}-{i:03d}", "labels": {"bench": prefix}},
                "spec": {"agentRole": AGENTS[0], "origin": "manual", "prompt": "bench"},
            }
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "agentjobs", body
            )
        say(f"{self.chains} roots created in {time.monotonic() - begun[0]:.1f}s")
        jobs = self.chains * len(AGENTS)
        return _drain(self._agentjobs_ended, jobs * (round_ + 1), jobs, pid, begun, self.workdir)

    def _begin(self, pid: int) -> Begun:
        return time.monotonic(), harness.ProcSample.of(pid), harness.platform_cpu(self.workdir)

    def _agentjobs_ended(self) -> int:
        listed = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "agentjobs"
        )
        ended = ("Succeeded", "Failed", "Skipped")
        return sum((j.get("status") or {}).get("phase") in ended for j in listed["items"])

    def floor_phase(self, round_: int, pid: int, *, with_secret: bool = False) -> Phase:
        """The floor's chains; ``with_secret``, each job with a Secret of its own."""
        prefix = f"fs{round_}" if with_secret else f"fl{round_}"
        begun = self._begin(pid)
        for i in range(self.chains):
            chain = f"{prefix}-{i:03d}"
            secret = f"{chain}-0" if with_secret else None
            job = baseline_job(chain, 0, 0, self.image, COMMAND, secret=secret)
            harness.create_floor_job(self.core, self.batch, self.namespace, job)
        jobs = self.chains * len(AGENTS)
        done = functools.partial(self._pods_ended, prefix[:2])
        return _drain(done, jobs * (round_ + 1), jobs, pid, begun, self.workdir)

    def _pods_ended(self, prefix: str) -> int:
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=FLOOR_CHAIN_LABEL)
        return sum(
            _ended(p) for p in pods.items if p.metadata.labels[FLOOR_CHAIN_LABEL].startswith(prefix)
        )


def _floor_worker(info: ClusterInfo, namespace: str, image: str) -> processes.ManagedProcess:
    kubeconfig = info.workdir / "floor.kubeconfig"
    harness.identity(info, "bench-floor", FLOOR_RULES, kubeconfig)
    script = Path(__file__).with_name("bench_hop_latency.py")
    argv = [sys.executable, str(script), "--baseline-worker", "--kubeconfig", str(kubeconfig),
            "--namespace", namespace, "--sleep", "0", "--image", image,
            "--command", *COMMAND]  # fmt: skip
    worker = processes.start("bench-floor", argv, info.workdir)
    processes.wait_for(
        lambda: "watching" in worker.log_tail(), what="the floor worker", timeout=60, watch=[worker]
    )
    return worker


def measure(info: ClusterInfo, chains: int, rounds: int, profile: Path | None) -> Results:
    operating.install(info)
    namespace = f"tp-{secrets.token_hex(3)}"
    info.kubectl("create", "namespace", namespace)
    operating.wait_until(
        lambda: info.kubectl("get", "sa", "default", "-n", namespace, check=False).returncode == 0,
        timeout=60,
        what="the default ServiceAccount",
    )
    kubeconfig = operating.operator_kubeconfig(info, info.workdir / "operator.kubeconfig")
    env = {**harness.OPERATOR_ENV, "AGENTCHAIN_NAMESPACES": namespace}
    op = operating.OperatorProcess(info, kubeconfig, extra_env=env)
    results = Results()
    with _api(info.kubeconfig) as api:
        bench = Bench(api, namespace, chains, info)
        apply_agents(bench.custom, namespace)
        op.start()
        worker = _floor_worker(info, namespace, bench.image)
        assert op.process is not None
        try:
            for r in range(rounds):
                results.floor.append(bench.floor_phase(r, worker.pid))
                say(f"floor round {r + 1}: {results.floor[-1]}")
                results.floor_secret.append(bench.floor_phase(r, worker.pid, with_secret=True))
                say(f"floor with Secrets, round {r + 1}: {results.floor_secret[-1]}")
                # The first operator phase only: py-spy writes one file per attach.
                with profiling.Profiler(op.process.pid, profile if r == 0 else None):
                    results.ours.append(bench.operator_phase(r, op.process.pid))
                say(f"operator round {r + 1}: {results.ours[-1]}")
        finally:
            worker.stop()
            op.stop()
    return results


def report(results: Results, chains: int) -> None:
    ours = statistics.median(p.rate for p in results.ours)
    floor = statistics.median(p.rate for p in results.floor)
    n = f"{chains} chains x {len(AGENTS)}"
    emit(
        Row(
            f"throughput, {n}",
            ours,
            "jobs/s",
            baseline=floor,
            target=TARGET_RATIO,
            better="higher",
            note="jobs ended per second of the phase, median of rounds",
        )
    )
    if results.floor_secret:
        like = statistics.median(p.rate for p in results.floor_secret)
        emit(
            Row(
                f"floor with a Secret per job, {n}",
                like,
                "jobs/s",
                baseline=floor,
                note="the floor's pods taking a Secret as the operator's do (a file, two "
                "variables); baseline: the bare floor",
            )
        )
        emit(
            Row(
                f"throughput against that floor, {n}",
                ours,
                "jobs/s",
                baseline=like,
                note="what the operator costs beyond giving each job its Secret",
            )
        )
    drain = statistics.median(p.seconds for p in results.ours)
    floor_drain = statistics.median(p.seconds for p in results.floor)
    emit(Row(f"time to drain, {n}", drain, "s", baseline=floor_drain))
    share = statistics.median(p.cpu_share for p in results.ours) * 100
    floor_share = statistics.median(p.cpu_share for p in results.floor) * 100
    emit(
        Row(
            f"controller CPU during the run, {n}",
            share,
            "% of a core",
            baseline=floor_share,
            note=f"of {os.cpu_count()} cores; /proc utime+stime over the phase",
        )
    )
    for label, names in PLATFORM.items():
        ours_ms = _per_job(results.ours, names)
        floor_ms = _per_job(results.floor, names)
        emit(Row(f"{label} CPU per job, {n}", ours_ms, "ms", baseline=floor_ms))
    print("platform CPU per job (ms): operator phase, floor phase, floor with Secrets:")
    phases = results.ours + results.floor + results.floor_secret
    for name in sorted({k for p in phases for k in p.platform}):
        mine, theirs = _per_job(results.ours, (name,)), _per_job(results.floor, (name,))
        like = _per_job(results.floor_secret, (name,)) if results.floor_secret else math.nan
        print(f"  {name:24s} {mine:8.1f} {theirs:8.1f} {like:8.1f}")


# The real node's programs (``harness._program`` names a process by its binary). A
# container's processes are the children its shim reaps, so they count with the shim.
NODE_PROGRAMS = (
    "kubelet",
    "containerd",
    "containerd-shim-runc-v2",
    "kube-proxy",
    "coredns",
    "kube-router",
)
PLATFORM = {
    "API server + etcd": ("kube-apiserver", "etcd"),
    "Job controller, scheduler, node": (
        "kube-controller-manager",
        "kube-scheduler",
        *NODE_PROGRAMS,
    ),
}


def _per_job(phases: list[Phase], names: tuple[str, ...]) -> float:
    """Median over the phases of the named components' CPU per job, in ms."""
    return (
        statistics.median(sum(p.platform.get(n, 0.0) for n in names) / p.jobs for p in phases) * 1e3
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1, help="phases of each side, in turns")
    parser.add_argument("--qps", type=int, default=200, help="controller-manager --kube-api-qps")
    parser.add_argument("--burst", type=int, default=400, help="its --kube-api-burst")
    parser.add_argument("--profile", type=Path, help="py-spy the operator's phase into this file")
    args = parser.parse_args(argv)
    os.environ[knobs.KUBE_API_QPS_ENV] = str(args.qps)
    os.environ[knobs.KUBE_API_BURST_ENV] = str(args.burst)
    with bench_cluster() as info:
        results = measure(info, args.chains, args.rounds, args.profile)
    report(results, args.chains)
    if args.profile:
        print(profiling.summary(args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
