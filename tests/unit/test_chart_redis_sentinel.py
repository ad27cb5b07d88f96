"""The chart's bundled Redis in Sentinel mode (issue 20): rendered objects, and pod 0's
Redis start script run for real against Debian's redis-server.

Aspects covered:
* off by default (the single Redis Deployment); on, a StatefulSet of 3 pods with a Redis
  and a Sentinel container each, a headless Service publishing not-ready pods, one PVC
  per pod, and no single-instance Deployment or Service left;
* the operator's URL is ``redis+sentinel://`` naming every pod's Sentinel by its DNS name
  and the master name, with the user but never the password, and it parses;
* authentication everywhere from the one Secret: the Sentinels' requirepass,
  sentinel-pass, auth-user/auth-pass, masteruser/masterauth, and the operator logs in to
  the Sentinels with the same password file;
* the NetworkPolicy lets the operator reach Redis and Sentinel, the pods reach each other
  on both ports, and DNS; nothing else;
* the values schema refuses fewer than 3 pods, and a quorum above the pod count fails;
* pod 0's Sentinel start script, run as is, monitors the primary logged in as the
  sentinel user, refuses clients without its password, and leads the operator's own
  client (store/connecting.py, the chart's URL form, password from the file) to the
  primary;
* pods 0 and 1's start scripts, run as is (no Sentinel to ask), start a primary and its
  replica, which syncs with the replication user (masteruser/masterauth); the ACL files
  hold digests only; the replication and sentinel users may not read data.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from e2e import charting
from redis.exceptions import NoPermissionError

from agentchain.store import connecting

pytestmark = pytest.mark.skipif(
    charting.helm_binary() is None, reason="helm could not be built (build-binaries.sh helm)"
)

NAME = "agentchain-redis"
HEADLESS = "agentchain-redis-headless"
SENTINEL = "redis.sentinel.enabled=true"


def _containers(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    spec = charting.only(manifests, "StatefulSet", NAME)["spec"]["template"]["spec"]
    return {c["name"]: c for c in spec["containers"]}


def _env(manifests: list[dict[str, Any]]) -> dict[str, str]:
    deployment = charting.only(manifests, "Deployment", "agentchain")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_off_by_default() -> None:
    manifests = charting.render()
    assert not [m for m in manifests if m["kind"] == "StatefulSet"]
    charting.only(manifests, "Deployment", NAME)
    assert _env(manifests)["AGENTCHAIN_REDIS_URL"].startswith("redis://agentchain@")


def test_statefulset_of_three_with_redis_and_sentinel() -> None:
    manifests = charting.render(SENTINEL)
    statefulset = charting.only(manifests, "StatefulSet", NAME)
    assert statefulset["spec"]["replicas"] == 3
    assert statefulset["spec"]["serviceName"] == HEADLESS
    assert set(_containers(manifests)) == {"redis", "sentinel"}
    claims = statefulset["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["data"]
    headless = charting.only(manifests, "Service", HEADLESS)["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"]
    assert {p["port"] for p in headless["ports"]} == {6379, 26379}
    assert not [m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"] == NAME]
    assert not [m for m in manifests if m["kind"] == "PersistentVolumeClaim"]


def test_operator_url_names_every_sentinel_and_no_password() -> None:
    manifests = charting.render(SENTINEL, "redis.sentinel.replicas=5")
    env = _env(manifests)
    target = connecting.parse_sentinel(env["AGENTCHAIN_REDIS_URL"])
    assert target.sentinels == tuple(
        (f"{NAME}-{i}.{HEADLESS}.{charting.NAMESPACE}.svc", 26379) for i in range(5)
    )
    assert (target.service, target.db, target.username, target.password) == (
        "agentchain",
        0,
        "agentchain",
        None,
    )
    assert target.sentinel_auth == {"username": "default"}
    assert env["AGENTCHAIN_REDIS_PASSWORD_FILE"] == "/etc/agentchain/redis/redis-password"


def test_with_sentinels_a_delivery_waits_for_a_replica() -> None:
    assert _env(charting.render(SENTINEL))["AGENTCHAIN_WEBHOOK_MIN_REPLICAS"] == "1"
    single = _env(charting.render())
    assert single["AGENTCHAIN_WEBHOOK_MIN_REPLICAS"] == "0"  # No replica to wait for.


def test_sentinel_login_takes_the_separate_password() -> None:
    login = connecting._sentinel_login
    assert login({"username": "default"}, "pw") == {"username": "default", "password": "pw"}
    assert login({"username": "u", "password": "own"}, "pw") == {"username": "u", "password": "own"}
    assert login({}, "pw") == {}
    assert login({"username": "default"}, None) == {"username": "default"}


def test_authentication_everywhere() -> None:
    containers = _containers(charting.render(SENTINEL, "redis.sentinel.quorum=3"))
    redis_script = containers["redis"]["args"][-1]
    for words in ("masteruser replication", "masterauth", "default off", "replica-announce-ip"):
        assert words in redis_script
    sentinel_script = containers["sentinel"]["args"][-1]
    for words in (
        "requirepass",
        "sentinel sentinel-pass",
        "sentinel auth-user agentchain sentinel",
        "sentinel auth-pass agentchain",
        "6379 3",
        "sentinel announce-hostnames yes",
    ):
        assert words in sentinel_script
    for container in containers.values():
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts["auth"] == "/etc/redis-auth"
        assert "REDISCLI_AUTH" in container["readinessProbe"]["exec"]["command"][-1]


def test_network_policy_covers_sentinel_and_nothing_more() -> None:
    policy = charting.only(charting.render(SENTINEL), "NetworkPolicy", NAME)["spec"]
    components = [
        rule["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
        for rule in policy["ingress"]
    ]
    assert components == ["operator", "redis"]
    for rule in policy["ingress"]:
        assert {p["port"] for p in rule["ports"]} == {"redis", "sentinel"}
    to_pods, dns = policy["egress"]
    assert {p["port"] for p in to_pods["ports"]} == {6379, 26379}
    assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {(53, "UDP"), (53, "TCP")}
    single = charting.only(charting.render(), "NetworkPolicy", NAME)["spec"]
    assert single["egress"] == [] and len(single["ingress"]) == 1


@pytest.mark.parametrize("setting", ["redis.sentinel.replicas=2", "redis.sentinel.quorum=4"])
def test_too_few_pods_refused(setting: str) -> None:
    result = charting.helm(
        "template", "x", str(charting.CHART), "--set", SENTINEL, "--set", setting, check=False
    )
    assert result.returncode != 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Pod:
    """One pod's Redis start script, run as is with its paths and port moved."""

    def __init__(self, workdir: Path, script: str, ordinal: int, primary_port: int) -> None:
        self.port = _free_port() if ordinal else primary_port
        where = f"--dir {workdir} --port {self.port} --bind 127.0.0.1 --save ''"
        follow = ("'replicaof %s 6379\\n' \"$master\"", f"'replicaof 127.0.0.1 {primary_port}\\n'")
        workdir.mkdir()
        script = (
            script.replace("/tmp/users.acl", f"{workdir}/users.acl")
            .replace("/tmp/redis.conf", f"{workdir}/redis.conf")
            .replace("/etc/redis-auth/", f"{workdir.parent}/auth/")
            .replace("--dir /data", where)
            .replace("$(hostname)", f"{NAME}-{ordinal}")
            .replace(*follow)
        )
        self.workdir = workdir
        self.log = (workdir / "redis.log").open("wb")
        self.process = subprocess.Popen(
            ["sh", "-c", script], stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def client(self, user: str, password: str) -> redis.Redis:
        return redis.Redis(port=self.port, username=user, password=password, socket_timeout=5)

    def wait(self, password: str) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                with self.client("agentchain", password) as client:
                    client.ping()
                return
            except redis.ConnectionError:
                assert self.process.poll() is None, (self.workdir / "redis.log").read_text()
                assert time.monotonic() < deadline, "Redis never answered"
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()


def test_first_pod_is_primary_second_replicates_with_scoped_users(tmp_path: Path) -> None:
    manifests = charting.render(SENTINEL, "redis.maxmemory=32mb")
    password = base64.b64decode(
        charting.only(manifests, "Secret", NAME)["data"]["redis-password"]
    ).decode()
    (tmp_path / "auth").mkdir()
    (tmp_path / "auth" / "redis-password").write_text(password)
    script = _containers(manifests)["redis"]["args"][-1]
    primary_port = _free_port()
    pods = []
    try:
        for ordinal in (0, 1):
            pods.append(Pod(tmp_path / f"pod{ordinal}", script, ordinal, primary_port))
            pods[-1].wait(password)
        _check_users(pods, password)
    finally:
        for pod in pods:
            pod.stop()


def _check_users(pods: list[Pod], password: str) -> None:
    primary, replica = pods
    with primary.client("agentchain", password) as operator:
        assert operator.set("agentchain:k", "v")
    for user in ("replication", "sentinel"):
        with primary.client(user, password) as other:
            other.ping()
            with pytest.raises(NoPermissionError):
                other.get("agentchain:k")
    with primary.client("sentinel", password) as sentinel:
        assert sentinel.execute_command("ROLE")[0] == b"master"
    deadline = time.monotonic() + 20
    with replica.client("agentchain", password) as reader:
        while reader.get("agentchain:k") != b"v":
            assert time.monotonic() < deadline, (replica.workdir / "redis.log").read_text()
            time.sleep(0.1)
    for pod in pods:
        assert password not in (pod.workdir / "users.acl").read_text()
        assert (pod.workdir / "redis.conf").stat().st_mode & 0o077 == 0


def _sentinel(workdir: Path, script: str, primary_port: int) -> tuple[int, subprocess.Popen[bytes]]:
    """Pod 0's Sentinel start script, run as is with paths, ports and DNS waits moved."""
    port = _free_port()
    workdir.mkdir()
    script = (
        script.replace("/etc/redis-auth/", f"{workdir.parent}/auth/")
        .replace("/sentinel/", f"{workdir}/")
        .replace("dir /sentinel'", f"dir {workdir}'")
        .replace("'port 26379'", f"'port {port}' 'bind 127.0.0.1'")
        .replace("$(hostname)", f"{NAME}-0")
        .replace("$master 6379", f"127.0.0.1 {primary_port}")
        .replace("nslookup", "true")  # No cluster DNS here: every name "resolves".
    )
    log = (workdir / "sentinel.log").open("wb")
    process = subprocess.Popen(
        ["sh", "-c", script], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    log.close()
    return port, process


def _master_flags(client: redis.Redis) -> bytes | None:
    try:
        master = client.execute_command("SENTINEL", "MASTER", "agentchain")  # type: ignore[no-untyped-call]
    except redis.ConnectionError:
        return None
    fields = dict(zip(master[::2], master[1::2], strict=True))
    # INFO answered lately: the sentinel user logged in (a ping alone passes without).
    logged_in = int(fields[b"info-refresh"]) < 10_000
    flags: bytes = fields[b"flags"] if logged_in else b"not logged in"
    return flags


async def _through_operator_url(url: str, password: str) -> bytes | None:
    client = connecting.connect(url, password)
    try:
        await client.set("agentchain:via-sentinel", "yes")
        value: bytes | None = await client.get("agentchain:via-sentinel")
        return value
    finally:
        await client.aclose()


def test_sentinel_requires_its_login_and_leads_the_operator_to_the_primary(
    tmp_path: Path,
) -> None:
    manifests = charting.render(SENTINEL)
    password = base64.b64decode(
        charting.only(manifests, "Secret", NAME)["data"]["redis-password"]
    ).decode()
    (tmp_path / "auth").mkdir()
    (tmp_path / "auth" / "redis-password").write_text(password)
    containers = _containers(manifests)
    primary = Pod(tmp_path / "pod0", containers["redis"]["args"][-1], 0, _free_port())
    port, sentinel = _sentinel(
        tmp_path / "sentinel0", containers["sentinel"]["args"][-1], primary.port
    )
    try:
        primary.wait(password)
        deadline = time.monotonic() + 20
        with redis.Redis(port=port, password=password, socket_timeout=5) as client:
            # "master" alone: reached and logged in as the sentinel user, not down.
            while (flags := _master_flags(client)) != b"master":
                log = (tmp_path / "sentinel0" / "sentinel.log").read_text()
                assert sentinel.poll() is None, log
                assert time.monotonic() < deadline, f"flags {flags!r}: {log}"
                time.sleep(0.1)
        with redis.Redis(port=port, socket_timeout=5) as stranger:
            with pytest.raises(redis.AuthenticationError):
                stranger.execute_command("SENTINEL", "MASTERS")
        url = f"redis+sentinel://agentchain@127.0.0.1:{port}/agentchain/0?sentinel_username=default"
        assert asyncio.run(_through_operator_url(url, password)) == b"yes"
    finally:
        primary.stop()
        if sentinel.poll() is None:
            os.killpg(sentinel.pid, signal.SIGKILL)
        sentinel.wait()


@pytest.mark.parametrize("container", ["redis", "sentinel"])
@pytest.mark.parametrize("password", ['pass"word', "two words", "new\nline", ""])
def test_a_password_that_is_not_letters_and_digits_stops_the_pod_with_a_reason(
    tmp_path: Path, container: str, password: str
) -> None:
    """Such a password would be spliced into a redis.conf/sentinel.conf line: refused."""
    script = _containers(charting.render(SENTINEL))[container]["args"][-1]
    (tmp_path / "auth").mkdir()
    (tmp_path / "auth" / "redis-password").write_text(password)
    script = script.replace("/etc/redis-auth/", f"{tmp_path}/auth/")
    result = subprocess.run(["sh", "-c", script], capture_output=True, timeout=30, check=False)
    assert result.returncode == 1
    assert b"must be letters and digits only" in result.stderr


def test_redis_pods_have_a_disruption_budget_of_one() -> None:
    budget = charting.only(charting.render(SENTINEL), "PodDisruptionBudget", NAME)["spec"]
    assert budget["maxUnavailable"] == 1
    labels = charting.only(charting.render(SENTINEL), "StatefulSet", NAME)["spec"]["selector"]
    assert budget["selector"] == labels
