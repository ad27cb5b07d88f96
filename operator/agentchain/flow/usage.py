"""A chain's budget usage in Redis: reported tokens and cost, attempts, first launch.

Counters, so concurrent reports add up (HINCRBY / HINCRBYFLOAT in one transaction with
the read of the totals); attempts are a set of ``job#attempt``, so a replayed launch
counts once; the start is set once (HSETNX).  The same is counted per agent of the
chain (``agent:<trigger>:*`` fields and a set per agent), in the same transaction as
the chain's, for the agents' own budgets.  Everything lives as long as chain records.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from agentchain.flow.rules.budgets import ChainUsage
from agentchain.store import keys


@dataclass(frozen=True)
class Usage:
    """A chain's totals and one agent's share of them."""

    chain: ChainUsage
    agent: ChainUsage


@dataclass(frozen=True)
class Report:
    """The usage after a report, with the reporting job's own totals."""

    usage: Usage
    job_tokens: int
    job_cost: float
    job_turns: int = 0
    job_input_tokens: int = 0
    job_output_tokens: int = 0


def _usage(fields: dict[bytes, bytes], attempts: int, prefix: str = "") -> ChainUsage:
    started = fields.get(f"{prefix}started".encode())
    return ChainUsage(
        tokens=int(fields.get(f"{prefix}tokens".encode()) or 0),
        cost=float(fields.get(f"{prefix}cost".encode()) or 0.0),
        attempts=attempts,
        started=float(started) if started else None,
    )


def _both(fields: dict[bytes, bytes], attempts: int, agent_attempts: int, agent: str) -> Usage:
    return Usage(_usage(fields, attempts), _usage(fields, agent_attempts, f"agent:{agent}:"))


class UsageStore:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def report(
        self,
        tenant: str,
        chain: str,
        job: str,
        tokens: int,
        cost: float,
        agent: str = "",
        turns: int = 0,
        split: tuple[int, int] = (0, 0),
    ) -> Report:
        """Add a job (of ``agent``)'s report; the chain's, the agent's and the job's totals
        (turns and the ``split`` of its tokens into input and output: the job's only, no
        budget counts them)."""
        key = keys.flow_usage(tenant, chain)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(key, "tokens", tokens)
            pipe.hincrbyfloat(key, "cost", cost)
            pipe.hincrby(key, f"job:{job}:tokens", tokens)
            pipe.hincrbyfloat(key, f"job:{job}:cost", cost)
            pipe.hincrby(key, f"agent:{agent}:tokens", tokens)
            pipe.hincrbyfloat(key, f"agent:{agent}:cost", cost)
            pipe.expire(key, keys.CHAIN_TTL_SECONDS)
            pipe.hgetall(key)
            pipe.scard(keys.flow_attempts(tenant, chain))
            pipe.scard(keys.flow_agent_attempts(tenant, chain, agent))
            pipe.hincrby(key, f"job:{job}:turns", turns)
            pipe.hincrby(key, f"job:{job}:input_tokens", split[0])
            pipe.hincrby(key, f"job:{job}:output_tokens", split[1])
            answers = await pipe.execute()
        usage = _both(answers[7], int(answers[8]), int(answers[9]), agent)
        job_totals = (int(answers[2]), float(answers[3]), int(answers[10]))
        return Report(usage, *job_totals, int(answers[11]), int(answers[12]))

    async def launched(
        self, tenant: str, chain: str, job: str, attempt: int, now: float, agent: str = ""
    ) -> Usage:
        """Count a launch (once per job and attempt) and the chain's and agent's start."""
        key, attempts_key = keys.flow_usage(tenant, chain), keys.flow_attempts(tenant, chain)
        agent_key = keys.flow_agent_attempts(tenant, chain, agent)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, "started", repr(now))
            pipe.hsetnx(key, f"agent:{agent}:started", repr(now))
            pipe.sadd(attempts_key, f"{job}#{attempt}")
            pipe.sadd(agent_key, f"{job}#{attempt}")
            for name in (key, attempts_key, agent_key):
                pipe.expire(name, keys.CHAIN_TTL_SECONDS)
            pipe.hgetall(key)
            pipe.scard(attempts_key)
            pipe.scard(agent_key)
            answers = await pipe.execute()
        return _both(answers[7], int(answers[8]), int(answers[9]), agent)

    async def get(self, tenant: str, chain: str, agent: str = "") -> Usage:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(keys.flow_usage(tenant, chain))
            pipe.scard(keys.flow_attempts(tenant, chain))
            pipe.scard(keys.flow_agent_attempts(tenant, chain, agent))
            fields, attempts, agent_attempts = await pipe.execute()
        return _both(fields, int(attempts), int(agent_attempts), agent)
