"""One pod on the local node: its containers as process groups, and its status.

A `PodWorker` owns a pod from the moment it is bound to this node until it is deleted.
Its `main` coroutine is the whole lifecycle: init containers one after another, then the
main containers side by side, each restarted in place when `restartPolicy` says so.
Every change of a container is reported at once (the product measures the time from a
container's exit to the next pod), and all reports of a pod go through one lock so that
the API server sees them in order.

Stopping (pod deletion, `activeDeadlineSeconds`, node shutdown) goes through `stop`:
SIGTERM to each process group, SIGKILL after the grace period; the container loops then
see their processes end and do not restart them.

Children start in their own session (so a whole process tree can be signalled) and with
PR_SET_PDEATHSIG; the fork must happen in the event loop's thread, because the death
signal fires when the *thread* that forked exits. The death signal reaches only the first
process, so each process group is also registered with the node's `Guard`, which kills
the groups left behind by a node that died without cleaning up. Between fork and exec
the child also enters a mount namespace of its own with the container's volumes
(`localnode_volumes`); what those need from the API (Secrets, ConfigMaps, the directory of
a bound claim, service-account tokens) is fetched before each start.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from e2e.controlplane import localnode_env as envs
from e2e.controlplane import localnode_status as statuses
from e2e.controlplane import localnode_volumes as volumes
from e2e.controlplane.localnode_guard import Guard
from e2e.controlplane.localnode_kube import NodeApi

log = logging.getLogger("localnode")

PR_SET_PDEATHSIG = 1
MAX_GRACE_SECONDS = 5.0
CONFIG_RETRY_SECONDS = 2.0
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
Json = Mapping[str, Any]
Prepared = tuple[envs.Launch, list[volumes.Mount]]
"""What a container starts with: argv/env/working directory, and its volume mounts."""


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the child when the node (the forking thread) dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _preexec(mounts: Sequence[volumes.Mount]) -> Callable[[], None]:
    """preexec_fn: die with the node and, when the container mounts volumes, see them."""

    def run() -> None:
        _die_with_parent()
        if mounts:
            try:
                volumes.enter_mounts(mounts)
            except OSError as exc:  # The parent only learns that preexec_fn failed.
                os.write(2, f"localnode: {exc}\n".encode())
                raise

    return run


def exit_code(returncode: int) -> int:
    """Shell convention for signals (128 + n), as container runtimes report them."""
    return 128 - returncode if returncode < 0 else returncode


def should_restart(policy: str, code: int) -> bool:
    return policy == "Always" or (policy == "OnFailure" and code != 0)


def restart_delay(restart_count: int) -> float:
    """The kubelet backs off from 10 s to 5 min; tests need quick restarts, so far less."""
    return float(min(0.25 * 2**restart_count, 5.0))


class PodWorker:
    """Runs one pod's containers and reports its status."""

    def __init__(
        self,
        pod: Json,
        api: NodeApi,
        guard: Guard,
        state_dir: Path,
        base_env: Mapping[str, str],
        hide: Sequence[Path] = (),
    ) -> None:
        self.pod = pod
        self.hide = [state_dir / "pods", *hide]
        self.api = api
        self.guard = guard
        self.base_env = dict(base_env)
        meta, spec = pod["metadata"], pod["spec"]
        self.namespace, self.name, self.uid = meta["namespace"], meta["name"], meta["uid"]
        self.policy = str(spec.get("restartPolicy") or "Always")
        self.log_dir = state_dir / "pods" / f"{self.namespace}_{self.name}_{self.uid}"
        self.volume_dir = self.log_dir / "volumes"
        self.run = statuses.PodRun(
            init=[self._record(c) for c in spec.get("initContainers") or []],
            main=[self._record(c) for c in spec.get("containers") or []],
        )
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.stopped = asyncio.Event()
        self.done = asyncio.Event()
        self._report_lock = asyncio.Lock()
        self.deleting = False

    @staticmethod
    def _record(container: Json) -> statuses.ContainerRun:
        return statuses.ContainerRun(name=container["name"], image=container.get("image", ""))

    def container(self, name: str) -> statuses.ContainerRun | None:
        return next((c for c in self.run.init + self.run.main if c.name == name), None)

    def log_path(self, container: str) -> Path:
        return self.log_dir / f"{container}.log"

    # --- lifecycle ----------------------------------------------------------------------

    async def main(self) -> None:
        """The pod's whole life on this node; never raises (one bad pod must not hurt)."""
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            await self._report()
            deadline = asyncio.create_task(self._enforce_deadline())
            try:
                if await self._run_init():
                    specs = self.pod["spec"]["containers"]
                    await asyncio.gather(
                        *(self._loop(r, s) for r, s in zip(self.run.main, specs, strict=True))
                    )
            finally:
                deadline.cancel()
            self._settle()
            if self.run.reason:
                # Stopped by the node itself (activeDeadlineSeconds): the pod failed, whatever
                # its containers' exit codes.
                self.run.phase = "Failed"
            await self._report()
        except Exception:
            log.exception("pod %s/%s failed on the node", self.namespace, self.name)
        finally:
            self.done.set()

    async def _run_init(self) -> bool:
        """Init containers in order; False when one failed for good or the pod stopped."""
        for record, spec in zip(
            self.run.init, self.pod["spec"].get("initContainers") or [], strict=True
        ):
            await self._loop(record, spec)
            if not record.succeeded:
                return False
        return not self.stopped.is_set()

    def _settle(self) -> None:
        """Containers that never got to run are reported terminated, as the kubelet does."""
        for record in self.run.main:
            if record.state != "terminated":
                record.finish(137, "ContainerStatusUnknown", "The container never ran")

    async def _loop(self, record: statuses.ContainerRun, spec: Json) -> None:
        """Run one container, restarting it in place while the restart policy says so."""
        while not self.stopped.is_set():
            launch = await self._wait_for_config(record, spec)
            if launch is None:
                return
            await self._run_once(record, spec, launch)
            if self.stopped.is_set() or not should_restart(self.policy, record.exit_code or 0):
                await self._report()
                return
            record.restart()
            record.wait("CrashLoopBackOff", "back-off restarting failed container")
            await self._report()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopped.wait(), restart_delay(record.restart_count))

    async def _wait_for_config(self, record: statuses.ContainerRun, spec: Json) -> Prepared | None:
        """Build argv/env and volumes; while a referenced Secret/ConfigMap is missing,
        wait and retry."""
        while not self.stopped.is_set():
            try:
                return await self._launch(spec)
            except envs.EnvError as exc:
                record.wait("CreateContainerConfigError", str(exc))
                await self._report()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopped.wait(), CONFIG_RETRY_SECONDS)
        return None

    async def _launch(self, spec: Json) -> Prepared:
        secret_names, map_names = envs.referenced_objects([spec])
        volume_secrets, volume_maps = volumes.referenced_objects(self.pod, spec)
        secrets, maps = await self.api.read_data(
            self.namespace, secret_names | volume_secrets, map_names | volume_maps
        )
        launch = envs.build_launch(self.pod, spec, secrets, maps, self.base_env)
        context = volumes.Context(
            pod=self.pod,
            claims=await self.api.claim_directories(
                self.namespace, volumes.referenced_claims(self.pod, spec)
            ),
            tokens=await self._tokens(volumes.referenced_tokens(self.pod, spec)),
        )
        # Other pods' volumes (their Secrets' files, the claims' directories) are covered.
        mounts = volumes.materialise(
            self.pod, spec, self.volume_dir, secrets, maps, context, self.hide
        )
        return launch, mounts

    async def _tokens(self, keys: set[volumes.TokenKey]) -> dict[volumes.TokenKey, str]:
        """Service-account tokens bound to this pod, one per (audience, lifetime)."""
        account = str(self.pod["spec"].get("serviceAccountName") or "default")
        return {
            key: await self.api.request_token(self.namespace, account, key, self.name, self.uid)
            for key in sorted(keys)
        }

    async def _run_once(
        self, record: statuses.ContainerRun, spec: Json, prepared: Prepared
    ) -> None:
        proc = await self._spawn(record, *prepared)
        if proc is None:
            return
        self.procs[record.name] = proc
        self.guard.track(proc.pid)
        record.start(proc.pid)
        await self._report()
        returncode = await proc.wait()
        # A container ends with its first process: whatever it left running dies with it,
        # as the runtime tears down the container's cgroup.
        _signal_group(proc.pid, signal.SIGKILL)
        self.guard.untrack(proc.pid)
        self.procs.pop(record.name, None)
        record.finish(exit_code(returncode))

    async def _spawn(
        self, record: statuses.ContainerRun, launch: envs.Launch, mounts: list[volumes.Mount]
    ) -> asyncio.subprocess.Process | None:
        """Start the process; a command that cannot start ends as ContainerCannotRun."""
        if not launch.argv:
            record.finish(127, "ContainerCannotRun", "no command: the image is ignored here")
            return None
        try:
            if launch.working_dir:
                Path(launch.working_dir).mkdir(parents=True, exist_ok=True)
            with self.log_path(record.name).open("ab") as out:
                return await asyncio.create_subprocess_exec(
                    *launch.argv,
                    env=launch.env,
                    cwd=launch.working_dir,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_preexec(mounts),
                )
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            record.finish(code, "ContainerCannotRun", f"failed to start {launch.argv[0]!r}: {exc}")
            return None
        except subprocess.SubprocessError as exc:  # What a failing preexec_fn raises.
            where = volumes.describe(mounts)
            record.finish(126, "ContainerCannotRun", f"mounting volumes ({where}) failed: {exc}")
            return None

    # --- reporting ----------------------------------------------------------------------

    async def _report(self) -> None:
        """Send the current status; the phase never leaves a terminal value once reached."""
        async with self._report_lock:
            if self.run.phase not in ("Succeeded", "Failed"):
                self.run.phase = statuses.decide_phase(self.run, self.policy)
            try:
                status = statuses.pod_status(self.run)
                await self.api.patch_pod_status(self.namespace, self.name, status)
            except Exception:
                log.exception("status update of %s/%s failed", self.namespace, self.name)

    # --- stopping -------------------------------------------------------------------------

    async def _enforce_deadline(self) -> None:
        seconds = self.pod["spec"].get("activeDeadlineSeconds")
        if seconds is None:
            return
        await asyncio.sleep(float(seconds))
        log.info("pod %s/%s exceeded activeDeadlineSeconds", self.namespace, self.name)
        self.run.reason, self.run.message = "DeadlineExceeded", DEADLINE_MESSAGE
        await self.stop(MAX_GRACE_SECONDS)

    async def stop(self, grace: float) -> None:
        """SIGTERM every process group, SIGKILL what is left after `grace` seconds."""
        self.stopped.set()
        procs = list(self.procs.values())
        for proc in procs:
            _signal_group(proc.pid, signal.SIGTERM)
        waiting = [asyncio.create_task(proc.wait()) for proc in procs]
        if waiting:
            _, pending = await asyncio.wait(waiting, timeout=min(grace, MAX_GRACE_SECONDS))
            if pending:
                for proc in procs:
                    _signal_group(proc.pid, signal.SIGKILL)
                await asyncio.wait(pending)

    async def delete(self, grace: float) -> None:
        """The pod is being deleted: stop it, report the end, then let the deletion finish."""
        if self.deleting:
            return
        self.deleting = True
        await self.stop(grace)
        await self.done.wait()
        # Volumes go with the pod, as the kubelet unmounts them; the logs stay.
        shutil.rmtree(self.volume_dir, ignore_errors=True)
        await self.api.delete_pod_now(self.namespace, self.name, self.uid)

    def kill_now(self) -> None:
        """Node shutdown: no grace, no reporting."""
        self.stopped.set()
        for proc in self.procs.values():
            _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
