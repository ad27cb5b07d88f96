"""SIGKILL the operator at random moments while chains run, then count (SPEC §2).

``python -m e2e.chaos [--chains 20] [--kills 50] [--seed 1] [--timeout 900]`` starts
a private cluster on the real node with the e2e agent image (as root; or on the cluster
``AGENTCHAIN_E2E_KUBECONFIG`` names), installs the CRDs and RBAC and runs the operator under its own
ServiceAccount; ``e2e/test_chaos.py`` runs the same ``run_chaos`` in reduced form.

Exactly once is a claim about counts, so this module counts rather than eyeballs:
every chain ends complete with exactly three AgentJobs (depths 0, 1, 2, the right
agents); every AgentJob has exactly one batch Job, every batch Job exactly one pod, and
every agent's report was printed once; every non-last job records the child it spawned,
that child exists and names it as its parent; and every chain shows exactly one
``ChainComplete`` Event, on its last job.

The kills come at seeded-random moments (0 to 1.5 s after ``/healthz`` answers), so some
land while kopf resumes every object, some mid-hop, some while it idles; replaying one
seed replays the same schedule (the cluster's timing still varies).  Half the chains
start at once and the rest one by one until just before the last kill, and a kill is
only sent while some chain is in flight (see ``start_schedule``): when every chain has
completed with kills still to send, one more chain is started, so ``--chains`` is a
floor and the report counts the chains actually run.
After the last chain completes the run waits two resync periods before counting, so a
duplicate that a late resync would create is counted too.
"""

from __future__ import annotations

import argparse
import math
import random
import secrets
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import kubernetes

from e2e import operating, realnodes
from e2e.controlplane.cluster import ClusterInfo, finish_workdir, make_workdir, say

GROUP, VERSION = "labrats.work", "v1alpha1"
AGENTJOB_LABEL = f"{GROUP}/agentjob"
AGENTS = ("ai-triage", "ai-developer", "ai-reviewer")
# The operator's resync period in e2e (operating.OperatorProcess.env).
RESYNC_SECONDS = 3.0
# Longest the operator lives between restarts; uniform in [0, this), so many kills land
# in the first second after start-up, while kopf resumes every object.
MAX_UPTIME_SECONDS = 1.5
REPORT_HEADER = " report (job "  # demo_agent prints it once per run

Obj = dict[str, Any]


@dataclass
class ChaosReport:
    """What one run did and counted; ``problems`` lists every broken promise."""

    chains: int
    kills: int
    seconds: float = 0.0
    agentjobs: int = 0
    batch_jobs: int = 0
    pods: int = 0
    reports_printed: int = 0
    spawned_transitions: int = 0
    completed_chains: int = 0
    chain_complete_events: int = 0
    sleeps: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        counts = {k: v for k, v in vars(self).items() if k != "problems"}
        lines = [f"{key}: {value}" for key, value in counts.items()]
        lines.append(f"problems: {len(self.problems)}")
        lines += [f"  - {p}" for p in self.problems[:50]]
        return "\n".join(lines)

    def check(self) -> None:
        assert not self.problems, self.summary()


@dataclass
class _Cluster:
    """The admin-side API clients one run reads with."""

    api: kubernetes.client.ApiClient
    namespace: str

    @property
    def custom(self) -> Any:
        return kubernetes.client.CustomObjectsApi(self.api)

    @property
    def core(self) -> Any:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def batch(self) -> Any:
        return kubernetes.client.BatchV1Api(self.api)

    def agentjobs(self) -> list[Obj]:
        listed = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "agentjobs"
        )
        return list(listed["items"])

    def create(self, plural: str, body: Obj) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body)


def agent_manifests(sleeps: dict[str, float]) -> list[Obj]:
    """triage → developer → reviewer, each the demo agent sleeping its own time."""
    manifests = []
    for i, agent in enumerate(AGENTS):
        trigger: Obj = {"source": "manual"}
        if i + 1 < len(AGENTS):
            trigger["next"] = {"agentTriggerName": AGENTS[i + 1], "condition": "on-success"}
        spec: Obj = {
            "triggerName": agent,
            "eventTriggers": [trigger],
            "command": ["agentchain", "demo-agent"],
            "args": ["--sleep", str(sleeps[agent]), "--no-context"],
        }
        manifests.append(
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "AiAgent",
                "metadata": {"name": agent},
                "spec": spec,
            }
        )
    return manifests


def root_job(name: str) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AgentJob",
        "metadata": {"name": name},
        "spec": {
            "agentRole": AGENTS[0],
            "type": "triage-issue",
            "origin": "manual",
            "prompt": f"Chaos run {name}: triage the flaky login.",
        },
    }


def _status(job: Obj) -> Obj:
    return dict(job.get("status") or {})


