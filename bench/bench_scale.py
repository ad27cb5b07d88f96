"""The operator restarted with thousands of AgentJobs in its namespace: memory, requests, CPU.

``python bench/bench_scale.py [--jobs 5000] [--running 0.1] [--resync 10] [-v]``

Production crash-looped here (issue 21): with 5,000 finished AgentJobs a restarted
operator peaked at 840 MiB and was killed under the chart's 512 Mi limit. This bench
builds such a backlog (bench/backlog.py: one real chain run by the real operator,
then cloned with the admin kubeconfig, pods on a Node of their own whose logs the
bench serves), starts the operator on it and measures, from ``/proc`` and the API
server's audit log:

* RSS peak during the restart (``VmHWM``) and steady after it, against 150 MiB at
  5,000 jobs and 300 MiB at 20,000;
* the API requests the restart made, split into the initial lists/watches and the
  rest; the rest per settled (finished) job has a target of 0;
* time from process start to ``/readyz`` answering 200, and to the backlog being
  worked through (``/readyz`` says ``"backlog": "done"``: every initial list is in
  and no event it brought has work left);
* CPU seconds per resync period once settled (each unsettled, i.e. running, job is
  resynced once per period), from a second start with ``--resync`` seconds; the first
  runs without a resync, whose steady cost would hide when the backlog is done.

There is no floor here: the targets are absolute. ``--jobs`` is the total of AgentJobs
cloned (``--running`` of them running, the rest finished three-agent chains).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from queue import Queue
from typing import Any

# Run as a script from anywhere: the cluster harness lives in the repository's e2e/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from e2e import operating
from e2e.controlplane import processes
from e2e.controlplane.cluster import ClusterInfo, say

from bench import backlog, harness, profiling
from bench.node import bench_cluster
from bench.table import Row, emit

TERMINAL = ("Succeeded", "Failed", "Skipped")
FAST = ("scale-a", "scale-b", "scale-c")
# Template roots; a name's last seven characters become each clone's tag.
ROOTS = ("tplfast-0000000", "tplslow-0000000")
SETTLE_TIMEOUT_SECONDS = 900.0
STEADY_SECONDS = 10.0
NO_RESYNC_SECONDS = 86400


def rss_target(jobs: int) -> float:
    """Issue 21: 150 MiB at 5,000 jobs, 300 MiB at 20,000 (the first up to 10,000 here)."""
    return 150.0 if jobs < 10_000 else 300.0


def agents() -> list[dict[str, Any]]:
    quick = ["agentchain", "demo-agent", "--sleep", "0", "--no-context"]
    specs: list[tuple[str, list[str], str | None]] = [
        (FAST[0], quick, FAST[1]),
        (FAST[1], quick, FAST[2]),
        (FAST[2], quick, None),
        ("scale-slow", ["sleep", "3600"], None),
    ]
    bodies = []
    for name, command, nxt in specs:
        trigger: dict[str, Any] = {"source": "manual"}
        if nxt:
            trigger["next"] = {"agentTriggerName": nxt, "condition": "on-success"}
        spec = {"triggerName": name, "eventTriggers": [trigger], "command": command}
        bodies.append({"apiVersion": "labrats.work/v1alpha1", "kind": "AiAgent",
                       "metadata": {"name": name}, "spec": spec})  # fmt: skip
    return bodies


def agentjob(name: str, role: str) -> dict[str, Any]:
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": name},
        "spec": {"agentRole": role, "origin": "manual", "prompt": "bench scale"},
    }


def _phases(info: ClusterInfo, namespace: str) -> dict[str, str]:
    listed = operating.get_json(info, "agentjobs", "-n", namespace)
    return {
        j["metadata"]["name"]: (j.get("status") or {}).get("phase", "") for j in listed["items"]
    }


def _templates_ready(info: ClusterInfo, namespace: str) -> bool:
    phases = _phases(info, namespace)
    finished = [n for n, p in phases.items() if p in TERMINAL]
    return len(finished) >= len(FAST) and phases.get(ROOTS[1]) == "Running"


def serve_logs(info: ClusterInfo, logs: dict[str, str]) -> int:
    """The log server and the fake Node's heartbeat on an event loop of its own thread;
    returns the log server's port."""
    ports: Queue[int] = Queue()

    def run() -> None:
        loop = asyncio.new_event_loop()
        _, port = loop.run_until_complete(backlog.log_server(info, logs))
        ports.put(port)
        beating = loop.create_task(backlog.heartbeat(info))
        beating.add_done_callback(_stopped)
        loop.run_forever()

    threading.Thread(target=run, daemon=True, name="bench-logs").start()
    return ports.get(timeout=30)


