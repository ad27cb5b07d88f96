"""A replicated Redis watched by Sentinel, from Debian's ``redis-server``, for tests.

Debian's ``redis-sentinel`` package only adds a service unit and a symlink:
``redis-server <config> --sentinel`` is Sentinel, so nothing else is installed.  A
:class:`SentinelGroup` is a primary and one replica (both :class:`RedisServer`, the same
ACL users and password, the replica logging in to the primary as the admin user) and
one Sentinel (quorum 1) that calls the primary down after :data:`DOWN_AFTER_MS` without
an answer and promotes the replica.  :attr:`SentinelGroup.url` is the operator's
``redis+sentinel://`` URL; :meth:`SentinelGroup.primary_port` asks the Sentinel where
the primary is now.

The Sentinel's configuration file must be writable (Sentinel rewrites it with what it
learns), so it lives in the workdir; it binds to loopback only, has no password, and
dies with the process that started it, like every component of the harness.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from e2e.controlplane.redisserver import (
    ADMIN_USER,
    OPERATOR_USER,
    REDIS_SERVER_BINARY,
    RedisServer,
    RedisServerError,
    _die_with_parent,
    _free_port,
)

SERVICE = "agentchain"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
READY_TIMEOUT_SECONDS = 15.0


def _ask(port: int, command: bytes) -> bytes:
    """One inline command to a local server without auth; its raw answer."""
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
        sock.sendall(command + b"\r\n")
        sock.settimeout(0.2)
        try:
            while chunk := sock.recv(65536):  # Until the server has nothing more to say.
                answer += chunk
        except TimeoutError:
            pass
    return answer


class SentinelGroup:
    """Primary, replica and Sentinel; a sync context manager."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.primary = RedisServer(self.workdir)
        password = self.primary.password
        follow = [
            "--replicaof", "127.0.0.1", str(self.primary.port),
            "--masteruser", ADMIN_USER, "--masterauth", password,
        ]  # fmt: skip
        # The primary gets the same flags pointing back, unused until it is a replica.
        self.primary.extra = ("--masteruser", ADMIN_USER, "--masterauth", password)
        self.replica = RedisServer(self.workdir, password=password, extra=follow)
        self.sentinel_port = _free_port()
        self._sentinel: subprocess.Popen[bytes] | None = None
        self.url = (
            f"redis+sentinel://{OPERATOR_USER}:{password}@127.0.0.1:{self.sentinel_port}"
            f"/{SERVICE}/0"
        )

    def start(self) -> SentinelGroup:
        self.primary.start()
        self.replica.start()
        self._wait(self._replicated, "the replica to sync")
        conf = self.workdir / f"sentinel-{self.sentinel_port}.conf"
        conf.write_text(
            "\n".join(
                [
                    f"port {self.sentinel_port}",
                    "bind 127.0.0.1",
                    f"dir {self.workdir}",
                    f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 1",
                    f"sentinel auth-user {SERVICE} {ADMIN_USER}",
                    f"sentinel auth-pass {SERVICE} {self.primary.password}",
                    f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
                    f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}",
                    "",
                ]
            )
        )
        log = (self.workdir / f"sentinel-{self.sentinel_port}.log").open("wb")
        with log:
            self._sentinel = subprocess.Popen(
                [REDIS_SERVER_BINARY, str(conf), "--sentinel"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self._wait(lambda: self.primary_port() == self.primary.port, "Sentinel to see it")
        # Sentinel promotes only a replica it has had INFO from (else "no-good-slave").
        self._wait(self._replica_known, "Sentinel to know the replica")
        return self

    def _replica_known(self) -> bool:
        try:
            answer = _ask(self.sentinel_port, f"SENTINEL replicas {SERVICE}".encode())
        except OSError:
            return False
        return b"master-link-status\r\n$2\r\nok" in answer

    def _replicated(self) -> bool:
        auth = f"AUTH {ADMIN_USER} {self.primary.password}".encode()
        try:
            answer = _ask(self.replica.port, auth + b"\r\nINFO replication")
        except OSError:
            return False
        return b"master_link_status:up" in answer

    def primary_port(self) -> int | None:
        """The primary's port as the Sentinel tells it now."""
        try:
            answer = _ask(
                self.sentinel_port, f"SENTINEL get-master-addr-by-name {SERVICE}".encode()
            )
        except OSError:
            return None
        lines = answer.split(b"\r\n")
        return int(lines[4]) if len(lines) > 4 and lines[4].isdigit() else None

    def _wait(self, check: object, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if check():  # type: ignore[operator]
                return
            time.sleep(0.1)
        self.stop()
        raise RedisServerError(f"timed out waiting for {what}; logs in {self.workdir}")

    def fail_over(self) -> float:
        """SIGKILL the primary; seconds until the Sentinel names the replica instead."""
        started = time.monotonic()
        self.primary.kill()
        self._wait(lambda: self.primary_port() == self.replica.port, "the failover")
        return time.monotonic() - started

    def stop(self) -> None:
        process, self._sentinel = self._sentinel, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self.replica.stop()
        self.primary.stop()

    def __enter__(self) -> SentinelGroup:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
