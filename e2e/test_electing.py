"""The leader elector (``kube/electing.py``) against the real API server, in-process.

Two electors share one Lease in ``agentchain-system``, as the operator's ServiceAccount
(so the chart's Lease Role is all they need), with short timings (lease 2 s, renew
deadline 1.5 s, retry 0.4 s) so each case takes seconds.

Aspects covered:
- one leader at a time: while the first renews, the second campaigns in vain for
  longer than a lease;
- a clean stop releases the Lease: the follower leads within about a retry period, and
  the Lease records the new holder and one more transition;
- a silent leader (stopped renewing, as if frozen) is replaced only after its own fence
  closed, never before; when it renews again it finds another holder, gives up at once
  and says so (``on_lost``).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import AsyncIterator

import pytest

from agentchain.kube import clients, electing, leases
from agentchain.kube.rules.leadership import Timing
from e2e import operating
from e2e.controlplane.cluster import ClusterInfo

TIMING = Timing(2.0, 1.5, 0.4)
NAMESPACE = operating.SYSTEM_NAMESPACE


@pytest.fixture
async def as_operator(installed: ClusterInfo) -> AsyncIterator[str]:
    """``agentchain.kube`` logged in as the operator's ServiceAccount; a fresh Lease name."""
    kubeconfig = operating.operator_kubeconfig(installed, installed.workdir / "elector.kubeconfig")
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(kubeconfig)
    clients.reset()
    try:
        yield f"elector-{secrets.token_hex(3)}"
    finally:
        await clients.close()
        clients.reset()
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous


async def test_one_leader_and_a_clean_handover(as_operator: str) -> None:
    first = electing.Elector(NAMESPACE, as_operator, "first", TIMING)
    second = electing.Elector(NAMESPACE, as_operator, "second", TIMING)
    await asyncio.wait_for(first.campaign(), 5)
    holding = asyncio.create_task(first.hold())
    campaign = asyncio.create_task(second.campaign())
    # Watched from a thread, so the holder's renewals and the campaign run meanwhile.
    await asyncio.to_thread(
        operating.stays,
        lambda: not campaign.done() and first.fence() and not second.fence(),
        seconds=TIMING.lease_duration * 1.5,
        interval=0.05,
        what="the first holder alone leading",
    )
    holding.cancel()
    await first.release()
    released = time.monotonic()
    await asyncio.wait_for(campaign, 5)
    assert time.monotonic() - released < TIMING.retry_period * 1.2 + 0.5
    assert second.fence() and not first.fence()
    lease = await leases.read(NAMESPACE, as_operator, timeout=5)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "second"
    assert lease["spec"]["leaseTransitions"] == 1


async def test_a_silent_leader_is_replaced_only_after_its_fence_closed(as_operator: str) -> None:
    first = electing.Elector(NAMESPACE, as_operator, "first", TIMING)
    second = electing.Elector(NAMESPACE, as_operator, "second", TIMING)
    await asyncio.wait_for(first.campaign(), 5)
    fence_closed: list[float] = []

    async def watch_fence() -> None:
        while first.fence():
            await asyncio.sleep(0.01)
        fence_closed.append(time.monotonic())

    watcher = asyncio.create_task(watch_fence())
    await asyncio.wait_for(second.campaign(), 10)  # The first never renews: it is silent.
    took_over = time.monotonic()
    await watcher
    assert fence_closed[0] < took_over
    lost: list[str] = []
    await asyncio.wait_for(first.hold(lambda: lost.append("lost")), 5)
    assert lost == ["lost"] and not first.fence()
    assert first.holder == "second"
