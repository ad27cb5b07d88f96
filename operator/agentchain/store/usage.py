"""A chain's budget usage in Redis: reported tokens and cost, attempts, first launch.

Counters, so concurrent reports add up (HINCRBY / HINCRBYFLOAT in one transaction with
the read of the totals); attempts are a set of ``job#attempt``, so a replayed launch
counts once; the start is set once (HSETNX).  Everything lives as long as chain records.
"""

from __future__ import annotations

from redis.asyncio import Redis

from agentchain.policy.budgets import ChainUsage
from agentchain.store import keys


def _usage(fields: dict[bytes, bytes], attempts: int) -> ChainUsage:
    started = fields.get(b"started")
    return ChainUsage(
        tokens=int(fields.get(b"tokens") or 0),
        cost=float(fields.get(b"cost") or 0.0),
        attempts=attempts,
        started=float(started) if started else None,
    )


class UsageStore:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def report(
        self, tenant: str, chain: str, job: str, tokens: int, cost: float
    ) -> tuple[ChainUsage, int, float]:
        """Add a job's report; the chain's totals and the job's own."""
        key = keys.flow_usage(tenant, chain)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(key, "tokens", tokens)
            pipe.hincrbyfloat(key, "cost", cost)
            pipe.hincrby(key, f"job:{job}:tokens", tokens)
            pipe.hincrbyfloat(key, f"job:{job}:cost", cost)
            pipe.expire(key, keys.CHAIN_TTL_SECONDS)
            pipe.hgetall(key)
            pipe.scard(keys.flow_attempts(tenant, chain))
            answers = await pipe.execute()
        fields, attempts = answers[5], answers[6]
        return _usage(fields, int(attempts)), int(answers[2]), float(answers[3])

    async def launched(
        self, tenant: str, chain: str, job: str, attempt: int, now: float
    ) -> ChainUsage:
        """Count a launch (once per job and attempt) and the chain's start; the totals."""
        key, attempts_key = keys.flow_usage(tenant, chain), keys.flow_attempts(tenant, chain)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, "started", repr(now))
            pipe.sadd(attempts_key, f"{job}#{attempt}")
            pipe.expire(key, keys.CHAIN_TTL_SECONDS)
            pipe.expire(attempts_key, keys.CHAIN_TTL_SECONDS)
            pipe.hgetall(key)
            pipe.scard(attempts_key)
            answers = await pipe.execute()
        return _usage(answers[4], int(answers[5]))

    async def get(self, tenant: str, chain: str) -> ChainUsage:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(keys.flow_usage(tenant, chain))
            pipe.scard(keys.flow_attempts(tenant, chain))
            fields, attempts = await pipe.execute()
        return _usage(fields, int(attempts))
