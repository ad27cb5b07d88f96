"""Child processes of the local control plane that can never outlive the test session.

Every component (etcd, kube-apiserver, the controllers, the real node's) is a plain
child process. Three habits make sure none is left behind, whatever happens to pytest:

* ``start_new_session=True`` puts each component in its own process group, so a stop
  signal reaches the whole group (helpers a component forks) and a Ctrl-C in the
  terminal reaches only pytest, which then tears the cluster down in order.
* ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` in ``preexec_fn`` makes the kernel kill the
  component when the thread that started it dies, even by SIGKILL, when no Python
  cleanup can run. The kernel ties this to the *thread*, so components must be started
  from a thread that lives as long as the cluster (the main thread, in practice).
* ``stop()`` sends SIGTERM to the group, waits, then SIGKILLs the group, so a component
  that ignores SIGTERM or leaves helpers behind still disappears.

The module also holds the two small waiting helpers the harness needs (a free port and
a poll loop that notices a crashed component), because both are about child processes
and their logs, and keeping them here keeps ``cluster.py`` about the cluster.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

# Linux prctl option "signal me when my parent dies" (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
# Loaded in the parent: calling dlopen between fork and exec could deadlock on a lock
# held by another thread at fork time, while a plain call through a loaded symbol cannot.
_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
# How long stop() waits after SIGTERM before it SIGKILLs the process group.
STOP_TIMEOUT_SECONDS = 10.0
# How often wait_for() polls.
POLL_INTERVAL_SECONDS = 0.1


class StartupError(RuntimeError):
    """A component did not come up; the message names its log file."""


def _die_with_parent_of(parent_pid: int) -> Callable[[], None]:
    def preexec() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl; then no signal will ever come.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


class ManagedProcess:
    """One running component: its Popen, its log file, and an orderly stop()."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent_of(os.getpid()),
            )
        self.pid = self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> int:
        """SIGTERM the group, wait up to ``timeout``, then SIGKILL it; return the exit code."""
        self._signal_group(signal.SIGTERM)
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            code = self.popen.wait()
        # The leader is gone; anything it left in its group goes too.
        self._signal_group(signal.SIGKILL)
        return code

    def _signal_group(self, sig: signal.Signals) -> None:
        # The group id is the leader's pid (start_new_session); it is gone once empty.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start(
    name: str,
    argv: Sequence[str],
    workdir: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ManagedProcess:
    """Start ``argv`` as component ``name``, logging to ``<workdir>/logs/<name>.log``."""
    return ManagedProcess(name, argv, workdir / "logs" / f"{name}.log", env=env, cwd=cwd)


# Ports are drawn below the kernel's ephemeral range (32768-60999 by default), from which
# every process on the machine takes the local port of each outgoing connection: a port
# picked there can be taken by anyone's connect() between the pick and the bind. The
# NodePort range (30000-32767) is left to the real node. Each pytest-xdist worker draws
# from a slice of its own, so the two workers of `make test` never pick the same port.
PORT_LOW, PORT_SLICE, PORT_SLICES = 12000, 4500, 4
_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and that this process has not
    handed out before.

    The port is released before the component binds it; a collision makes that
    component fail at startup, which wait_for() reports with its log.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    low = PORT_LOW + (int(worker) if worker.isdigit() else 0) % PORT_SLICES * PORT_SLICE
    for _ in range(200):
        port = random.randrange(low, low + PORT_SLICE)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{low + PORT_SLICE - 1}")


def wait_for(
    check: Callable[[], bool],
    *,
    what: str,
    timeout: float,
    watch: Sequence[ManagedProcess] = (),
) -> float:
    """Poll ``check`` until it returns True; return the seconds it took.

    Raises StartupError with the log tail of a watched component that exits meanwhile
    (so a bad flag is reported at once, not after the timeout), or on timeout.
    """
    started = time.monotonic()
    while True:
        for process in watch:
            if not process.alive():
                raise StartupError(
                    f"{process.name} exited with code {process.popen.returncode} while "
                    f"waiting for {what}; log {process.log_path}:\n{process.log_tail()}"
                )
        if check():
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            logs = ", ".join(str(p.log_path) for p in watch)
            raise StartupError(f"timed out after {timeout:.0f}s waiting for {what}; logs: {logs}")
        time.sleep(POLL_INTERVAL_SECONDS)
