"""Making the Redis client (``store/connecting.py``): URLs, TLS and Sentinel, on real servers.

Aspects covered:
- ``redis+sentinel://`` URLs: several Sentinels, default port, service and db, the
  primary's credentials, Sentinel credentials and TLS options from the query; bad URLs
  refused with a sentence that never contains the password; unknown schemes refused;
- Sentinel for real (Debian's redis-server as primary, replica and Sentinel): the client
  finds the primary, and when the primary is SIGKILLed it keeps working on its own once
  the replica is promoted, with what was written before still there;
- TLS for real (``rediss://`` against a redis-server TLS port): verified against the CA
  named in the URL; a client without that CA is refused; plain text is not spoken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.controlplane import certs
from e2e.controlplane.redissentinel import SERVICE, SentinelGroup
from e2e.controlplane.redisserver import OPERATOR_USER, RedisServer
from redis.exceptions import ConnectionError as RedisConnectionError

from agentchain.store import connecting
from agentchain.store.connecting import RedisUrlError, SentinelTarget


def test_sentinel_url_with_everything() -> None:
    url = (
        "rediss+sentinel://agentchain:p%40ss@s1:26380,s2,[::1]:26381/mymaster/3"
        "?sentinel_password=sp&ssl_ca_certs=/ca.pem&ssl_check_hostname=false"
    )
    assert connecting.parse_sentinel(url) == SentinelTarget(
        sentinels=(("s1", 26380), ("s2", 26379), ("::1", 26381)),
        service="mymaster",
        db=3,
        username="agentchain",
        password="p@ss",
        tls=True,
        options={"ssl_ca_certs": "/ca.pem", "ssl_check_hostname": False},
        sentinel_auth={"password": "sp"},
    )


def test_sentinel_url_minimal() -> None:
    target = connecting.parse_sentinel("redis+sentinel://127.0.0.1/agentchain")
    assert (target.sentinels, target.service, target.db, target.tls) == (
        (("127.0.0.1", 26379),),
        "agentchain",
        0,
        False,
    )
    assert target.password is None


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("redis+sentinel://u:secret@/svc", "at least one Sentinel"),
        ("redis+sentinel://u:secret@h:1", "/<service name>"),
        ("redis+sentinel://u:secret@h:1/svc/zero", "db is not a number"),
        ("redis+sentinel://u:secret@h:one/svc", "port is not a number"),
        ("redis+sentinel://u:secret@h/svc?db=2", "unknown option"),
        ("http://u:secret@h/0", "must start with redis://"),
    ],
)
def test_bad_urls_are_refused_without_the_password(url: str, words: str) -> None:
    with pytest.raises(RedisUrlError, match=words) as caught:
        connecting.connect(url)
    assert "secret" not in str(caught.value)


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    with SentinelGroup(tmp_path) as started:
        yield started


async def test_sentinel_failover_is_followed_on_its_own(group: SentinelGroup) -> None:
    client = connecting.connect(group.url)
    try:
        await client.set("agentchain:before", b"1")
        await client.wait(1, 2000)  # Replicated before the primary dies.
        took = await asyncio.to_thread(group.fail_over)
        started = time.monotonic()
        await client.set("agentchain:after", b"2")  # Retried until the replica leads.
        assert await client.get("agentchain:before") == b"1"
        assert await client.get("agentchain:after") == b"2"
        assert time.monotonic() - started < connecting.RETRY_BUDGET_SECONDS + took
        assert group.primary_port() == group.replica.port
    finally:
        await client.aclose()


async def test_sentinel_with_a_separate_password(group: SentinelGroup) -> None:
    url = f"redis+sentinel://{OPERATOR_USER}@127.0.0.1:{group.sentinel_port}/{SERVICE}"
    client = connecting.connect(url, group.primary.password)
    try:
        assert await client.ping()
    finally:
        await client.aclose()


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[RedisServer, int, Path]]:
    pki = certs.generate(tmp_path / "pki")
    tls_port = RedisServer(tmp_path).port
    server = RedisServer(
        tmp_path,
        extra=[
            "--tls-port", str(tls_port),
            "--tls-cert-file", str(pki.node.cert),
            "--tls-key-file", str(pki.node.key),
            "--tls-ca-cert-file", str(pki.ca.cert),
            "--tls-auth-clients", "no",
        ],
    )  # fmt: skip
    with server:
        yield server, tls_port, pki.ca.cert


async def test_tls_is_verified_against_the_named_ca(
    tls_server: tuple[RedisServer, int, Path],
) -> None:
    server, port, ca = tls_server
    base = f"rediss://{OPERATOR_USER}:{server.password}@127.0.0.1:{port}/0"
    client = connecting.connect(f"{base}?ssl_ca_certs={ca}")
    try:
        assert await client.ping()
    finally:
        await client.aclose()
    untrusted = connecting.connect(base)  # The system's CAs do not know ours.
    try:
        with pytest.raises(RedisConnectionError):
            await untrusted.ping()
    finally:
        await untrusted.aclose()
    plain = connecting.connect(f"redis://{OPERATOR_USER}:{server.password}@127.0.0.1:{port}/0")
    try:
        with pytest.raises(RedisConnectionError):
            await plain.ping()
    finally:
        await plain.aclose()
