"""Per-chain workspace records: which workspace a chain has, what became of
it, and when its volume is due for deletion.

* ``spec`` is set once per chain (``HSETNX``) by its first job whose AiAgent declares a
  workspace; every later job of the chain reads it, so they all mount the same claim,
  and an AgentJob's own fields (writable by whoever may create AgentJobs) never decide
  which repository or credential a pod gets.  It is sealed (``sealing.py``: an HMAC
  under the operator key over the namespace, the chain id and the spec), so whoever can
  write Redis cannot choose them either: a spec that does not open for its chain is
  treated as absent (and replaced by the chain's next claim), never mounted;
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

from agentchain.store import keys, sealing, signing
from agentchain.store.signing import OperatorKeys

SPEC_FIELD = "spec"
# KEYS[1] the chain's hash; ARGV[1] the spec value found not to open. Removes it only if
# it is still that value, so a genuine spec written meanwhile is never removed.
_DROP_UNSEALED = """
if redis.call('HGET', KEYS[1], 'spec') == ARGV[1] then
  return redis.call('HDEL', KEYS[1], 'spec')
end
return 0
"""


class WorkspaceStore:
    def __init__(self, redis: Redis, operator_keys: OperatorKeys) -> None:
        self._redis = redis
        self._keys = operator_keys

    def _seal(self, tenant: str, chain_id: str, spec: dict[str, Any]) -> str:
        payload = json.dumps(spec, sort_keys=True)
        return sealing.seal(self._keys, signing.WORKSPACE_PURPOSE, [tenant, chain_id], payload)

    def _open(self, tenant: str, chain_id: str, raw: bytes) -> dict[str, Any] | None:
        """The spec sealed for this chain, or None (logged once)."""
        subject = [tenant, chain_id]
        payload = sealing.open_sealed(self._keys, signing.WORKSPACE_PURPOSE, subject, raw)
        found = json.loads(payload) if payload is not None else None
        if not isinstance(found, dict):
            key = keys.chain_workspace(tenant, chain_id)
            sealing.refused("chain workspace", key, "its seal does not match this chain")
            return None
        return found

    async def claim(self, tenant: str, chain_id: str, spec: dict[str, Any]) -> dict[str, Any]:
        """The chain's workspace: ``spec`` if it is the first, else the one recorded.

        A recorded spec that does not open (forged, copied from another chain, or
        written before specs were sealed) is removed and the claim made again."""
        key = keys.chain_workspace(tenant, chain_id)
        sealed = self._seal(tenant, chain_id, spec)
        for _ in range(3):  # Each pass removes one bad value; a third is not expected.
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hsetnx(key, SPEC_FIELD, sealed)
                pipe.hget(key, SPEC_FIELD)
                pipe.expire(key, keys.CHAIN_TTL_SECONDS)
                _, raw, _ = await pipe.execute()
            recorded = self._open(tenant, chain_id, bytes(raw))
            if recorded is not None:
                return recorded
            await self._redis.eval(_DROP_UNSEALED, 1, key, raw)  # type: ignore[misc]
        raise RuntimeError(f"the workspace record of chain {tenant}/{chain_id} keeps changing")

    async def spec(self, tenant: str, chain_id: str) -> dict[str, Any] | None:
        """The chain's recorded workspace; None when it has none that opens."""
        raw = await self._redis.hget(keys.chain_workspace(tenant, chain_id), SPEC_FIELD)  # type: ignore[misc]
        return None if raw is None else self._open(tenant, chain_id, bytes(raw))

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
