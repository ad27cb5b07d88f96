"""The chart's bundled Redis, started by its own script against Debian's redis-server.

Aspects covered (issue 14: Redis was open to every pod):
* the start script from the rendered Deployment, run as is (paths moved to a temp dir),
  lets the operator's ACL user in with the password from the chart's Secret, and only
  it: no login without a password, with the default user or a wrong password;
* that user reaches only the product's keys and no server-wide command (CONFIG, KEYS,
  FLUSHALL, MONITOR);
* the ACL file it writes holds the password's sha256, never the password;
* the readiness probe's command answers once Redis is up;
* under ``maxmemory`` the policy is noeviction: a full Redis refuses writes and keeps
  every key, including keys with a TTL (job token digests, delivery records).
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from e2e import charting
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

pytestmark = pytest.mark.skipif(
    charting.helm_binary() is None, reason="helm could not be built (build-binaries.sh helm)"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ChartRedis:
    def __init__(self, workdir: Path) -> None:
        manifests = charting.render("redis.maxmemory=32mb")
        deployment = charting.only(manifests, "Deployment", "agentchain-redis")
        container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
        secret = charting.only(manifests, "Secret", "agentchain-redis")
        self.password = base64.b64decode(secret["data"]["redis-password"]).decode()
        self.port = _free_port()
        self.workdir = workdir
        auth = workdir / "auth"
        auth.mkdir()
        (auth / "redis-password").write_text(self.password)
        self.acl = workdir / "users.acl"
        self.script = self._moved(container["args"][-1]).replace(
            "exec redis-server",
            f"exec redis-server --port {self.port} --bind 127.0.0.1 --save ''",
        )
        self.probe = self._moved(container["readinessProbe"]["exec"]["command"][-1])
        self.probe = self.probe.replace("redis-cli", f"redis-cli -p {self.port}")

    def _moved(self, text: str) -> str:
        text = text.replace("/etc/redis-auth/", f"{self.workdir}/auth/")
        text = text.replace("/tmp/users.acl", str(self.acl))
        return text.replace("--dir /data", f"--dir {self.workdir}")

    def client(self, **auth: str) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, **auth)  # type: ignore[arg-type]

    def operator(self) -> redis.Redis:
        return self.client(username="agentchain", password=self.password)


@pytest.fixture
def chart_redis(tmp_path: Path) -> Iterator[ChartRedis]:
    server = ChartRedis(tmp_path)
    log = (tmp_path / "redis.log").open("wb")
    process = subprocess.Popen(
        ["sh", "-c", server.script], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(
            ["sh", "-c", server.probe], capture_output=True, check=False
        ).returncode:
            assert process.poll() is None, (tmp_path / "redis.log").read_text()
            assert time.monotonic() < deadline, "the readiness probe never passed"
            time.sleep(0.05)
        yield server
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        log.close()


def test_only_the_operators_user_with_the_password_gets_in(chart_redis: ChartRedis) -> None:
    with chart_redis.operator() as client:
        assert client.set("agentchain:token:abc", "1")
    for auth in ({}, {"username": "default", "password": ""}, {"password": chart_redis.password}):
        with (
            chart_redis.client(**auth) as stranger,
            pytest.raises((AuthenticationError, ResponseError)),
        ):
            stranger.get("agentchain:token:abc")
    with chart_redis.client(username="agentchain", password="wrong") as guess:
        with pytest.raises(AuthenticationError):
            guess.get("agentchain:token:abc")


def test_the_operators_user_has_its_own_keys_and_no_server_commands(
    chart_redis: ChartRedis,
) -> None:
    with chart_redis.operator() as client:
        with pytest.raises(NoPermissionError):
            client.set("someone-else:key", "1")
        for command in (("CONFIG", "GET", "*"), ("KEYS", "*"), ("FLUSHALL",), ("MONITOR",)):
            with pytest.raises(NoPermissionError):
                client.execute_command(*command)


def test_the_acl_file_holds_no_password(chart_redis: ChartRedis) -> None:
    text = chart_redis.acl.read_text()
    assert chart_redis.password not in text and "user default off" in text
    assert chart_redis.acl.stat().st_mode & 0o077 == 0


def test_a_full_redis_refuses_writes_and_evicts_nothing(chart_redis: ChartRedis) -> None:
    with chart_redis.operator() as client:
        client.set("agentchain:token:live", "scope", ex=3600)
        client.set("agentchain:delivery:id:d", "record", ex=3600)
        chunk = b"x" * (1024 * 1024)
        with pytest.raises(ResponseError, match="maxmemory"):
            for n in range(64):
                client.set(f"agentchain:ctx:entry:{n}", chunk, ex=3600)
        assert client.get("agentchain:token:live") == b"scope"
        assert client.get("agentchain:delivery:id:d") == b"record"
        assert client.exists("agentchain:ctx:entry:0") == 1
