"""Chain records against a real Redis (SPEC §2, §5).

Aspects covered:
- hops are recorded in order with their fields; a replayed hop is not recorded twice;
- the hop list is bounded; records expire after 30 days;
- mark_complete is True exactly once, also with 50 concurrent callers, and the first
  caller's outcome is the one kept;
- learnings_claim: of many jobs claiming one (chain, agent) at once exactly one wins, and
  it keeps winning when it claims again (a rebuild after a crash) while every other job
  keeps losing; claims are independent per agent and per chain, expire with the chain
  record, and a claim from before claimants were recorded belongs to no job;
- tenants never see each other's chains; an unknown chain is None.
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from agentchain.store import chainrecords, keys
from agentchain.store.chainrecords import ChainStore

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
    for i in range(chainrecords.CHAIN_MAX_HOPS + 5):
        await _hop(store, f"j{i}")
    record = await store.get(T, "c1")
    assert record is not None and len(record.hops) == chainrecords.CHAIN_MAX_HOPS
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


async def test_learnings_claim_has_exactly_one_winner(store: ChainStore) -> None:
    jobs = [f"coder-{i}/uid-{i}" for i in range(50)]
    results = await asyncio.gather(*(store.learnings_claim(T, "c1", "coder", j) for j in jobs))
    assert results.count(True) == 1
    winner = jobs[results.index(True)]
    assert await store.learnings_claimant(T, "c1", "coder") == winner
    # The winner rebuilding its prompt (many times, concurrently) still gets them; nobody
    # else ever does, including a job that claims for the first time only now.
    again = await asyncio.gather(
        *(store.learnings_claim(T, "c1", "coder", winner) for _ in range(20))
    )
    assert all(again)
    late = [*jobs, "coder-late/uid-late"]
    others = await asyncio.gather(
        *(store.learnings_claim(T, "c1", "coder", j) for j in late if j != winner)
    )
    assert not any(others)
    assert await store.learnings_claimant(T, "c1", "coder") == winner


async def test_learnings_claim_is_per_chain_and_agent(store: ChainStore) -> None:
    assert await store.learnings_claim(T, "c1", "coder", "j1/u1")
    assert await store.learnings_claim(T, "c1", "reviewer", "j2/u2")
    assert await store.learnings_claim(T, "c2", "coder", "j3/u3")
    assert not await store.learnings_claim(T, "c1", "coder", "j3/u3")
    # Same name, other uid: a deleted and recreated AgentJob is another run.
    assert not await store.learnings_claim(T, "c1", "coder", "j1/u9")
    assert await store.learnings_claimant(T, "c9", "coder") is None


async def test_learnings_claim_expires_with_the_chain(store: ChainStore, redis: Redis) -> None:
    key = keys.chain_learnings(T, "c1")
    assert await store.learnings_claim(T, "c1", "coder", "j1/u1")
    assert 0 < await redis.ttl(key) <= keys.CHAIN_TTL_SECONDS
    await redis.expire(key, 5)
    assert await store.learnings_claim(T, "c1", "coder", "j1/u1")  # A claim pushes it forward.
    assert await redis.ttl(key) > 5


async def test_claim_from_before_claimants_belongs_to_no_job(
    store: ChainStore, redis: Redis
) -> None:
    # The previous format stored the claim time; that run got (or lost) the learnings.
    await redis.hset(keys.chain_learnings(T, "c1"), "coder", repr(1700000000.0))  # type: ignore[misc]
    assert not await store.learnings_claim(T, "c1", "coder", "j1/u1")


async def test_tenants_are_isolated(store: ChainStore) -> None:
    await _hop(store, "j1", tenant="team-a")
    assert await store.get("team-b", "c1") is None
    assert await store.mark_complete("team-a", "c1", "ok", "j1")
    assert await store.mark_complete("team-b", "c1", "ok", "j1")
    assert await store.learnings_claim("team-b", "c1", "coder", "j1/u1")
    assert await store.learnings_claim("team-a", "c1", "coder", "j2/u2")
