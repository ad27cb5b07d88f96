"""Chain records against a real Redis (SPEC §2, §5).

Aspects covered:
- hops are recorded in order with their fields; a replayed hop is not recorded twice;
- the hop list is bounded; records expire after 30 days;
- mark_complete is True exactly once, also with 50 concurrent callers, and the first
  caller's outcome is the one kept;
- learnings_claim is True exactly once per (chain, agent) under concurrency, and
  independent per agent and per chain;
- tenants never see each other's chains; an unknown chain is None.
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from agentchain.store import chains, keys
from agentchain.store.chains import ChainStore

pytestmark = pytest.mark.redis

T = "team-a"


@pytest.fixture
def store(redis: Redis) -> ChainStore:
    return ChainStore(redis)


async def _hop(store: ChainStore, job: str, phase: str = "Succeeded", tenant: str = T) -> bool:
    return await store.record_hop(
        tenant, "c1", job_name=job, agent="triage", phase=phase, decision="spawn", detail="x"
    )


async def test_hops_are_recorded_in_order(store: ChainStore) -> None:
    assert await _hop(store, "j1")
    assert await _hop(store, "j2", phase="Failed")
    record = await store.get(T, "c1")
    assert record is not None and not record.complete and record.outcome is None
    assert [(h["jobName"], h["phase"]) for h in record.hops] == [
        ("j1", "Succeeded"),
        ("j2", "Failed"),
    ]
    assert set(record.hops[0]) == {"jobName", "agent", "phase", "decision", "detail", "at"}


async def test_replayed_hop_is_not_recorded_twice(store: ChainStore) -> None:
    results = await asyncio.gather(*(_hop(store, "j1") for _ in range(10)))
    assert results.count(True) == 1
    record = await store.get(T, "c1")
    assert record is not None and len(record.hops) == 1


async def test_hop_list_is_bounded_and_expires(store: ChainStore, redis: Redis) -> None:
    for i in range(chains.CHAIN_MAX_HOPS + 5):
        await _hop(store, f"j{i}")
    record = await store.get(T, "c1")
    assert record is not None and len(record.hops) == chains.CHAIN_MAX_HOPS
    assert record.hops[0]["jobName"] == "j5"
    assert 0 < await redis.ttl(keys.chain_hops(T, "c1")) <= keys.CHAIN_TTL_SECONDS


async def test_unknown_chain_is_none(store: ChainStore) -> None:
    assert await store.get(T, "nope") is None


async def test_mark_complete_exactly_once(store: ChainStore) -> None:
    results = await asyncio.gather(
        *(store.mark_complete(T, "c1", f"outcome-{i}", f"job-{i}") for i in range(50))
    )
    assert results.count(True) == 1
    winner = results.index(True)
    record = await store.get(T, "c1")
    assert record is not None and record.complete and record.completed_at is not None
    assert (record.outcome, record.last_job) == (f"outcome-{winner}", f"job-{winner}")
    assert not await store.mark_complete(T, "c1", "again", "j")


async def test_learnings_claim_exactly_once_per_chain_and_agent(store: ChainStore) -> None:
    results = await asyncio.gather(*(store.learnings_claim(T, "c1", "coder") for _ in range(50)))
    assert results.count(True) == 1
    assert await store.learnings_claim(T, "c1", "reviewer")
    assert await store.learnings_claim(T, "c2", "coder")
    assert not await store.learnings_claim(T, "c1", "coder")


async def test_tenants_are_isolated(store: ChainStore) -> None:
    await _hop(store, "j1", tenant="team-a")
    assert await store.get("team-b", "c1") is None
    assert await store.mark_complete("team-a", "c1", "ok", "j1")
    assert await store.mark_complete("team-b", "c1", "ok", "j1")
    assert await store.learnings_claim("team-b", "c1", "coder")
    assert await store.learnings_claim("team-a", "c1", "coder")
