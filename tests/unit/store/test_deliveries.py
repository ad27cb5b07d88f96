"""Webhook delivery dedup against a real Redis (SPEC §7).

Aspects covered:
- the first claim wins and later claims get the job names the first one recorded;
- 50 concurrent claimers: exactly one True, all others see the winner's names;
- the claim lasts 72 h; the same delivery id under another hook is independent;
- record replaces the names keeping the TTL; release lets a redelivery act again;
- a fresh client (an operator restart) still sees the claim;
- accept: claim and queue in one step; a duplicate queues again only the recorded jobs,
  one entry per job however often; an ignored delivery is recorded with no jobs; a record
  from the inline-creating version still deduplicates; concurrent accepts are sent as one
  pipeline, which reloads the script if Redis forgot it;
- the queue: take leases due entries oldest first and says when the next is due; done
  removes an entry (and an emptied namespace from the index); retry_at backs off;
  reclaim makes leased entries due; queues are per namespace, cluster-wide finds them.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from redis.asyncio import Redis

from agentchain.store import keys
from agentchain.store.deliveries import DeliveryLog, JobQueue, QueuedJob

pytestmark = pytest.mark.redis


@pytest.fixture
def log(redis: Redis) -> DeliveryLog:
    return DeliveryLog(redis)


async def test_first_claim_wins_later_ones_see_its_jobs(log: DeliveryLog) -> None:
    assert await log.claim("hook-1", "d-1", ["ns/triage-1"]) == (True, ["ns/triage-1"])
    assert await log.claim("hook-1", "d-1", ["ns/triage-2"]) == (False, ["ns/triage-1"])
    assert await log.get("hook-1", "d-1") == ["ns/triage-1"]
    assert await log.get("hook-1", "unknown") is None


async def test_fifty_concurrent_claimers_one_winner(log: DeliveryLog) -> None:
    results = await asyncio.gather(*(log.claim("h", "d", [f"job-{i}"]) for i in range(50)))
    winners = [names for won, names in results if won]
    assert len(winners) == 1
    assert all(names == winners[0] for _, names in results)


async def test_claim_lasts_seventy_two_hours(log: DeliveryLog, redis: Redis) -> None:
    await log.claim("h", "d", [])
    ttl = await redis.ttl(keys.delivery("h", "d"))
    assert keys.DELIVERY_TTL_SECONDS - 5 < ttl <= keys.DELIVERY_TTL_SECONDS == 72 * 3600


async def test_hooks_are_independent(log: DeliveryLog) -> None:
    assert (await log.claim("h1", "d", ["a"]))[0]
    assert (await log.claim("h2", "d", ["b"]))[0]
    assert (await log.claim("h1:d", "x", ["c"]))[0]


async def test_record_keeps_the_claim_and_its_ttl(log: DeliveryLog, redis: Redis) -> None:
    await log.claim("h", "d", [])
    await log.record("h", "d", ["ns/job"])
    assert await log.claim("h", "d", ["other"]) == (False, ["ns/job"])
    assert await redis.ttl(keys.delivery("h", "d")) > 0


async def test_release_lets_a_redelivery_act(log: DeliveryLog) -> None:
    await log.claim("h", "d", [])
    assert await log.release("h", "d")
    assert (await log.claim("h", "d", ["again"]))[0]


async def test_claim_survives_a_new_client(log: DeliveryLog, redis_url: str) -> None:
    await log.claim("h", "d", ["ns/job"])
    fresh: Redis = Redis.from_url(redis_url)
    try:
        assert await DeliveryLog(fresh).claim("h", "d", []) == (False, ["ns/job"])
    finally:
        await fresh.aclose()  # type: ignore[attr-defined,unused-ignore]


# --------------------------------------------------------------------------- the queue


def job(name: str, namespace: str = "ns") -> QueuedJob:
    return QueuedJob(namespace, name, {"metadata": {"name": name, "namespace": namespace}})


async def queued(redis: Redis, namespace: str = "ns") -> dict[str, float]:
    pairs = await redis.zrange(keys.webhook_queue(namespace), 0, -1, withscores=True)
    return {name.decode(): score for name, score in pairs}


async def test_accept_claims_and_queues_in_one_step(log: DeliveryLog, redis: Redis) -> None:
    jobs = [job("a"), job("b", "other")]
    assert await log.accept("h", "d", jobs, now=100.0) == (True, ["ns/a", "other/b"])
    assert await log.get("h", "d") == ["ns/a", "other/b"]
    assert await queued(redis) == {"a": 100.0}
    assert await queued(redis, "other") == {"b": 100.0}
    body = await redis.hget(keys.webhook_queue_body("ns"), "a")  # type: ignore[misc]
    assert body is not None and json.loads(body) == jobs[0].body
    members = await redis.smembers(keys.WEBHOOK_QUEUE_NAMESPACES)  # type: ignore[misc]
    assert members == {b"ns", b"other"}
    for key in (keys.webhook_queue("ns"), keys.webhook_queue_body("ns")):
        assert 0 < await redis.ttl(key) <= keys.WEBHOOK_QUEUE_TTL_SECONDS


async def test_a_duplicate_queues_again_only_the_recorded_jobs(
    log: DeliveryLog, redis: Redis
) -> None:
    await log.accept("h", "d", [job("a")], now=100.0)
    await redis.delete(keys.webhook_queue("ns"), keys.webhook_queue_body("ns"))  # Dispatched.
    # Agents changed since: "b" now matches too, but the first delivery did not decide it.
    assert await log.accept("h", "d", [job("a"), job("b")], now=200.0) == (False, ["ns/a"])
    assert await queued(redis) == {"a": 200.0}
    # Still queued (or leased): queueing again keeps its place, one entry per job.
    await log.accept("h", "d", [job("a")], now=300.0)
    assert await queued(redis) == {"a": 200.0}


async def test_accept_an_ignored_delivery_records_it_and_queues_nothing(
    log: DeliveryLog, redis: Redis
) -> None:
    assert await log.accept("h", "d", []) == (True, [])
    assert await log.accept("h", "d", [job("a")]) == (False, [])
    assert await queued(redis) == {}


async def test_fifty_concurrent_accepts_queue_each_job_once(log: DeliveryLog, redis: Redis) -> None:
    results = await asyncio.gather(*(log.accept("h", "d", [job("a")]) for _ in range(50)))
    assert [first for first, _ in results].count(True) == 1
    assert list(await queued(redis)) == ["a"]


async def test_accept_survives_a_redis_that_forgot_its_scripts(
    log: DeliveryLog, redis: Redis
) -> None:
    await log.accept("h", "d-1", [job("a")])
    await redis.script_flush()  # As after a Redis restart.
    results = await asyncio.gather(*(log.accept("h", f"d-{n}", [job(f"j{n}")]) for n in range(5)))
    assert [first for first, _ in results] == [True, False, True, True, True]


async def test_a_legacy_record_still_deduplicates(log: DeliveryLog, redis: Redis) -> None:
    await log.claim("h", "d", ["ns/a"])  # Written by the version that created inline.
    assert await log.accept("h", "d", [job("a")]) == (False, ["ns/a"])


@pytest.fixture
def queue(redis: Redis) -> JobQueue:
    return JobQueue(redis, ("ns",))


async def test_take_leases_due_entries_oldest_first(
    log: DeliveryLog, queue: JobQueue, redis: Redis
) -> None:
    for n, name in enumerate(["c", "a", "b"]):
        await log.accept("h", name, [job(name)], now=100.0 + n)
    taken, earliest = await queue.take(2, 30, now=110.0)
    assert [j.name for j in taken] == ["c", "a"]
    assert taken[0].body == job("c").body and earliest == 102.0
    # Leased: not taken again until the lease runs out.
    taken, earliest = await queue.take(5, 30, now=111.0)
    assert [j.name for j in taken] == ["b"] and earliest == 140.0
    assert await queue.take(5, 30, now=139.0) == ([], 140.0)
    assert {j.name for j in (await queue.take(5, 30, now=140.0))[0]} == {"c", "a"}


async def test_done_removes_the_entry_and_the_empty_namespace(
    log: DeliveryLog, queue: JobQueue, redis: Redis
) -> None:
    await log.accept("h", "d", [job("a"), job("b")])
    await queue.done("ns", "a")
    assert await queue.pending("ns") == 1
    assert await redis.smembers(keys.WEBHOOK_QUEUE_NAMESPACES) == {b"ns"}  # type: ignore[misc]
    await queue.done("ns", "b")
    assert await queue.pending("ns") == 0
    assert await redis.smembers(keys.WEBHOOK_QUEUE_NAMESPACES) == set()  # type: ignore[misc]
    assert await redis.exists(keys.webhook_queue_body("ns")) == 0
    assert await queue.take(5, 30) == ([], None)


async def test_retry_at_and_reclaim(log: DeliveryLog, queue: JobQueue) -> None:
    await log.accept("h", "d", [job("a"), job("b")], now=100.0)
    await queue.take(5, 30, now=100.0)
    await queue.retry_at("ns", "b", 105.0)
    assert [j.name for j in (await queue.take(5, 30, now=105.0))[0]] == ["b"]
    # A starting dispatcher: whoever held the leases is gone, everything is due now.
    assert await queue.reclaim(now=106.0) == 2
    assert [j.name for j in (await queue.take(5, 30, now=106.0))[0]] == ["a", "b"]


async def test_queues_are_per_namespace(log: DeliveryLog, redis: Redis) -> None:
    await log.accept("h", "d", [job("a", "ns-1"), job("b", "ns-2")])
    only_one = JobQueue(redis, ("ns-1",))
    assert [j.key for j in (await only_one.take(5, 30))[0]] == ["ns-1/a"]
    cluster_wide = JobQueue(redis)
    assert await cluster_wide.namespaces() == ["ns-1", "ns-2"]
    assert [j.key for j in (await cluster_wide.take(5, 30))[0]] == ["ns-2/b"]
