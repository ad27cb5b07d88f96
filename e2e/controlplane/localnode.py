"""A stand-in for the kubelet: runs the pods bound to one Node as local processes.

No container runtime exists on the machines this project is developed and tested on, so
the real kube-apiserver, scheduler and Job controller are paired with this process, which
does only what a kubelet does that those components can observe:

* registers the Node (127.0.0.1, capacity, Ready) and keeps its Ready heartbeat fresh;
* list+watches the pods bound to it and hands each to a `PodWorker`, which runs the
  containers (images are ignored: `command` + `args` run on this machine, each process in
  a mount namespace of its own with the pod's volumes at their mount paths: secret,
  configMap, emptyDir, projected, downwardAPI, persistentVolumeClaim, see
  `localnode_volumes`; `securityContext` is not applied: processes run as the node's
  user) and reports status through `pods/status`;
* finishes graceful deletions after killing the processes;
* serves `/containerLogs` over HTTPS so `pods/log` and `kubectl logs` work.

Threads versus asyncio: everything runs on one event loop except the pod watch, which is
a blocking stream and gets its own daemon thread; it only ever passes events to the loop
(`call_soon_threadsafe`), so all state is touched from one thread. The watch thread
re-lists after 410 Gone and after any error, and the re-list also reaps workers whose pods
vanished while the watch was down.

    python -m e2e.controlplane.localnode --kubeconfig KCFG --node-name NAME \
        --state-dir DIR --port PORT --tls-cert CRT --tls-key KEY [--client-ca CA] \
        [--hide DIR]...
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from e2e.controlplane import localnode_logs as logs
from e2e.controlplane import localnode_status as statuses
from e2e.controlplane.localnode_guard import Guard
from e2e.controlplane.localnode_kube import Json, NodeApi
from e2e.controlplane.localnode_pods import PodWorker

log = logging.getLogger("localnode")

HEARTBEAT_SECONDS = 10.0
RELIST_BACKOFF_SECONDS = 1.0
SHUTDOWN_WAIT_SECONDS = 3.0
TERMINAL = ("Succeeded", "Failed")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m e2e.controlplane.localnode")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node-name", default="agentchain-local")
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--tls-cert", required=True)
    parser.add_argument("--tls-key", required=True)
    parser.add_argument("--client-ca", default=None)
    parser.add_argument(
        "--hide", action="append", type=Path, default=[],
        help="a directory of the node no container may see (the provisioner's volumes)",
    )  # fmt: skip
    return parser.parse_args(argv)


class LocalNode:
    """The node: registration, heartbeat, pod dispatch and log lookup."""

    def __init__(self, args: argparse.Namespace, api: NodeApi, guard: Guard) -> None:
        self.args = args
        self.api = api
        self.guard = guard
        self.name: str = args.node_name
        self.state_dir: Path = args.state_dir
        self.workers: dict[str, PodWorker] = {}
        self.finishing: set[str] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.stopping = asyncio.Event()
        self.ready_since = statuses.now()
        self.base_env = dict(os.environ)

    # --- running --------------------------------------------------------------------------

    async def run(self) -> None:
        context = logs.tls_context(self.args.tls_cert, self.args.tls_key, self.args.client_ca)
        server = await logs.serve(self.log_target, self.args.port, context)
        await self.api.register_node(self._node())
        log.info("node %s registered, kubelet endpoint on port %d", self.name, self.args.port)
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._watch_forever, args=(loop,), daemon=True).start()
        heartbeat = asyncio.create_task(self._heartbeat())
        await self.stopping.wait()
        heartbeat.cancel()
        await self._shutdown()
        await server.cleanup()

    def _node(self) -> Json:
        return statuses.node_body(self.name, self.args.port, self.ready_since)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self.api.heartbeat(self._node())
            except Exception:
                # Someone deleted the Node (or the API server blinked): register again.
                log.warning("node heartbeat failed; registering again", exc_info=True)
                with contextlib.suppress(Exception):
                    await self.api.register_node(self._node())

    async def _shutdown(self) -> None:
        """Kill every pod process; pods are left for whoever runs the next node."""
        for worker in self.workers.values():
            worker.kill_now()
        pending = [w.done.wait() for w in self.workers.values()]
        if pending:
            await asyncio.wait(
                [asyncio.ensure_future(p) for p in pending], timeout=SHUTDOWN_WAIT_SECONDS
            )

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        # The loop keeps only weak references to tasks; hold them until they finish.
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # --- the pod watch (its own thread) ----------------------------------------------------

    def _watch_forever(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self.stopping.is_set():
            try:
                pods, version = self.api.list_pods(self.name)
                loop.call_soon_threadsafe(self.on_resync, pods)
                while True:
                    for kind, pod in self.api.watch_pods(self.name, version):
                        version = pod.get("metadata", {}).get("resourceVersion", version)
                        if kind != "BOOKMARK":
                            loop.call_soon_threadsafe(self.on_event, kind, pod)
            except Exception as exc:
                log.info("pod watch ended (%s); listing again", exc)
                time.sleep(RELIST_BACKOFF_SECONDS)

    # --- dispatch (event loop thread) -------------------------------------------------------

    def on_resync(self, pods: list[Json]) -> None:
        seen = {pod["metadata"]["uid"] for pod in pods}
        for uid in [uid for uid in self.workers if uid not in seen]:
            self._forget(uid)
        for pod in pods:
            self.on_event("ADDED", pod)

    def on_event(self, kind: str, pod: Json) -> None:
        try:
            if kind == "DELETED":
                self._forget(pod["metadata"]["uid"])
            else:
                self._on_pod(pod)
        except Exception:
            log.exception("could not handle %s of pod %s", kind, pod.get("metadata", {}))

    def _forget(self, uid: str) -> None:
        """The pod is gone from the API: whatever still runs for it must die now."""
        self.finishing.discard(uid)
        worker = self.workers.pop(uid, None)
        if worker is not None and not worker.done.is_set():
            self._spawn(worker.stop(0))

    def _on_pod(self, pod: Json) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        worker = self.workers.get(uid)
        if meta.get("deletionTimestamp"):
            self._on_deleting(pod, worker)
        elif worker is None and (pod.get("status") or {}).get("phase") not in TERMINAL:
            worker = PodWorker(
                pod, self.api, self.guard, self.state_dir, self.base_env, self.args.hide
            )
            self.workers[uid] = worker
            log.info("starting pod %s/%s", meta["namespace"], meta["name"])
            self._spawn(worker.main())

    def _on_deleting(self, pod: Json, worker: PodWorker | None) -> None:
        meta = pod["metadata"]
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        if worker is not None:
            self._spawn(worker.delete(grace))
        elif meta["uid"] not in self.finishing:
            # Never ran here (or ran under an earlier node process): nothing to kill.
            self.finishing.add(meta["uid"])
            self._spawn(self.api.delete_pod_now(meta["namespace"], meta["name"], meta["uid"]))

    # --- logs ---------------------------------------------------------------------------------

    def log_target(self, namespace: str, pod: str, container: str) -> logs.LogTarget | None:
        """The live worker's log, else the newest one on disk (logs outlive their pods)."""
        # Newest first: a pod re-created under the same name must not show the old logs.
        for worker in reversed(list(self.workers.values())):
            record = worker.container(container)
            if (worker.namespace, worker.name) == (namespace, pod) and record is not None:
                target = worker

                def running(w: PodWorker = target, r: statuses.ContainerRun = record) -> bool:
                    return not w.done.is_set() and r.state != "terminated"

                return logs.LogTarget(worker.log_path(container), running)
        candidates = sorted(
            (self.state_dir / "pods").glob(f"{namespace}_{pod}_*/{container}.log"),
            key=lambda p: p.stat().st_mtime,
        )
        return logs.LogTarget(candidates[-1], lambda: False) if candidates else None


async def _amain(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    # Status writes and secret reads run in worker threads; the default pool (CPUs + 4)
    # is too small once dozens of pods change state at once.
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=32))
    guard = Guard()
    try:
        node = LocalNode(args, NodeApi(args.kubeconfig), guard)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, node.stopping.set)
        await node.run()
    finally:
        guard.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    (args.state_dir / "pods").mkdir(parents=True, exist_ok=True)
    asyncio.run(_amain(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
