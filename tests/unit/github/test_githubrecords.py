"""GitHub records in Redis (``agentchain.github.githubrecords``), on a real redis-server.

Aspects covered:
* a chain's comment/Check Run ids and digests are recorded, read back and forgotten;
* a chain final before its pull request was recorded is not final after it; reviews are
  recorded per job;
* the creation claim is exclusive, released only by its owner, and expires;
* job tokens are stored sealed (Redis never holds the token), bound to their job (a
  record copied under another job's key does not open), readable under a rotated key
  list, reused only while they have long enough to live, and taken once.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from agentchain.github.githubrecords import JobTokens, WriteBackRecords
from agentchain.store import keys
from agentchain.store.signing import OperatorKeys


async def test_chain_records(redis: Redis) -> None:
    records = WriteBackRecords(redis)
    assert (await records.get("ns", "c1")).comment_id is None
    await records.set_id("ns", "c1", "comment", 42)
    await records.set_digest("ns", "c1", "comment", "d1")
    await records.set_id("ns", "c1", "check", 7)
    got = await records.get("ns", "c1")
    assert (got.comment_id, got.comment_digest, got.check_id) == (42, "d1", 7)
    assert 0 < await redis.ttl(keys.github_chain("ns", "c1")) <= keys.CHAIN_TTL_SECONDS
    await records.forget_id("ns", "c1", "comment")
    assert (await records.get("ns", "c1")).comment_id is None
    assert not got.final
    await records.set_final("ns", "c1", None)
    assert (await records.get("ns", "c1")).final


async def test_a_pull_request_recorded_after_the_end_brings_the_chain_back(redis: Redis) -> None:
    """Final as of no pull request; the workspace's pull request recorded after that (or
    while the final write-back ran) makes the chain due again, for its reviews; final
    again once written as of that pull request.  Reviews are recorded per job."""
    records = WriteBackRecords(redis)
    await records.set_final("ns", "c1", None)
    await records.set_pull("ns", "c1", "acme/widgets", 7)
    got = await records.get("ns", "c1")
    assert got.pull == "acme/widgets#7" and not got.final
    await records.set_review("ns", "c1", "reviewer-a", "99")
    await records.set_review("ns", "c1", "reviewer-b", "refused")
    await records.set_final("ns", "c1", got.pull)
    got = await records.get("ns", "c1")
    assert got.final and got.reviews == {"reviewer-a": "99", "reviewer-b": "refused"}


async def test_claim_is_exclusive(redis: Redis) -> None:
    records = WriteBackRecords(redis)
    owner = await records.claim("ns", "c1")
    assert owner is not None and await records.claim("ns", "c1") is None
    await records.release("ns", "c1", "not-the-owner")
    assert await records.claim("ns", "c1") is None
    await records.release("ns", "c1", owner)
    assert await records.claim("ns", "c1") is not None
    assert 0 < await redis.ttl(keys.github_claim("ns", "c1")) <= keys.GITHUB_CLAIM_TTL_SECONDS
    assert 0 < await records.claim_left("ns", "c1") <= keys.GITHUB_CLAIM_TTL_SECONDS
    assert await records.claim_left("ns", "other") == 0


async def test_tokens_are_sealed_and_bound_to_their_job(redis: Redis) -> None:
    tokens = JobTokens(redis, OperatorKeys(["k1"]))
    await tokens.record("ns", "job-a", "ghs_secret", time.time() + 3600)
    raw = await redis.lrange(keys.github_job_tokens("ns", "job-a"), 0, -1)  # type: ignore[misc]
    assert raw and b"ghs_secret" not in raw[0]
    await redis.rpush(keys.github_job_tokens("ns", "job-b"), raw[0])  # type: ignore[misc]
    assert await tokens.live("ns", "job-b") is None
    rotated = JobTokens(redis, OperatorKeys(["k2", "k1"]))
    assert await rotated.live("ns", "job-a") == "ghs_secret"
    assert await tokens.take("ns", "job-a") == ["ghs_secret"]
    assert await tokens.take("ns", "job-a") == []


async def test_only_long_lived_tokens_are_reused(redis: Redis) -> None:
    tokens = JobTokens(redis, OperatorKeys(["k1"]))
    await tokens.record("ns", "j", "ghs_short", time.time() + 60)
    assert await tokens.live("ns", "j") is None
    await tokens.record("ns", "j", "ghs_long", time.time() + 3600)
    assert await tokens.live("ns", "j") == "ghs_long"
    await tokens.record("ns", "j", "ghs_dead", time.time() - 1)
    assert sorted(await tokens.take("ns", "j")) == ["ghs_long", "ghs_short"]