def completed(jobs: list[Obj]) -> int:
    return sum(1 for j in jobs if _status(j).get("chainComplete"))


def start_schedule(chains: int, kills: int) -> list[int]:
    """How many chains have been started before each kill.

    Half the chains start at once, so the first kills meet many chains in flight; the
    rest start one by one until three kills before the end, because a restarted
    operator catches up on a whole chain within a few lives: started all at once, the
    chains would be over long before the last kill, which would then prove nothing.
    """
    if kills == 0:
        return [chains]
    first = (chains + 1) // 2
    last = max(1, kills - 3)
    return [min(chains, first + math.ceil((chains - first) * k / last)) for k in range(kills)]


def _kill_loop(
    op: operating.OperatorProcess,
    kc: _Cluster,
    rng: random.Random,
    kills: int,
    chains: int,
    deadline: float,
) -> tuple[int, int]:
    """Start chains and kill and restart the operator ``kills`` times, while chains run.

    Returns the kills sent and the chains started: ``chains`` is a floor, as a kill that
    meets no running chain proves nothing, so when every chain started has completed
    before the kills are through, one more chain is started for the next kill.
    """
    started = done = 0
    for target in start_schedule(chains, kills):
        if time.monotonic() > deadline:
            break
        if completed(kc.agentjobs()) >= started:
            target = max(target, started + 1)  # Nothing in flight: start one now.
        for i in range(started, target):
            kc.create("agentjobs", root_job(f"chaos-{i:03d}"))
        # Never back: a chain started early (nothing was in flight) is not started again.
        started = max(started, target)
        time.sleep(rng.uniform(0, MAX_UPTIME_SECONDS))
        op.kill()
        done += 1
        op.start()
    for i in range(started, chains):  # Left over when kills are few, or time ran out.
        kc.create("agentjobs", root_job(f"chaos-{i:03d}"))
    return done, max(started, chains)


def _wait_complete(kc: _Cluster, chains: int, deadline: float) -> None:
    while completed(kc.agentjobs()) < chains:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out: {completed(kc.agentjobs())} of {chains} chains complete"
            )
        time.sleep(0.5)


def run_chaos(
    info: ClusterInfo,
    namespace: str,
    *,
    chains: int,
    kills: int,
    seed: int,
    operator: operating.OperatorProcess | None = None,
    timeout: float = 900.0,
    check: bool = True,
) -> ChaosReport:
    """Run ``chains`` chains through ``kills`` SIGKILLs; count, and assert if ``check``.

    ``operator`` is killed and restarted in place (and left running); without one, an
    operator watching only ``namespace`` is started here and stopped at the end.  The
    CRDs and RBAC must be installed already (``operating.install``).
    """
    rng = random.Random(seed)
    sleeps = {agent: round(rng.uniform(1.0, 2.0), 2) for agent in AGENTS}
    report = ChaosReport(chains=chains, kills=0, sleeps=sleeps)
    own = operator is None
    op = operator or operating.OperatorProcess(
        info,
        operating.operator_kubeconfig(info, info.workdir / f"chaos-{namespace}.kubeconfig"),
        extra_env={"AGENTCHAIN_NAMESPACES": namespace},
    )
    loader = kubernetes.config.new_client_from_config
    api: kubernetes.client.ApiClient = loader(config_file=str(info.kubeconfig))  # type: ignore[no-untyped-call]
    started = time.monotonic()
    deadline = started + timeout
    with api:
        kc = _Cluster(api, namespace)
        for manifest in agent_manifests(sleeps):
            kc.create("aiagents", manifest)
        if op.process is None:
            op.start()
        try:
            report.kills, report.chains = _kill_loop(op, kc, rng, kills, chains, deadline)
            _wait_complete(kc, report.chains, deadline)
            report.seconds = round(time.monotonic() - started, 1)
            # A late duplicate (a resync replaying a finished step) would show up now.
            time.sleep(2 * RESYNC_SECONDS + 1)
        finally:
            if own:
                op.stop()
            elif op.process is None:
                op.start()  # The caller's operator is left running, as it came.
        _count(kc, report)
    if report.kills < kills:
        report.problems.append(f"only {report.kills} of {kills} kills landed before the end")
    if check:
        report.check()
    return report


def _count(kc: _Cluster, report: ChaosReport) -> None:
    jobs = kc.agentjobs()
    report.agentjobs = len(jobs)
    report.completed_chains = completed(jobs)
    by_chain: dict[str, list[Obj]] = defaultdict(list)
    for job in jobs:
        by_chain[str(_status(job).get("chainId"))].append(job)
    if len(by_chain) != report.chains:
        report.problems.append(f"{len(by_chain)} chain ids for {report.chains} chains")
    events = _chain_complete_events(kc)
    report.chain_complete_events = sum(events.values())
    for chain_id, members in sorted(by_chain.items()):
        members.sort(key=lambda j: int(_status(j).get("chainDepth", -1)))
        report.problems += [f"chain {chain_id}: {p}" for p in _chain_problems(members, events)]
        report.spawned_transitions += sum(1 for j in members if _next(j).get("action") == "spawned")
    _count_workloads(kc, {j["metadata"]["name"] for j in jobs}, report)


