"""Job tokens (SPEC §7): bearer tokens scoped to one job, dead when the job ends.

Two keys per token, both expiring together (never later than
:data:`~agentchain.store.keys.JOB_TOKEN_MAX_TTL_SECONDS`):

* ``token:<sha256(token)>`` → hash (tenant, job, chain). :meth:`TokenStore.resolve`, the
  hot path on every API request, hashes the presented token and reads this key; the
  plaintext is never a key name, so key listings, ``MONITOR`` output and slow logs do not
  show usable tokens.
* ``token-job:<tenant>:<job>`` → the plaintext token. This is the deliberate trade-off:
  storing the plaintext lets :meth:`TokenStore.ensure` be idempotent, so an operator that
  restarts between "issue token" and "create the batch Job" issues the same token again
  and the deterministic Job it creates is identical. Anyone who can read Redis can read
  live tokens; that is no worse than the cluster, where the same token sits in the pod's
  environment, and each token is worth at most one job's scope for at most a day. The
  alternative (HMAC-derived tokens) would need an operator secret to be managed and
  rotated, and revoking would then need a deny-list instead of a delete.

Issuing is one Lua script, so concurrent ``ensure`` calls for one job agree on one token.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import WatchError

from agentchain.store import keys

# Tokens are 43 characters; anything far longer is not ours and is not worth hashing.
_MAX_PRESENTED_TOKEN_CHARS = 256

# KEYS = by-job key, new token's key; ARGV = token, tenant, job, chain, ttl seconds.
_ENSURE = """
local existing = redis.call('GET', KEYS[1])
if existing then return existing end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[5])
redis.call('HSET', KEYS[2], 'tenant', ARGV[2], 'job', ARGV[3], 'chain', ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return ARGV[1]
"""


@dataclass(frozen=True, slots=True)
class TokenScope:
    """What a job token may act for."""

    tenant: str
    job_name: str
    chain_id: str


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class TokenStore:
    """Issue, resolve and revoke job tokens."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._ensure = redis.register_script(_ENSURE)

    async def ensure(self, tenant: str, job_name: str, chain_id: str, ttl_seconds: int) -> str:
        """The job's live token, issuing one if it has none; ``ttl_seconds`` is capped."""
        if ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
        ttl = min(ttl_seconds, keys.JOB_TOKEN_MAX_TTL_SECONDS)
        candidate = secrets.token_urlsafe(32)
        token = await self._ensure(
            keys=[keys.job_token_by_job(tenant, job_name), keys.job_token(token_digest(candidate))],
            args=[candidate, tenant, job_name, chain_id, ttl],
        )
        return bytes(token).decode("ascii")

    async def resolve(self, token: str) -> TokenScope | None:
        """The scope of a live token, or None for unknown, revoked or expired tokens."""
        if not token or len(token) > _MAX_PRESENTED_TOKEN_CHARS:
            return None
        fields = await self._redis.hgetall(keys.job_token(token_digest(token)))  # type: ignore[misc]
        if not fields:
            return None
        return TokenScope(
            tenant=fields[b"tenant"].decode("utf-8"),
            job_name=fields[b"job"].decode("utf-8"),
            chain_id=fields[b"chain"].decode("utf-8"),
        )

    async def revoke(self, tenant: str, job_name: str) -> None:
        """Kill the job's token (called when the job ends); idempotent."""
        by_job = keys.job_token_by_job(tenant, job_name)
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    # WATCH so a concurrent ensure() cannot slip a fresh token in between
                    # reading the old one and deleting both keys.
                    await pipe.watch(by_job)
                    token = await pipe.get(by_job)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.delete(by_job)
                    if token is not None:
                        pipe.delete(keys.job_token(token_digest(token.decode("ascii"))))
                    await pipe.execute()
                    return
                except WatchError:
                    continue
