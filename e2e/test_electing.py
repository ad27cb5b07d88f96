"""The leader elector (``kube/electing.py``) against the real API server, in-process.

Two electors share one Lease in ``agentchain-system``, as the operator's ServiceAccount
(so the chart's Lease Role is all they need), with short timings (lease 2 s, renew
deadline 1.5 s, retry 0.4 s; 6 s leases for the handover) so each case takes seconds.

Aspects covered:
- one leader at a time: while the first renews, the second campaigns in vain for
  longer than a lease;
- a clean stop releases the Lease: the follower leads at its next try (the promise in
  docs/architecture.md: "within a retry period"), never by waiting for the Lease to lapse,
  and the Lease records the new holder and one more transition;
- a silent leader (stopped renewing, as if frozen) is replaced only after its own fence
  closed, never before; when it renews again it finds another holder, gives up at once
  and says so (``on_lost``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentchain.kube import clients, electing, leases
from agentchain.kube.rules import leadership
from agentchain.kube.rules.leadership import Timing
from e2e import operating
from e2e.controlplane.cluster import ClusterInfo

TIMING = Timing(2.0, 1.5, 0.4)
# The handover's lease is longer than the same retry period's, so the promise (a retry
# period and a try's API calls, stretched by a loaded machine) stays well apart from a
# lapse of the Lease, which a release that did not happen would make the follower wait.
HANDOVER = Timing(6.0, 1.5, 0.4)
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
    first = electing.Elector(NAMESPACE, as_operator, "first", HANDOVER)
    second = electing.Elector(NAMESPACE, as_operator, "second", HANDOVER)
    await asyncio.wait_for(first.campaign(), 5)
    holding = asyncio.create_task(first.hold())
    campaign = asyncio.create_task(second.campaign())
    # Watched from a thread, so the holder's renewals and the campaign run meanwhile.
    await asyncio.to_thread(
        operating.stays,
        lambda: not campaign.done() and first.fence() and not second.fence(),
        seconds=HANDOVER.lease_duration * 1.5,
        interval=0.05,
        what="the first holder alone leading",
    )
    holding.cancel()
    await asyncio.gather(holding, return_exceptions=True)
    asked = time.monotonic()
    held = await leases.read(NAMESPACE, as_operator, timeout=5)
    round_trip = time.monotonic() - asked
    assert held is not None and held["spec"]["holderIdentity"] == "first"
    await first.release()
    released, released_wall = time.monotonic(), dt.datetime.now(dt.UTC)
    await asyncio.wait_for(campaign, HANDOVER.lease_duration * 2)
    handover = time.monotonic() - released
    assert handover < _handover_bound(held, round_trip, released_wall), handover
    assert second.fence() and not first.fence()
    lease = await leases.read(NAMESPACE, as_operator, timeout=5)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "second"
    assert lease["spec"]["leaseTransitions"] == 1


def _handover_bound(held: dict[str, Any], round_trip: float, released: dt.datetime) -> float:
    """How long after a release the follower may take to lead: what the promise allows,
    never as long as a lapse of the unreleased Lease would take.

    The promise is the follower's next try: it sleeps at most a jittered retry period,
    and a try is a read and an update, maybe after one already under way when the Lease
    was released (three API calls). The API's speed is the machine's: the margin is
    measured, a multiple of the read just made, so a loaded machine stretches the bound
    with it. Had the release not happened, the follower could claim only once the Lease
    had stayed unchanged for its duration after the holder's last renewal (written at
    ``renewTime`` or later), so the bound never reaches that: a handover by lapse fails.
    """
    promised = HANDOVER.retry_period * leadership.JITTER + 4 * round_trip + 0.5
    renewed = dt.datetime.strptime(held["spec"]["renewTime"], leadership.MICROTIME_FORMAT)
    since_renewal = released - renewed.replace(tzinfo=dt.UTC)
    lapse = float(held["spec"]["leaseDurationSeconds"]) - since_renewal.total_seconds()
    return min(promised, lapse)


async def test_a_release_after_a_renewal_whose_answer_was_lost_still_releases(
    as_operator: str,
) -> None:
    first = electing.Elector(NAMESPACE, as_operator, "first", HANDOVER)
    await asyncio.wait_for(first.campaign(), 5)
    # The holder's renewal reached the API server, but its answer never reached the
    # holder (stopped while it was on its way): the Lease moved past the copy it kept.
    held = await leases.read(NAMESPACE, as_operator, timeout=5)
    assert held is not None
    renewed = dataclasses.replace(
        leadership.Record.from_spec(held["spec"]),
        renew_time=leadership.microtime(dt.datetime.now(dt.UTC)),
    )
    assert renewed.renew_time != held["spec"]["renewTime"]  # not a no-op update
    await leases.replace(held, renewed, timeout=5)
    await first.release()
    lease = await leases.read(NAMESPACE, as_operator, timeout=5)
    assert lease is not None
    assert lease["spec"].get("holderIdentity", "") == ""  # released, not left to lapse
    # A Lease someone else took since is not this replica's to release.
    taken = leadership.Record.from_spec(lease["spec"])
    await leases.replace(lease, dataclasses.replace(taken, holder="second"), timeout=5)
    await first.release()
    lease = await leases.read(NAMESPACE, as_operator, timeout=5)
    assert lease is not None and lease["spec"]["holderIdentity"] == "second"


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
