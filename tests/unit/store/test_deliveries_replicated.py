"""A delivery answered 202 survives a Redis failover (``webhook_min_replicas``, issue 20).

Against real servers (Debian's redis-server: a primary, its replica and a Sentinel).

Aspects covered: with ``min_replicas`` a batch's accepts are followed by ``WAIT`` on the
same connection, and a first claim that the replica confirmed is accepted; with the
replica gone the first claim raises :class:`NotReplicated` after the timeout, its record
stays on the primary, and a redelivery is recognised as one (nothing is queued twice);
without ``min_replicas`` nothing waits, replica or not.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.controlplane.redissentinel import SentinelGroup

from agentchain.store import connecting
from agentchain.store.deliveries import DeliveryLog, NotReplicated, QueuedJob
from agentchain.store.signing import OperatorKeys

KEYS = OperatorKeys(["test-operator-key"])


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    with SentinelGroup(tmp_path) as started:
        yield started


def _job(name: str) -> list[QueuedJob]:
    return [QueuedJob("ns", name, {"metadata": {"name": name, "namespace": "ns"}})]


async def test_a_delivery_is_accepted_only_once_a_replica_has_it(group: SentinelGroup) -> None:
    client = connecting.connect(group.url)
    try:
        log = DeliveryLog(client, KEYS, min_replicas=1, replica_timeout_ms=500)
        assert await log.accept("d1", "sha-1", _job("a")) == (True, ["ns/a"])
        unwaited = DeliveryLog(client, KEYS)
        group.replica.stop()
        started = time.monotonic()
        with pytest.raises(NotReplicated) as refused:
            await log.accept("d2", "sha-2", _job("b"))
        assert (refused.value.acked, refused.value.wanted) == (0, 1)
        assert time.monotonic() - started >= 0.45  # It waited for the replica, in vain.
        # Queued on the primary all the same: the redelivery finds it, queues nothing.
        assert await log.accept("d2", "sha-2", _job("b")) == (False, ["ns/b"])
        started = time.monotonic()
        assert await unwaited.accept("d3", "sha-3", _job("c")) == (True, ["ns/c"])
        assert time.monotonic() - started < 0.4  # No WAIT without min_replicas.
    finally:
        await client.aclose()
