"""A chain's budget usage against a real Redis (flow/usage.py).

Aspects covered:
- concurrent reports add up exactly (tokens) and per job; the totals come back with
  each report;
- a launch is counted once per job and attempt (a replay counts nothing), and the
  chain's start is set by the first launch only;
- chains and tenants are counted apart; every key has the chain TTL;
- each agent's share (reports, attempts, first launch) is counted apart, with the
  chain's totals in the same transaction.
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from agentchain.flow.usage import UsageStore
from agentchain.store import keys

pytestmark = pytest.mark.redis
T = "team-a"


async def test_concurrent_reports_add_up(redis: Redis) -> None:
    store = UsageStore(redis)
    await asyncio.gather(*(store.report(T, "c1", f"j{i % 2}", 10, 0.25) for i in range(40)))
    reported = await store.report(T, "c1", "j0", 0, 0.0)
    assert (reported.usage.chain.tokens, reported.usage.chain.cost) == (400, 10.0)
    assert (reported.job_tokens, reported.job_cost) == (200, 5.0)
    assert (await store.get(T, "c2")).chain.tokens == 0
    assert (await store.get("team-b", "c1")).chain.tokens == 0


async def test_turns_add_up_per_job_and_stay_out_of_the_budget(redis: Redis) -> None:
    store = UsageStore(redis)
    await store.report(T, "c1", "j1", 10, 0.0, "a", turns=2)
    reported = await store.report(T, "c1", "j1", 10, 0.0, "a", turns=3)
    assert reported.job_turns == 5 and reported.job_tokens == 20
    assert (await store.report(T, "c1", "j2", 1, 0.0, "a")).job_turns == 0


async def test_the_split_of_a_jobs_tokens_adds_up_per_job_beside_its_total(redis: Redis) -> None:
    store = UsageStore(redis)
    await store.report(T, "c1", "j1", 120, 0.0, "a", split=(100, 20))
    reported = await store.report(T, "c1", "j1", 12, 0.0, "a", split=(10, 2))
    assert (reported.job_input_tokens, reported.job_output_tokens) == (110, 22)
    assert reported.job_tokens == reported.usage.chain.tokens == 132  # The budget's total.
    # A report of the total alone (an agent that does not split) leaves the split as it was.
    alone = await store.report(T, "c1", "j1", 8, 0.0, "a")
    assert (alone.job_tokens, alone.job_input_tokens, alone.job_output_tokens) == (140, 110, 22)
    assert (await store.report(T, "c1", "j2", 1, 0.0, "a")).job_input_tokens == 0


async def test_launches_count_once_per_attempt_and_the_first_sets_the_start(redis: Redis) -> None:
    store = UsageStore(redis)
    first = await store.launched(T, "c1", "j1", 1, 100.0)
    again = await store.launched(T, "c1", "j1", 1, 200.0)
    second = await store.launched(T, "c1", "j1", 2, 300.0)
    child = await store.launched(T, "c1", "j2", 1, 400.0)
    assert [u.chain.attempts for u in (first, again, second, child)] == [1, 1, 2, 3]
    assert {u.chain.started for u in (first, again, second, child)} == {100.0}
    for key in (keys.flow_usage(T, "c1"), keys.flow_attempts(T, "c1")):
        assert 0 < await redis.ttl(key) <= keys.CHAIN_TTL_SECONDS


async def test_each_agent_counts_its_own_share(redis: Redis) -> None:
    store = UsageStore(redis)
    await store.launched(T, "c1", "j1", 1, 100.0, "lead")
    await store.launched(T, "c1", "j2", 1, 200.0, "coder")
    second = await store.launched(T, "c1", "j2", 2, 300.0, "coder")
    assert (second.chain.attempts, second.chain.started) == (3, 100.0)
    assert (second.agent.attempts, second.agent.started) == (2, 200.0)
    await asyncio.gather(*(store.report(T, "c1", "j1", 5, 0.5, "lead") for _ in range(10)))
    coder = await store.report(T, "c1", "j2", 7, 1.25, "coder")
    assert (coder.usage.chain.tokens, coder.usage.chain.cost) == (57, 6.25)
    assert (coder.usage.agent.tokens, coder.usage.agent.cost) == (7, 1.25)
    lead = await store.get(T, "c1", "lead")
    assert (lead.agent.tokens, lead.agent.cost, lead.agent.attempts) == (50, 5.0, 1)
    assert 0 < await redis.ttl(keys.flow_agent_attempts(T, "c1", "coder")) <= keys.CHAIN_TTL_SECONDS
