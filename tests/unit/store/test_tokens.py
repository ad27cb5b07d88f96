"""Job tokens against a real Redis (SPEC §7).

Aspects covered:
- ensure issues a URL-safe token and resolves to its (tenant, job, chain) scope;
- ensure is idempotent per job, also under concurrency, and distinct across jobs/tenants;
- the plaintext token is never part of a key name (look-ups by sha256);
- revoke kills the token and is idempotent; unknown, empty or absurd tokens resolve to None;
- the TTL is capped at 24 h, and an expired token no longer resolves.
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from agentchain.store import keys
from agentchain.store.tokens import TokenScope, TokenStore, token_digest

pytestmark = pytest.mark.redis


@pytest.fixture
def tokens(redis: Redis) -> TokenStore:
    return TokenStore(redis)


async def test_token_resolves_to_its_scope(tokens: TokenStore) -> None:
    token = await tokens.ensure("team-a", "job-1", "chain-9", 3600)
    assert len(token) == 43 and token.replace("-", "").replace("_", "").isalnum()
    assert await tokens.resolve(token) == TokenScope("team-a", "job-1", "chain-9")


async def test_ensure_is_idempotent_per_job(tokens: TokenStore) -> None:
    first = await tokens.ensure("team-a", "job-1", "chain-9", 3600)
    again = await asyncio.gather(*(tokens.ensure("team-a", "job-1", "c", 60) for _ in range(20)))
    assert set(again) == {first}


async def test_concurrent_first_issue_agrees_on_one_token(tokens: TokenStore) -> None:
    issued = await asyncio.gather(*(tokens.ensure("team-a", "job", "c", 60) for _ in range(30)))
    assert len(set(issued)) == 1


async def test_jobs_and_tenants_get_distinct_tokens(tokens: TokenStore) -> None:
    a = await tokens.ensure("team-a", "job", "c", 60)
    b = await tokens.ensure("team-b", "job", "c", 60)
    c = await tokens.ensure("team-a", "other", "c", 60)
    assert len({a, b, c}) == 3
    scope = await tokens.resolve(b)
    assert scope is not None and scope.tenant == "team-b"


async def test_plaintext_never_appears_in_key_names(tokens: TokenStore, redis: Redis) -> None:
    token = await tokens.ensure("team-a", "job", "c", 60)
    names = [name.decode() for name in await redis.keys("*")]
    assert not any(token in name for name in names)
    assert keys.job_token(token_digest(token)) in names


async def test_revoke_kills_the_token(tokens: TokenStore, redis: Redis) -> None:
    token = await tokens.ensure("team-a", "job", "c", 60)
    await tokens.revoke("team-a", "job")
    await tokens.revoke("team-a", "job")
    assert await tokens.resolve(token) is None
    assert await redis.dbsize() == 0
    assert await tokens.ensure("team-a", "job", "c", 60) != token


@pytest.mark.parametrize("presented", ["", "nope", "x" * 10_000, "\udcff"])
async def test_unknown_tokens_resolve_to_none(tokens: TokenStore, presented: str) -> None:
    await tokens.ensure("team-a", "job", "c", 60)
    assert await tokens.resolve(presented) is None


async def test_ttl_is_capped_at_a_day(tokens: TokenStore, redis: Redis) -> None:
    token = await tokens.ensure("team-a", "job", "c", 10 * 24 * 3600)
    for key in (keys.job_token(token_digest(token)), keys.job_token_by_job("team-a", "job")):
        assert 0 < await redis.ttl(key) <= keys.JOB_TOKEN_MAX_TTL_SECONDS


async def test_expired_token_no_longer_resolves(tokens: TokenStore) -> None:
    token = await tokens.ensure("team-a", "job", "c", 1)
    await asyncio.sleep(1.2)
    assert await tokens.resolve(token) is None


async def test_non_positive_ttl_is_refused(tokens: TokenStore) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        await tokens.ensure("team-a", "job", "c", 0)
