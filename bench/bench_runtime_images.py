"""Reference agent images on the real node: their size, and how long a pod of each takes
from its creation to the CLI's first model request.

``python bench/bench_runtime_images.py [--jobs 3]`` (root; the real node and buildah, as
``make realnode``)

For each runtime (claude-code, codex, opencode, gemini) the image is built from
``images/agent/Dockerfile`` (or found in the cache) and imported into the real node
(``e2e/runtime_stage.py``); its size is the OCI archive's (uncompressed layers). Then
``--jobs`` AgentJobs of an AiAgent of that runtime run one after another against the
stand-in model server, which answers at once. Both ends of "pod created to first model
request" are taken on this machine's monotonic clock: the pod's ADDED event on a watch
this process holds open (its ``creationTimestamp`` has one-second resolution) and the
stand-in's arrival time of the job's first request. In between: the kubelet starting the
sandbox and the container, the runner reading its settings, the CLI starting (and Claude
Code its MCP server) and sending the request.

The baseline, measured in the same run on the same node: ``--jobs`` pods of the node's
busybox test image whose only command opens one connection to a listener of this
process on the bridge address (``nc``), from the same ADDED event to the connection's
arrival. That is the least a pod can take to send its first request here (sandbox,
network, container start), so each runtime's ratio says what its image, the runner and
the CLI add on top. The rows are information, without a target.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

import kubernetes

# Run as a script from anywhere: the cluster harness lives in the repository's e2e/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from e2e import runtime_stage
from e2e.controlplane import agent_images
from e2e.models import text

from bench.table import Row, emit

API = runtime_stage.APIS


class PodsSeen:
    """The monotonic time each AgentJob's first pod was ADDED, from a pod watch."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.added: dict[str, float] = {}
        self._lock = threading.Lock()
        client = kubernetes.config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
        self._api = kubernetes.client.CoreV1Api(client)
        self._watch = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
        self._namespace = namespace
        self._ready = threading.Event()
        self._stopping = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="pods-seen").start()
        if not self._ready.wait(30):
            raise RuntimeError("the pod watch did not start")

    def _run(self) -> None:
        self._ready.set()
        stream = self._watch.stream(  # type: ignore[no-untyped-call]
            self._api.list_namespaced_pod, self._namespace
        )
        try:
            for event in stream:
                now = time.monotonic()
                labels = event["object"].metadata.labels or {}
                job = labels.get("labrats.work/agentjob")
                if event["type"] == "ADDED" and job:
                    with self._lock:
                        self.added.setdefault(job, now)
        except Exception:
            # The API server going away at the end of the run ends the stream.
            if not self._stopping.is_set():
                raise

    def of(self, job: str) -> float:
        with self._lock:
            return self.added[job]

    def stop(self) -> None:
        self._stopping.set()
        self._watch.stop()  # type: ignore[no-untyped-call]


def measure(stage: runtime_stage.Stage, runtime: str, jobs: int, seen: PodsSeen) -> list[float]:
    agent = f"bench-{runtime}"
    stage.agent(agent, runtime)
    delays = []
    for number in range(jobs):
        job = f"{agent}-{number}"
        before = len(stage.standin.exchanges(API[runtime]))
        stage.standin.script(text("Forty-two."))
        stage.start_job(job, agent)
        status = stage.ended(job)
        if status.get("phase") != "Succeeded":
            raise RuntimeError(f"{job} ended {status}: {stage.logs(job)[-2000:]}")
        first = stage.standin.exchanges(API[runtime])[before]
        delays.append(first.received - seen.of(job))
    return delays


class Arrivals:
    """A TCP listener that notes the monotonic time of each connection it accepts."""

    def __init__(self, host: str) -> None:
        self._socket = socket.create_server((host, 0))
        self.host, self.port = host, self._socket.getsockname()[1]
        self.times: list[float] = []
        threading.Thread(target=self._run, daemon=True, name="arrivals").start()

    def _run(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return  # closed
            self.times.append(time.monotonic())
            connection.close()

    def close(self) -> None:
        self._socket.close()


def _floor_pod(name: str, image: str, arrivals: Arrivals) -> dict[str, object]:
    """A pod of the node's busybox image that connects once to ``arrivals`` and ends."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        # The label the pod watch keys by, as an AgentJob's pod carries it.
        "metadata": {"name": name, "labels": {"labrats.work/agentjob": name}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "floor", "image": image, "imagePullPolicy": "Never",
                "command": ["sh", "-c", f"echo | nc {arrivals.host} {arrivals.port}"],
            }],
        },
    }  # fmt: skip


def floor(stage: runtime_stage.Stage, jobs: int, seen: PodsSeen) -> list[float]:
    """Pod created to its first connection, for the node's smallest pod."""
    node = stage.info.real_node
    assert node is not None
    arrivals = Arrivals(node.network.gateway)
    delays = []
    try:
        for number in range(jobs):
            name = f"floor-{number}"
            before = len(arrivals.times)
            pod = _floor_pod(name, node.test_image, arrivals)
            stage.info.kubectl("apply", "-n", runtime_stage.NAMESPACE, "-f", "-",
                               input=json.dumps(pod))  # fmt: skip
            deadline = time.monotonic() + 120
            while len(arrivals.times) == before:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} never connected")
                time.sleep(0.05)
            delays.append(arrivals.times[before] - seen.of(name))
    finally:
        arrivals.close()
    return delays


def _p50_row(name: str, delays: list[float], baseline: float | None = None) -> Row:
    delays = sorted(delays)
    note = f"{len(delays)} pods, min {delays[0]:.1f} s, max {delays[-1]:.1f} s"
    return Row(name, round(statistics.median(delays), 2), "s", baseline=baseline, note=note)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=3, help="jobs measured per runtime")
    args = parser.parse_args(argv)
    with runtime_stage.stage() as stage:
        seen = PodsSeen(stage.info.kubeconfig, runtime_stage.NAMESPACE)
        try:
            floor_row = _p50_row("busybox pod created to first connection p50 (floor)",
                                 floor(stage, args.jobs, seen))  # fmt: skip
            emit(floor_row)
            base = floor_row.figure
            for runtime in agent_images.RUNTIMES:
                image = stage.images[runtime]
                size = image.archive.stat().st_size / 1e6
                emit(Row(f"{runtime} image size", round(size), "MB",
                         note=f"{image.ref}, uncompressed OCI archive"))  # fmt: skip
                delays = measure(stage, runtime, args.jobs, seen)
                emit(_p50_row(f"{runtime} pod created to first model request p50", delays,
                              baseline=base))  # fmt: skip
        finally:
            seen.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
