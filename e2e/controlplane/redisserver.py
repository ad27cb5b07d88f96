"""A throw-away ``redis-server`` process for tests, benchmarks and the local demo.

The project runs real components only (SPEC §9): Redis comes from Debian's
``/usr/bin/redis-server``, never from a fake. This module is the one place that knows how
to start it, so the unit-test fixture, the benchmark and the cluster harness all share
the same flags:

* ``--save "" --appendonly no``: nothing is written to disk; a test server is disposable.
* ``--bind 127.0.0.1``: never reachable from outside the machine.
* ``start_new_session=True`` plus ``PR_SET_PDEATHSIG=SIGKILL``: the server dies with the
  Python process that started it, even when that process is killed with SIGKILL and has
  no chance to run ``stop()``; otherwise crashed test runs would leak servers that hold
  ports.

Readiness is a real ``PING`` over a socket (no client library needed here), so the class
can be used from synchronous harness code as well as from async tests.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

REDIS_SERVER_BINARY = "/usr/bin/redis-server"
# How long a fresh server may take to answer PING before we give up.
STARTUP_TIMEOUT_SECONDS = 10.0
# How long stop() waits after SIGTERM before escalating to SIGKILL.
STOP_TIMEOUT_SECONDS = 5.0
# Linux prctl option number for "signal me when my parent dies" (linux/prctl.h).
_PR_SET_PDEATHSIG = 1


class RedisServerError(RuntimeError):
    """The server could not be started or did not become ready."""


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; the kernel delivers SIGKILL to the server
    # when the thread that forked it exits, so no server outlives its test session.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _pings(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """Start ``redis-server`` on localhost; usable as a (sync) context manager.

    ``url`` is ``redis://127.0.0.1:PORT/0``. When no port is given a free one is picked;
    the tiny race between picking and binding is covered by the readiness check failing
    loudly rather than by talking to somebody else's server.
    """

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = Path(workdir)
        self.port = port if port is not None else _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path = self.workdir / f"redis-{self.port}.log"

    def start(self) -> RedisServer:
        if self._process is not None:
            return self
        if shutil.which(REDIS_SERVER_BINARY) is None:
            raise RedisServerError(f"{REDIS_SERVER_BINARY} not found (apt install redis-server)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("wb") as log:
            self._process = subprocess.Popen(
                self._command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self._wait_ready()
        return self

    def _command(self) -> list[str]:
        return [
            REDIS_SERVER_BINARY,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.workdir),
        ]  # fmt: skip

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                self._process = None
                raise RedisServerError(f"redis-server exited early; see {self._log_path}")
            if _pings(self.port):
                return
            time.sleep(0.02)
        self.stop()
        raise RedisServerError(f"redis-server on port {self.port} did not answer PING")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
