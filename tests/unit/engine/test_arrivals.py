"""A launch holds its bookkeeping until the Job's pod is seen, never longer than asked."""

from __future__ import annotations

import asyncio

from agentchain.engine.arrivals import PodArrivals

POD_LABELS = {"batch.kubernetes.io/job-name": "job-a", "labrats.work/agentjob": "a"}


async def test_a_pod_seen_before_the_wait_answers_at_once() -> None:
    arrivals = PodArrivals()
    arrivals.seen("ns", POD_LABELS)
    assert await arrivals.wait("ns", "job-a", timeout=0)


async def test_a_pod_seen_during_the_wait_ends_it() -> None:
    arrivals = PodArrivals()
    waiting = asyncio.create_task(arrivals.wait("ns", "job-a", timeout=5))
    await asyncio.sleep(0)
    arrivals.seen("ns", POD_LABELS)
    assert await asyncio.wait_for(waiting, 1)


async def test_the_legacy_job_name_label_counts_too() -> None:
    arrivals = PodArrivals()
    arrivals.seen("ns", {"job-name": "job-a"})
    assert await arrivals.wait("ns", "job-a", timeout=0)


async def test_no_pod_gives_up_after_the_timeout() -> None:
    arrivals = PodArrivals()
    arrivals.seen("other-ns", POD_LABELS)  # Same Job name, another namespace.
    arrivals.seen("ns", {"batch.kubernetes.io/job-name": "job-b"})
    arrivals.seen("ns", {"app": "unrelated"})
    assert not await arrivals.wait("ns", "job-a", timeout=0.01)
    assert not arrivals._waiting  # No waiter left behind.