def _stopped(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        say(f"the fake Node's heartbeat stopped: {task.exception()!r}")


def build(
    info: ClusterInfo, namespace: str, op: operating.OperatorProcess, args: Any
) -> tuple[int, int, float]:
    """Templates from the real operator, then the cloned backlog; the operator is down.
    Returns how many AgentJobs are (finished, running), templates included, and the
    operator's RSS (MiB) once it ran the template chain: the cost of the process itself."""
    for body in agents():
        info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(body))
    op.start()
    for name, role in zip(ROOTS, (FAST[0], "scale-slow"), strict=True):
        info.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(agentjob(name, role)))
    operating.wait_until(
        lambda: _templates_ready(info, namespace), timeout=180, what="the template chain"
    )
    time.sleep(2)  # The last job's record (status.next) lands just after its phase.
    assert op.process is not None
    idle_mib = harness.ProcSample.of(op.process.pid).rss_mib
    op.stop()
    fast, slow, logs = asyncio.run(backlog.capture(info, namespace, ROOTS))
    if args.keep:
        backlog.dump(info.workdir / "templates.json", [fast, slow])
    port = serve_logs(info, logs)
    asyncio.run(backlog.fake_node(info, port))
    running = round(args.jobs * args.running)
    chains = max(1, (args.jobs - running) // len(fast.agentjobs))
    say(f"cloning {chains} finished chains and {running} running jobs")
    started = time.monotonic()
    asyncio.run(
        backlog.clone(info, [(fast, chains), (slow, running)], lambda n: say(f"{n} cloned"))
    )
    say(f"cloned in {time.monotonic() - started:.0f}s")
    return len(fast.agentjobs) * (chains + 1), running + 1, idle_mib


@dataclass
class Restart:
    jobs: int
    settled_jobs: int
    idle_mib: float = float("nan")
    peak_mib: float = 0.0
    steady_mib: float = 0.0
    ready_s: float = float("nan")
    settled_s: float = float("nan")
    cpu_per_resync_s: float = float("nan")
    log_lines: int = 0
    started_at: float = 0.0
    settled_at: float = 0.0


def _readyz(url: str) -> dict[str, Any] | None:
    """``/readyz``'s answer when it is 200 (ready), else None."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=1) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer if response.status == 200 else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _start(op: operating.OperatorProcess, name: str, resync: float) -> int:
    op.extra_env["AGENTCHAIN_RESYNC_SECONDS"] = str(int(resync))
    argv = [sys.executable, "-m", "agentchain", "run"]
    op.process = processes.start(name, argv, op.info.workdir, env=op.env())
    return op.process.pid


def watch_restart(
    info: ClusterInfo, op: operating.OperatorProcess, result: Restart, profile: Path | None
) -> None:
    """Start the operator (no resync: its steady cost is measured apart) and sample it
    until its backlog is worked through (``/readyz`` says ``"backlog": "done"``: the
    initial lists are in and no event has work left), then for STEADY_SECONDS more."""
    result.started_at = time.time()
    start = time.monotonic()
    pid = _start(op, "operator-restart", NO_RESYNC_SECONDS)
    with profiling.Profiler(pid, profile):
        _until_settled(op, result, start)
    result.settled_at = time.time()
    assert op.process is not None
    result.log_lines = len(op.process.log_path.read_text(errors="replace").splitlines())
    time.sleep(STEADY_SECONDS)
    after = harness.ProcSample.of(pid)
    result.steady_mib, result.peak_mib = after.rss_mib, after.peak_mib
    op.stop()


def _until_settled(op: operating.OperatorProcess, result: Restart, start: float) -> None:
    while time.monotonic() - start < SETTLE_TIMEOUT_SECONDS:
        if op.process is None or not op.process.alive():
            raise RuntimeError("the operator died during the restart")
        answer = _readyz(op.internal_url)
        now = time.monotonic() - start
        if answer is not None and result.ready_s != result.ready_s:
            result.ready_s = now
        if answer is not None and answer.get("backlog") == "done":
            result.settled_s = now
            return
        time.sleep(0.1)
    say(f"not worked through after {SETTLE_TIMEOUT_SECONDS:.0f}s (ready: {result.ready_s}s)")


def resync_cost(op: operating.OperatorProcess, result: Restart, resync: float) -> None:
    """Start again with a resync period: once the backlog is worked through (as long as
    the restart took, plus a period), the operator's CPU over two periods, per period."""
    pid = _start(op, "operator-resync", resync)
    settle = result.settled_s if result.settled_s == result.settled_s else SETTLE_TIMEOUT_SECONDS
    time.sleep(settle + resync)
    before = harness.ProcSample.of(pid)
    time.sleep(2 * resync)
    after = harness.ProcSample.of(pid)
    result.cpu_per_resync_s = (after.cpu_seconds - before.cpu_seconds) / 2
    result.peak_mib = max(result.peak_mib, after.peak_mib)
    op.stop()


JOB_RESOURCES = ("agentjobs.labrats.work", "jobs.batch", "pods", "pods/log")


def requests_report(info: ClusterInfo, result: Restart, verbose: bool) -> tuple[int, int, int]:
    """(initial lists and watches, requests about jobs, others) the restart made until
    worked through.

    Initial: every watch, and every list page (``limit=``) or list of a resource before
    its first watch. (A replica follows before it leads: its dashboard feed's AgentJob
    watch can start before the engine's list pages, which are initial all the same.)
    About jobs: the rest on AgentJobs, batch Jobs, pods and logs (the target is none
    per settled job). Others: e.g. the AiAgents' resume handlers (per agent, not per
    job). Non-resource requests (``/version``, which ``/readyz`` polling causes) are
    left out.
    """
    audit = harness.Audit(info)
    made = audit.requests(result.started_at, result.settled_at, {harness.OPERATOR_USER})
    watched: set[str] = set()
    initial: list[harness.Request] = []
    about_jobs: list[harness.Request] = []
    others: list[harness.Request] = []
    for r in made:
        if r.resource == "-":
            continue
        if r.verb == "watch":
            watched.add(r.resource)
        paged = "limit=" in r.uri
        if r.verb == "watch" or (r.verb == "list" and (paged or r.resource not in watched)):
            initial.append(r)
        else:
            (about_jobs if r.resource in JOB_RESOURCES else others).append(r)
    if verbose:
        print(harness.breakdown("restart requests (list pages and watches)", initial))
        print(harness.breakdown("restart requests (about jobs)", about_jobs))
        print(harness.breakdown("restart requests (others)", others))
    return len(initial), len(about_jobs), len(others)


def measure(info: ClusterInfo, args: Any) -> tuple[Restart, tuple[int, int, int]]:
    operating.install(info)
    namespace = f"scale-{secrets.token_hex(3)}"
    info.kubectl("create", "namespace", namespace)
    operating.wait_until(
        lambda: info.kubectl("get", "sa", "default", "-n", namespace, check=False).returncode == 0,
        timeout=60,
        what="the default ServiceAccount",
    )
    kubeconfig = operating.operator_kubeconfig(info, info.workdir / "operator.kubeconfig")
    env = {
        **harness.OPERATOR_ENV,
        "AGENTCHAIN_NAMESPACES": namespace,
        "AGENTCHAIN_RESYNC_SECONDS": str(args.resync),
    }
    op = operating.OperatorProcess(info, kubeconfig, extra_env=env)
    # Whatever happens once cloning began (an interrupted clone too), the clones go at
    # once: the real node's teardown would otherwise wait for each to be confirmed gone.
    try:
        finished, running, idle_mib = build(info, namespace, op, args)
        result = Restart(jobs=finished + running, settled_jobs=finished, idle_mib=idle_mib)
        say(f"restarting the operator on {args.jobs} AgentJobs")
        watch_restart(info, op, result, args.profile)
        say(f"again with a resync every {args.resync}s")
        resync_cost(op, result, float(args.resync))
    finally:
        op.stop()
        say("deleting the cloned pods")
        try:
            asyncio.run(backlog.remove(info, namespace))
        except Exception as exc:  # The figures are measured: say it, keep them.
            say(f"the cloned pods were not all deleted ({exc}); the node's drain skips them")
    return result, requests_report(info, result, args.verbose)


def report(result: Restart, requests: tuple[int, int, int]) -> None:
    n = f"{result.jobs:,} jobs"
    target = rss_target(result.jobs)
    emit(
        Row(
            f"restart peak RSS, {n}",
            result.peak_mib,
            "MiB",
            baseline=result.idle_mib,
            target=target,
            compare="figure",
            note="VmHWM; baseline: the same operator's RSS after one chain, no backlog; "
            "issue 21 reported 840 MiB at 5,000",
        )
    )
    emit(
        Row(
            f"steady RSS after restart, {n}",
            result.steady_mib,
            "MiB",
            baseline=result.idle_mib,
            target=target,
            compare="figure",
        )
    )
    initial, rest, others = requests
    emit(Row(f"restart list pages+watches, {n}", initial, "req"))
    emit(
        Row(
            f"restart other requests per settled job, {n}",
            rest / max(1, result.settled_jobs),
            "req",
            target=0,
            compare="figure",
            note=f"{rest} requests about jobs other than list pages/watches until worked through",
        )
    )
    emit(Row(f"restart requests not about jobs, {n}", others, "req", note="AiAgents' resume"))
    emit(Row(f"restart: start to /readyz, {n}", result.ready_s, "s"))
    emit(Row(f"restart: start to backlog worked through, {n}", result.settled_s, "s"))
    emit(
        Row(
            f"CPU per resync period, {n}",
            result.cpu_per_resync_s,
            "s",
            note="operator CPU seconds per resync period once settled",
        )
    )
    emit(Row(f"restart log lines per job, {n}", result.log_lines / result.jobs, "lines"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=5000, help="AgentJobs in the backlog")
    parser.add_argument("--running", type=float, default=0.1, help="share of them running")
    parser.add_argument("--resync", type=int, default=10, help="the operator's resync seconds")
    parser.add_argument("--keep", action="store_true", help="write templates.json in the workdir")
    parser.add_argument("-v", "--verbose", action="store_true", help="requests by verb+resource")
    parser.add_argument("--profile", type=Path, help="py-spy the restart into this file")
    args = parser.parse_args(argv)
    harness.audit_enabled()
    with bench_cluster() as info:
        result, requests = measure(info, args)
    report(result, requests)
    if args.profile:
        print(profiling.summary(args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
