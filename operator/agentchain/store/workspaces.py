"""Per-chain workspace records (issue 18): which workspace a chain has, what became of
it, and when its volume is due for deletion.

* ``spec`` is set once per chain (``HSETNX``) by its first job whose AiAgent declares a
  workspace; every later job of the chain reads it, so they all mount the same claim,
  and an AgentJob's own fields (writable by whoever may create AgentJobs) never decide
  which repository or credential a pod gets;
* ``published`` and ``pr`` record the end of publishing once (a restart that sees the
  publish Job again does nothing more);
* the release queue (a sorted set per tenant, score = when) holds the chains whose
  volume is to be deleted; the resync deletes the due ones and removes them after the
  delete answered, so a crash in between deletes again (NotFound: done);
* the pull request queue (a sorted set per tenant, score = when to try again) holds the
  chains whose branch was pushed but whose pull request GitHub failed to open for a
  transient reason; the chain's ``pull`` field holds what a retry needs (its root
  AgentJob, the push's outcome, the attempts so far).  Both go together, in one
  transaction, when the pull request is settled (opened, or given up).
"""

from __future__ import annotations

import json
import time
from typing import Any

from redis.asyncio import Redis

from agentchain.store import keys


class WorkspaceStore:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def claim(self, tenant: str, chain_id: str, spec: dict[str, Any]) -> dict[str, Any]:
        """The chain's workspace: ``spec`` if it is the first, else the one recorded."""
        key = keys.chain_workspace(tenant, chain_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, "spec", json.dumps(spec, sort_keys=True))
            pipe.hget(key, "spec")
            pipe.expire(key, keys.CHAIN_TTL_SECONDS)
            _, raw, _ = await pipe.execute()
        recorded: dict[str, Any] = json.loads(raw)
        return recorded

    async def spec(self, tenant: str, chain_id: str) -> dict[str, Any] | None:
        raw = await self._redis.hget(keys.chain_workspace(tenant, chain_id), "spec")  # type: ignore[misc]
        if raw is None:
            return None
        found: dict[str, Any] = json.loads(raw)
        return found

    async def note(self, tenant: str, chain_id: str, field: str, value: str) -> bool:
        """Record ``field`` once; True for the caller that recorded it."""
        key = keys.chain_workspace(tenant, chain_id)
        return bool(await self._redis.hsetnx(key, field, value))  # type: ignore[misc]

    async def noted(self, tenant: str, chain_id: str, field: str) -> str | None:
        raw = await self._redis.hget(keys.chain_workspace(tenant, chain_id), field)  # type: ignore[misc]
        return None if raw is None else bytes(raw).decode()

    async def release_at(self, tenant: str, chain_id: str, when: float) -> None:
        """Queue the chain's volume for deletion at ``when`` (the first time wins)."""
        await self._redis.zadd(keys.workspace_release(tenant), {chain_id: when}, nx=True)

    async def due(self, tenant: str, now: float | None = None, limit: int = 100) -> list[str]:
        at = time.time() if now is None else now
        raw = await self._redis.zrangebyscore(
            keys.workspace_release(tenant), "-inf", at, start=0, num=limit
        )
        return [bytes(item).decode() for item in raw]

    async def released(self, tenant: str, chain_id: str) -> None:
        await self._redis.zrem(keys.workspace_release(tenant), chain_id)

    async def pull_pending(
        self, tenant: str, chain_id: str, pending: dict[str, Any], when: float
    ) -> None:
        """The chain's pull request is to be tried again at ``when`` (``pending``: what
        that try needs); replaces what was recorded."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(keys.chain_workspace(tenant, chain_id), "pull", json.dumps(pending))
            pipe.zadd(keys.workspace_pulls(tenant), {chain_id: when})
            await pipe.execute()

    async def pull(self, tenant: str, chain_id: str) -> dict[str, Any] | None:
        """What the chain's pending pull request's next try needs; None: not pending."""
        raw = await self._redis.hget(keys.chain_workspace(tenant, chain_id), "pull")  # type: ignore[misc]
        if raw is None:
            return None
        found: dict[str, Any] = json.loads(raw)
        return found

    async def pulls_due(self, tenant: str, now: float | None = None, limit: int = 100) -> list[str]:
        at = time.time() if now is None else now
        raw = await self._redis.zrangebyscore(
            keys.workspace_pulls(tenant), "-inf", at, start=0, num=limit
        )
        return [bytes(item).decode() for item in raw]

    async def pull_due_at(self, tenant: str, chain_id: str) -> float | None:
        """When the chain's pending pull request is tried next (None: not pending)."""
        score = await self._redis.zscore(keys.workspace_pulls(tenant), chain_id)
        return None if score is None else float(score)

    async def pull_settled(self, tenant: str, chain_id: str) -> None:
        """The chain's pull request is no longer pending (opened, or given up)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.zrem(keys.workspace_pulls(tenant), chain_id)
            pipe.hdel(keys.chain_workspace(tenant, chain_id), "pull")
            await pipe.execute()