def _next(job: Obj) -> Obj:
    entries = _status(job).get("next") or [{}]
    return dict(entries[0])


def _chain_problems(members: list[Obj], events: Counter[str]) -> Iterator[str]:
    names = [j["metadata"]["name"] for j in members]
    depths = [_status(j).get("chainDepth") for j in members]
    agents = [j["spec"]["agentRole"] for j in members]
    if depths != [0, 1, 2] or agents != list(AGENTS):
        yield f"jobs {names} have depths {depths} and agents {agents}"
        return
    for depth, job in enumerate(members):
        status = _status(job)
        if status.get("phase") != "Succeeded":
            yield f"{names[depth]} is {status.get('phase')}: {status.get('message')}"
        parent = names[depth - 1] if depth else None
        if status.get("parentJobId") != parent:
            yield f"{names[depth]} names parent {status.get('parentJobId')}, not {parent}"
        yield from _transition_problems(job, names[depth + 1] if depth < 2 else None)
        want = 1 if depth == 2 else 0
        if events[names[depth]] != want:
            yield f"{names[depth]} has {events[names[depth]]} ChainComplete Events"


def _transition_problems(job: Obj, child: str | None) -> Iterator[str]:
    name, status, entry = job["metadata"]["name"], _status(job), _next(job)
    if child is not None:
        if entry.get("action") != "spawned" or entry.get("child") != child:
            yield f"{name} records next {entry}, not spawned {child}"
        if status.get("chainComplete"):
            yield f"{name} is marked complete but spawned {child}"
    else:
        if entry.get("action") != "none":
            yield f"{name} (last) records next {entry}"
        if status.get("chainComplete") is not True:
            yield f"{name} (last) is not marked complete"


def _chain_complete_events(kc: _Cluster) -> Counter[str]:
    listed = kc.core.list_namespaced_event(kc.namespace, field_selector="reason=ChainComplete")
    return Counter(e.involved_object.name for e in listed.items)


def _count_workloads(kc: _Cluster, agentjobs: set[str], report: ChaosReport) -> None:
    batch = kc.batch.list_namespaced_job(kc.namespace, label_selector=AGENTJOB_LABEL).items
    pods = kc.core.list_namespaced_pod(kc.namespace, label_selector=AGENTJOB_LABEL).items
    report.batch_jobs, report.pods = len(batch), len(pods)
    jobs_per = Counter(j.metadata.labels[AGENTJOB_LABEL] for j in batch)
    pods_per = Counter(p.metadata.labels.get("job-name") for p in pods)
    for name in sorted(agentjobs):
        if jobs_per[name] != 1:
            report.problems.append(f"{name} has {jobs_per[name]} batch Jobs")
    for job in batch:
        count = pods_per[job.metadata.name]
        if count != 1:
            report.problems.append(f"batch Job {job.metadata.name} has {count} pods")
    for pod in pods:
        report.reports_printed += _reports_in(kc, pod)


def _reports_in(kc: _Cluster, pod: Any) -> int:
    """How many times the demo agent printed its report in this pod (restarts included)."""
    restarts: int = sum(cs.restart_count for cs in pod.status.container_statuses or [])
    text = kc.core.read_namespaced_pod_log(pod.metadata.name, kc.namespace, container="agent")
    return str(text).count(REPORT_HEADER) + restarts


def _create_namespace(info: ClusterInfo) -> str:
    name = f"chaos-{secrets.token_hex(3)}"
    info.kubectl("create", "namespace", name)
    operating.wait_until(
        lambda: (
            info.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode
            == 0
        ),
        timeout=30,
        what="the namespace's default ServiceAccount",
    )
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.chaos", description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=20)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    workdir = make_workdir()
    report: ChaosReport | None = None
    try:
        with realnodes.cluster_with_agent_image(workdir) as info:
            operating.install(info)
            namespace = _create_namespace(info)
            say(f"chaos: {args.chains} chains, {args.kills} kills, seed {args.seed} in {namespace}")
            report = run_chaos(
                info,
                namespace,
                chains=args.chains,
                kills=args.kills,
                seed=args.seed,
                timeout=args.timeout,
                check=False,
            )
            print(report.summary(), flush=True)
    finally:
        # Keep every component's log (and the operator's) when something went wrong.
        finish_workdir(workdir, succeeded=report is not None and not report.problems)
    return 1 if report.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
