"""What follow-up rounds keep in Redis (``agentchain.github.roundrecords``), on a real
redis-server.

Aspects covered:
* whose pull request: the first chain to record it keeps it (a round, finding the same
  pull request, records nothing); the record is sealed: one copied to another pull
  request's key, written by hand or under another operator key is not used; a chain
  started on a pull request records its head branch and whether it is a fork's;
* rounds: numbered per pull request and agent, the same number for a redelivery of the
  same delivery, the next one for another delivery, independent per agent and per pull
  request, under the chain's TTL.
"""

from __future__ import annotations

from redis.asyncio import Redis

from agentchain.github import roundrecords
from agentchain.store import keys
from agentchain.store.signing import OperatorKeys

KEYS = OperatorKeys(["k1"])


async def test_the_first_chain_keeps_its_pull_request(redis: Redis) -> None:
    assert await roundrecords.pull_chain(redis, KEYS, "Octo/App", 7) is None
    assert await roundrecords.record_pull(redis, KEYS, "octo/app", 7, "team-a", "c1")
    assert not await roundrecords.record_pull(redis, KEYS, "octo/app", 7, "team-a", "round-1")
    assert await roundrecords.pull_chain(redis, KEYS, "Octo/App", 7) == ("team-a", "c1")
    key = roundrecords.PULL_CHAIN_PREFIX + "octo/app#7"
    assert 0 < await redis.ttl(key) <= keys.CHAIN_TTL_SECONDS


async def test_a_record_that_does_not_open_is_not_used(redis: Redis) -> None:
    await roundrecords.record_pull(redis, KEYS, "octo/app", 7, "team-a", "c1")
    sealed = await redis.get(roundrecords.PULL_CHAIN_PREFIX + "octo/app#7")
    await redis.set(roundrecords.PULL_CHAIN_PREFIX + "octo/app#8", sealed)  # Copied.
    assert await roundrecords.pull_chain(redis, KEYS, "octo/app", 8) is None
    await redis.set(roundrecords.PULL_CHAIN_PREFIX + "octo/app#9", '{"namespace":"x","chain":"y"}')
    assert await roundrecords.pull_chain(redis, KEYS, "octo/app", 9) is None
    other = OperatorKeys(["k2"])
    assert await roundrecords.pull_chain(redis, other, "octo/app", 7) is None
    assert await roundrecords.pull_chain(redis, OperatorKeys(["k2", "k1"]), "octo/app", 7) == (
        "team-a",
        "c1",
    )


async def test_rounds_are_numbered_once_per_delivery(redis: Redis) -> None:
    claim = roundrecords.claim_round
    assert await claim(redis, "octo/app", 7, "dev", "d1") == 1
    assert await claim(redis, "octo/app", 7, "dev", "d1") == 1  # Redelivered.
    assert await claim(redis, "octo/app", 7, "dev", "d2") == 2
    assert await claim(redis, "octo/app", 7, "dev", "d1") == 1
    assert await claim(redis, "Octo/App", 7, "dev", "d3") == 3
    assert await claim(redis, "octo/app", 7, "other", "d3") == 1
    assert await claim(redis, "octo/app", 8, "dev", "d3") == 1
    key = roundrecords.ROUNDS_PREFIX + "octo/app#7:dev"
    assert 0 < await redis.ttl(key) <= keys.CHAIN_TTL_SECONDS


async def test_a_chain_started_on_a_pull_request_records_its_branch(redis: Redis) -> None:
    assert await roundrecords.record_pull(redis, KEYS, "octo/app", 7, "team-a", "c1")
    opened = roundrecords.PullChain("team-a", "c1")
    assert await roundrecords.pull_record(redis, KEYS, "octo/app", 7) == opened
    await roundrecords.record_pull(redis, KEYS, "octo/app", 8, "team-a", "c2", head="fix")
    found = await roundrecords.pull_record(redis, KEYS, "octo/app", 8)
    assert found == roundrecords.PullChain("team-a", "c2", "fix", False)
    await roundrecords.record_pull(redis, KEYS, "octo/app", 9, "team-a", "c3", head="p", fork=True)
    found = await roundrecords.pull_record(redis, KEYS, "octo/app", 9)
    assert found == roundrecords.PullChain("team-a", "c3", "p", True)
    assert await roundrecords.pull_chain(redis, KEYS, "octo/app", 9) == ("team-a", "c3")


async def test_a_head_unknown_is_learnt_once_and_sealed(redis: Redis) -> None:
    await roundrecords.record_pull(redis, KEYS, "octo/app", 10, "team-a", "c4", unknown=True)
    found = await roundrecords.pull_record(redis, KEYS, "octo/app", 10)
    assert found == roundrecords.PullChain("team-a", "c4", unknown=True)
    learnt = roundrecords.PullChain("team-a", "c4", "greeting", False)
    await roundrecords.learn_head(redis, KEYS, "octo/app", 10, learnt)
    assert await roundrecords.pull_record(redis, KEYS, "octo/app", 10) == learnt
    key = roundrecords.PULL_CHAIN_PREFIX + "octo/app#10"
    assert 0 < await redis.ttl(key) <= keys.CHAIN_TTL_SECONDS  # Kept as long as before.
    # Learnt for a record that is gone: nothing is made up.
    await roundrecords.learn_head(redis, KEYS, "octo/app", 11, learnt)
    assert await roundrecords.pull_record(redis, KEYS, "octo/app", 11) is None
