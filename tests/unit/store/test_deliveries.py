"""Webhook delivery dedup against a real Redis (SPEC §7).

Aspects covered:
- the first claim wins and later claims get the job names the first one recorded;
- 50 concurrent claimers: exactly one True, all others see the winner's names;
- the claim lasts 72 h; the same delivery id under another hook is independent;
- record replaces the names keeping the TTL; release lets a redelivery act again;
- a fresh client (an operator restart) still sees the claim.
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from agentchain.store import keys
from agentchain.store.deliveries import DeliveryLog

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
