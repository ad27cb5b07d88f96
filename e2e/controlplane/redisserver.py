"""A throw-away ``redis-server`` process for tests, benchmarks and the local demo.

The project runs real components only (SPEC §9): Redis comes from Debian's
``/usr/bin/redis-server``, never from a fake. This module is the one place that knows how
to start it, so the unit-test fixture, the benchmark and the cluster harness all share
the same flags:

* ``--save "" --appendonly no``: nothing is written to disk; a test server is disposable.
* ``--bind 127.0.0.1``: never reachable from outside the machine.
* Authentication, as the chart's Redis: the ``default`` user is off, the operator's
  user ``agentchain`` has :data:`OPERATOR_ACL` (its own keys, no dangerous commands)
  and ``admin`` (for tests that inspect or flush) everything; both share a password
  generated per server. :attr:`RedisServer.url` is the operator's URL,
  :attr:`RedisServer.admin_url` the admin's.
* ``--maxmemory-policy noeviction``: as in the chart, a full Redis refuses writes
  rather than evicting a job token or a delivery record.
* ``start_new_session=True`` plus ``PR_SET_PDEATHSIG=SIGKILL``: the server dies with the
  Python process that started it, even when that process is killed with SIGKILL and has
  no chance to run ``stop()``; otherwise crashed test runs would leak servers that hold
  ports.

Readiness is a real ``PING`` over a socket (no client library needed here), so the class
can be used from synchronous harness code as well as from async tests.
"""

from __future__ import annotations

import ctypes
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

REDIS_SERVER_BINARY = "/usr/bin/redis-server"
# How long a fresh server may take to answer PING before we give up.
STARTUP_TIMEOUT_SECONDS = 10.0
# How long stop() waits after SIGTERM before escalating to SIGKILL.
STOP_TIMEOUT_SECONDS = 5.0
# The operator's ACL rules, also the chart's (tests/unit/test_chart.py compares them):
# only keys under the product's root prefix, nothing that reads or changes the server
# (CONFIG, KEYS, FLUSHALL, MONITOR, DEBUG, ... are all in @dangerous).
OPERATOR_USER = "agentchain"
OPERATOR_ACL = ("~agentchain:*", "+@all", "-@dangerous")
ADMIN_USER = "admin"
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


def _pings(port: int, password: str) -> bool:
    auth = f"AUTH {ADMIN_USER} {password}\r\nPING\r\n".encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(auth)
            answer = b""
            while answer.count(b"\r\n") < 2:
                chunk = sock.recv(64)
                if not chunk:
                    return False
                answer += chunk
            return answer == b"+OK\r\n+PONG\r\n"
    except OSError:
        return False


class RedisServer:
    """Start ``redis-server`` on localhost; usable as a (sync) context manager.

    ``url`` is ``redis://agentchain:PASSWORD@127.0.0.1:PORT/0``. When no port is given a
    free one is picked; the tiny race between picking and binding is covered by the
    readiness check failing loudly rather than by talking to somebody else's server.
    """

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        password: str | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        """``password`` shares one with another server (a replica: ``redissentinel.py``);
        ``extra`` are more ``redis-server`` flags (``--replicaof``, TLS)."""
        self.workdir = Path(workdir)
        self.port = port if port is not None else _free_port()
        self.password = password or secrets.token_urlsafe(24)
        self.extra = tuple(extra)
        self.url = f"redis://{OPERATOR_USER}:{self.password}@127.0.0.1:{self.port}/0"
        self.admin_url = f"redis://{ADMIN_USER}:{self.password}@127.0.0.1:{self.port}/0"
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
            "--maxmemory-policy", "noeviction",
            "--aclfile", str(self._write_acl()),
            *self.extra,
        ]  # fmt: skip

    def _write_acl(self) -> Path:
        """The users, in a file only we can read: the password stays out of ``ps``."""
        path = self.workdir / f"redis-{self.port}.acl"
        lines = [
            "user default off resetpass",
            " ".join(["user", OPERATOR_USER, "on", f">{self.password}", *OPERATOR_ACL]),
            # &*: the admin may also use Pub/Sub (Sentinel talks through __sentinel__:hello).
            f"user {ADMIN_USER} on >{self.password} ~* &* +@all",
        ]
        path.touch(mode=0o600)
        path.write_text("\n".join(lines) + "\n")
        return path

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                self._process = None
                raise RedisServerError(f"redis-server exited early; see {self._log_path}")
            if _pings(self.port, self.password):
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

    def kill(self) -> None:
        """SIGKILL, as a crashed primary: nothing is flushed, clients see a reset."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
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
