"""Webhook delivery dedup against a real Redis (SPEC §7, issues 14 and 15).

Aspects covered:
- accept: claim and queue in one step, the record lasting 72 h and surviving a new
  client (an operator restart); a redelivery (same id, same body) queues again only the
  recorded jobs, one entry per job however often; an ignored delivery is recorded with
  no jobs; 50 concurrent accepts queue each job once; a Redis that forgot its scripts;
- the first accepted copy fixes a delivery: the same id with another (validly signed)
  body queues nothing and never replaces the queued body; the same body under another
  delivery id is the same delivery;
- queued bodies are sealed with the operator key: the dispatcher's open() gives the job
  back, and refuses an entry written without the key, altered, or moved to another name
  or namespace; a rotated-out key still opens what it sealed;
- the queue: take leases due entries oldest first and says when the next is due; done
  removes an entry (and an emptied namespace from the index); retry_at backs off;
  reclaim makes leased entries due; queues are per namespace, cluster-wide finds them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from redis.asyncio import Redis

from agentchain.store import keys
from agentchain.store.deliveries import DeliveryLog, JobQueue, LeasedJob, QueuedJob, seal
from agentchain.store.signing import QUEUE_PURPOSE, OperatorKeys

pytestmark = pytest.mark.redis

KEYS = OperatorKeys(["test-operator-key"])
BODY = "0" * 64  # A signed body's sha256; most tests deliver one body per delivery id.


@pytest.fixture
def log(redis: Redis) -> DeliveryLog:
    return DeliveryLog(redis, KEYS)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def opened(leased: list[LeasedJob]) -> list[QueuedJob]:
    jobs = [j.open(KEYS) for j in leased]
    assert None not in jobs
    return [j for j in jobs if j is not None]


async def test_the_record_lasts_72_hours_and_survives_a_new_client(
    log: DeliveryLog, redis: Redis, redis_url: str
) -> None:
    await log.accept("d", BODY, [job("a")])
    ttl = await redis.ttl(keys.delivery("d"))
    assert keys.DELIVERY_TTL_SECONDS - 5 < ttl <= keys.DELIVERY_TTL_SECONDS == 72 * 3600
    assert await redis.ttl(keys.delivery_body(BODY)) == ttl
    fresh: Redis = Redis.from_url(redis_url)
    try:
        assert await DeliveryLog(fresh, KEYS).accept("d", BODY, []) == (False, ["ns/a"])
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
    assert await log.accept("d", BODY, jobs, now=100.0) == (True, ["ns/a", "other/b"])
    assert await log.get("d") == ["ns/a", "other/b"]
    assert await queued(redis) == {"a": 100.0}
    assert await queued(redis, "other") == {"b": 100.0}
    body = await redis.hget(keys.webhook_queue_body("ns"), "a")  # type: ignore[misc]
    assert body is not None and json.loads(body[64:]) == jobs[0].body
    int(body[:64], 16)  # Sealed: an HMAC in front of the body.
    members = await redis.smembers(keys.WEBHOOK_QUEUE_NAMESPACES)  # type: ignore[misc]
    assert members == {b"ns", b"other"}
    for key in (keys.webhook_queue("ns"), keys.webhook_queue_body("ns")):
        assert 0 < await redis.ttl(key) <= keys.WEBHOOK_QUEUE_TTL_SECONDS


async def test_a_duplicate_queues_again_only_the_recorded_jobs(
    log: DeliveryLog, redis: Redis
) -> None:
    await log.accept("d", BODY, [job("a")], now=100.0)
    await redis.delete(keys.webhook_queue("ns"), keys.webhook_queue_body("ns"))  # Dispatched.
    # Agents changed since: "b" now matches too, but the first delivery did not decide it.
    assert await log.accept("d", BODY, [job("a"), job("b")], now=200.0) == (False, ["ns/a"])
    assert await queued(redis) == {"a": 200.0}
    # Still queued (or leased): queueing again keeps its place, one entry per job.
    await log.accept("d", BODY, [job("a")], now=300.0)
    assert await queued(redis) == {"a": 200.0}


async def test_accept_an_ignored_delivery_records_it_and_queues_nothing(
    log: DeliveryLog, redis: Redis
) -> None:
    assert await log.accept("d", BODY, []) == (True, [])
    assert await log.accept("d", BODY, [job("a")]) == (False, [])
    assert await queued(redis) == {}


async def test_fifty_concurrent_accepts_queue_each_job_once(log: DeliveryLog, redis: Redis) -> None:
    results = await asyncio.gather(*(log.accept("d", BODY, [job("a")]) for _ in range(50)))
    assert [first for first, _ in results].count(True) == 1
    assert list(await queued(redis)) == ["a"]


async def test_accept_survives_a_redis_that_forgot_its_scripts(
    log: DeliveryLog, redis: Redis
) -> None:
    await log.accept("d-1", sha("d-1"), [job("a")])
    await redis.script_flush()  # As after a Redis restart.
    results = await asyncio.gather(
        *(log.accept(f"d-{n}", sha(f"d-{n}"), [job(f"j{n}")]) for n in range(5))
    )
    assert [first for first, _ in results] == [True, False, True, True, True]


async def test_the_same_id_with_another_body_changes_nothing(
    log: DeliveryLog, redis: Redis
) -> None:
    first = [job("a")]
    assert await log.accept("d", sha("first"), first, now=100.0) == (True, ["ns/a"])
    other = [QueuedJob("ns", "a", {"metadata": {"name": "a"}, "spec": "replaced"})]
    assert await log.accept("d", sha("second"), other, now=101.0) == (False, ["ns/a"])
    [taken] = opened((await JobQueue(redis, ("ns",)).take(5, 30, now=102.0))[0])
    assert taken.body == first[0].body
    # Even once dispatched, the other body is never queued.
    await redis.delete(keys.webhook_queue("ns"), keys.webhook_queue_body("ns"))
    assert await log.accept("d", sha("second"), other) == (False, ["ns/a"])
    assert await queued(redis) == {}


async def test_the_same_body_under_another_id_is_a_duplicate(
    log: DeliveryLog, redis: Redis
) -> None:
    assert await log.accept("d-1", sha("body"), [job("a")]) == (True, ["ns/a"])
    await redis.delete(keys.webhook_queue("ns"), keys.webhook_queue_body("ns"))
    assert await log.accept("d-2", sha("body"), [job("b")]) == (False, ["ns/a"])
    assert await queued(redis) == {}
    assert await log.get("d-2") is None


async def test_concurrent_copies_of_one_delivery_keep_the_first(
    log: DeliveryLog, redis: Redis
) -> None:
    same_id = [("d", sha(f"body-{n}")) for n in range(30)]
    same_body = [(f"d-{n}", sha("body")) for n in range(30)]
    for copies in (same_id, same_body):
        results = await asyncio.gather(*(log.accept(d, b, [job(d + b[:6])]) for d, b in copies))
        assert [first for first, _ in results].count(True) == 1
    assert len(await queued(redis)) == 2


async def test_open_refuses_entries_without_the_operators_seal(
    log: DeliveryLog, redis: Redis
) -> None:
    await log.accept("d", BODY, [job("a")])
    bodies = keys.webhook_queue_body("ns")
    sealed = await redis.hget(bodies, "a")  # type: ignore[misc]
    raw = json.dumps(job("x").body).encode()
    wrong_key = OperatorKeys(["not-the-key"]).subkeys(QUEUE_PURPOSE)[0]
    right_key = KEYS.subkeys(QUEUE_PURPOSE)[0]
    forged = {
        "x": seal(wrong_key, "ns", "x", raw),  # Written by someone without the key.
        "y": sealed[:64] + sealed[64:].replace(b'"a"', b'"y"'),  # Altered in Redis.
        "z": sealed,  # Moved to another name.
        "w": b"not even hex" + raw,
        "v": seal(right_key, "other", "v", raw),  # Sealed for another namespace.
    }
    await redis.hset(bodies, mapping=forged)  # type: ignore[misc]
    await redis.zadd(keys.webhook_queue("ns"), {name: 0 for name in forged})
    leased, _ = await JobQueue(redis, ("ns",)).take(10, 30)
    verdicts = {j.name: j.open(KEYS) for j in leased}
    assert verdicts.pop("a") == job("a")
    assert verdicts == dict.fromkeys(forged)
    # After a key rotation the old key still opens what it sealed.
    assert LeasedJob("ns", b"a", sealed).open(OperatorKeys(["new", "test-operator-key"]))


@pytest.fixture
def queue(redis: Redis) -> JobQueue:
    return JobQueue(redis, ("ns",))


async def test_take_leases_due_entries_oldest_first(
    log: DeliveryLog, queue: JobQueue, redis: Redis
) -> None:
    for n, name in enumerate(["c", "a", "b"]):
        await log.accept(name, sha(name), [job(name)], now=100.0 + n)
    taken, earliest = await queue.take(2, 30, now=110.0)
    assert [j.name for j in taken] == ["c", "a"]
    assert opened(taken)[0] == job("c") and earliest == 102.0
    # Leased: not taken again until the lease runs out.
    taken, earliest = await queue.take(5, 30, now=111.0)
    assert [j.name for j in taken] == ["b"] and earliest == 140.0
    assert await queue.take(5, 30, now=139.0) == ([], 140.0)
    assert {j.name for j in (await queue.take(5, 30, now=140.0))[0]} == {"c", "a"}


async def test_done_removes_the_entry_and_the_empty_namespace(
    log: DeliveryLog, queue: JobQueue, redis: Redis
) -> None:
    await log.accept("d", BODY, [job("a"), job("b")])
    await queue.done("ns", "a")
    assert await queue.pending("ns") == 1
    assert await redis.smembers(keys.WEBHOOK_QUEUE_NAMESPACES) == {b"ns"}  # type: ignore[misc]
    await queue.done("ns", "b")
    assert await queue.pending("ns") == 0
    assert await redis.smembers(keys.WEBHOOK_QUEUE_NAMESPACES) == set()  # type: ignore[misc]
    assert await redis.exists(keys.webhook_queue_body("ns")) == 0
    assert await queue.take(5, 30) == ([], None)


async def test_retry_at_and_reclaim(log: DeliveryLog, queue: JobQueue) -> None:
    await log.accept("d", BODY, [job("a"), job("b")], now=100.0)
    await queue.take(5, 30, now=100.0)
    await queue.retry_at("ns", "b", 105.0)
    assert [j.name for j in (await queue.take(5, 30, now=105.0))[0]] == ["b"]
    # A starting dispatcher: whoever held the leases is gone, everything is due now.
    assert await queue.reclaim(now=106.0) == 2
    assert [j.name for j in (await queue.take(5, 30, now=106.0))[0]] == ["a", "b"]


async def test_queues_are_per_namespace(log: DeliveryLog, redis: Redis) -> None:
    await log.accept("d", BODY, [job("a", "ns-1"), job("b", "ns-2")])
    only_one = JobQueue(redis, ("ns-1",))
    assert [j.key for j in (await only_one.take(5, 30))[0]] == ["ns-1/a"]
    cluster_wide = JobQueue(redis)
    assert await cluster_wide.namespaces() == ["ns-1", "ns-2"]
    assert [j.key for j in (await cluster_wide.take(5, 30))[0]] == ["ns-2/b"]
