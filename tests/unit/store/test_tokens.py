"""Job tokens against a real Redis (SPEC §7, issue 14).

Aspects covered:
- issue gives a URL-safe token that resolves to its (tenant, job, chain, uid) scope;
- issue is idempotent per AgentJob incarnation (same token on every call, concurrently
  too, and from a fresh store: an operator restart), distinct across jobs, tenants and
  uids (a job re-created under the same name gets a new token), and differs per key;
- Redis holds digests only: the plaintext is in no key name and in no value;
- revoke kills the token, is idempotent, and leaves a tombstone so a late issue cannot
  revive it; a rotated-out key's tokens are revoked too; unknown tokens resolve to None;
- the TTL is capped at 24 h, and an expired token no longer resolves.
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from agentchain.store import keys
from agentchain.store.signing import OperatorKeys
from agentchain.store.tokens import TokenRevokedError, TokenScope, TokenStore, token_digest

pytestmark = pytest.mark.redis

KEY = OperatorKeys(["test-operator-key"])


@pytest.fixture
def tokens(redis: Redis) -> TokenStore:
    return TokenStore(redis, KEY)


async def test_token_resolves_to_its_scope(tokens: TokenStore) -> None:
    token = await tokens.issue("team-a", "job-1", "uid-1", "chain-9", 3600)
    assert len(token) == 43 and token.replace("-", "").replace("_", "").isalnum()
    assert await tokens.resolve(token) == TokenScope("team-a", "job-1", "chain-9", "uid-1")


async def test_issue_is_idempotent_across_calls_and_restarts(
    tokens: TokenStore, redis: Redis
) -> None:
    first = await tokens.issue("team-a", "job-1", "uid-1", "chain-9", 3600)
    again = await asyncio.gather(
        *(tokens.issue("team-a", "job-1", "uid-1", "chain-9", 60) for _ in range(20))
    )
    assert set(again) == {first}
    restarted = TokenStore(redis, OperatorKeys(["test-operator-key"]))
    assert await restarted.issue("team-a", "job-1", "uid-1", "chain-9", 60) == first


async def test_jobs_tenants_uids_and_keys_get_distinct_tokens(
    tokens: TokenStore, redis: Redis
) -> None:
    a = await tokens.issue("team-a", "job", "u1", "c", 60)
    b = await tokens.issue("team-b", "job", "u1", "c", 60)
    c = await tokens.issue("team-a", "other", "u1", "c", 60)
    recreated = await tokens.issue("team-a", "job", "u2", "c", 60)
    other_key = await TokenStore(redis, OperatorKeys(["another"])).issue(
        "team-a", "job", "u1", "c", 60
    )
    assert len({a, b, c, recreated, other_key}) == 5
    scope = await tokens.resolve(b)
    assert scope is not None and scope.tenant == "team-b"


async def test_redis_holds_digests_only(tokens: TokenStore, redis: Redis) -> None:
    token = await tokens.issue("team-a", "job", "uid", "c", 60)
    names = [name.decode() for name in await redis.keys("*")]
    assert names == [keys.job_token(token_digest(token))]
    for name in names:
        for value in (await redis.hgetall(name)).values():  # type: ignore[misc]
            assert token.encode() not in value


async def test_revoke_kills_the_token_for_good(tokens: TokenStore, redis: Redis) -> None:
    token = await tokens.issue("team-a", "job", "uid", "c", 60)
    await tokens.revoke("team-a", "job", "uid")
    await tokens.revoke("team-a", "job", "uid")
    assert await tokens.resolve(token) is None
    # A late replay derives the same token: it must stay dead.
    with pytest.raises(TokenRevokedError):
        await tokens.issue("team-a", "job", "uid", "c", 60)
    assert await tokens.resolve(token) is None
    assert 0 < await redis.ttl(keys.job_token(token_digest(token))) <= 24 * 3600
    # The job re-created under the same name has another uid: a new, live token.
    fresh = await tokens.issue("team-a", "job", "uid-2", "c", 60)
    assert fresh != token and await tokens.resolve(fresh) is not None


async def test_revoke_covers_tokens_issued_before_a_key_rotation(redis: Redis) -> None:
    old = TokenStore(redis, OperatorKeys(["old-key"]))
    token = await old.issue("team-a", "job", "uid", "c", 60)
    rotated = TokenStore(redis, OperatorKeys(["new-key", "old-key"]))
    assert await rotated.resolve(token) is not None  # Running jobs keep working.
    await rotated.revoke("team-a", "job", "uid")
    assert await rotated.resolve(token) is None


@pytest.mark.parametrize("presented", ["", "nope", "x" * 10_000, "\udcff"])
async def test_unknown_tokens_resolve_to_none(tokens: TokenStore, presented: str) -> None:
    await tokens.issue("team-a", "job", "uid", "c", 60)
    assert await tokens.resolve(presented) is None


async def test_ttl_is_capped_at_a_day(tokens: TokenStore, redis: Redis) -> None:
    token = await tokens.issue("team-a", "job", "uid", "c", 10 * 24 * 3600)
    key = keys.job_token(token_digest(token))
    assert 0 < await redis.ttl(key) <= keys.JOB_TOKEN_MAX_TTL_SECONDS


async def test_expired_token_no_longer_resolves(tokens: TokenStore) -> None:
    token = await tokens.issue("team-a", "job", "uid", "c", 1)
    await asyncio.sleep(1.2)
    assert await tokens.resolve(token) is None


async def test_bad_arguments_are_refused(tokens: TokenStore) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        await tokens.issue("team-a", "job", "uid", "c", 0)
    with pytest.raises(ValueError, match="uid"):
        await tokens.issue("team-a", "job", "", "c", 60)
    with pytest.raises(ValueError, match="operator key"):
        OperatorKeys([])


async def test_revoke_also_kills_a_token_issued_before_the_upgrade(
    tokens: TokenStore, redis: Redis
) -> None:
    # What the previous version wrote: a random token, kept in clear per job.
    old = "random-token-of-a-job-started-before-the-upgrade"
    await redis.hset(
        keys.job_token(token_digest(old)), mapping={"tenant": "t", "job": "j", "chain": "c"}
    )  # type: ignore[misc]
    await redis.set(keys.legacy_job_token_by_job("t", "j"), old, ex=60)
    # No uid, so nothing proves the operator made it: it resolves to nothing already.
    assert await tokens.resolve(old) is None
    await tokens.revoke("t", "j", "uid")
    assert await redis.hget(keys.job_token(token_digest(old)), "revoked") == b"1"  # type: ignore[misc]
    assert await redis.exists(keys.legacy_job_token_by_job("t", "j")) == 0
