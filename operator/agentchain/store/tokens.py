"""Job tokens (SPEC §7): bearer tokens scoped to one job, dead when the job ends.

A token is *derived*, not drawn: ``base64url(HMAC-SHA256(key, namespace, name, uid))``
under the operator key (``signing.py``, from a Secret). Redis holds only
``token:<sha256(token)>`` → hash (tenant, job, chain, uid), expiring after at most
:data:`~agentchain.store.keys.JOB_TOKEN_MAX_TTL_SECONDS`. So:

* **Redis never holds a usable token.** Whoever reads Redis (a dump, ``MONITOR``, a pod
  that got past the NetworkPolicy and the password) learns digests, which authenticate
  nothing: :meth:`TokenStore.resolve` hashes what is presented.
* **Issuing is idempotent without storing the plaintext.** An operator that restarts
  between "issue token" and "create the job's Secret" derives the same token again, so
  the Secret it creates is identical.
* **A new incarnation gets a new token.** The uid is part of the derivation: a job
  deleted and re-created under the same name never inherits the old job's token.
* **Revoking leaves a tombstone.** :meth:`TokenStore.revoke` replaces the hash with
  ``revoked`` for the token's maximum life, so a late replay that issues again (the
  derivation gives the same token) cannot bring a revoked token back.

Rotation: the first key derives new tokens; every key is tried when revoking, so a job
that got its token before a rotation still loses it when it ends. A token already
issued keeps resolving after a rotation (its digest is in Redis), so running jobs are
not cut off.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from redis.asyncio import Redis

from agentchain.store import keys, signing
from agentchain.store.signing import OperatorKeys

# Tokens are 43 characters; anything far longer is not ours and is not worth hashing.
_MAX_PRESENTED_TOKEN_CHARS = 256

# KEYS[1] token digest key; ARGV = tenant, job, chain, ttl seconds, uid. Writes the scope
# unless the token is live (kept as is) or revoked (stays dead); answers 0 when revoked.
_ISSUE = """
local revoked = redis.call('HGET', KEYS[1], 'revoked')
if revoked then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
redis.call('HSET', KEYS[1], 'tenant', ARGV[1], 'job', ARGV[2], 'chain', ARGV[3], 'uid', ARGV[5])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""

# KEYS = digest keys of every key's token; ARGV[1] tombstone TTL.
_REVOKE = """
for i = 1, #KEYS do
  redis.call('DEL', KEYS[i])
  redis.call('HSET', KEYS[i], 'revoked', '1')
  redis.call('EXPIRE', KEYS[i], ARGV[1])
end
"""


class TokenRevokedError(RuntimeError):
    """Issuing was asked for a job whose token was already revoked (the job ended)."""


@dataclass(frozen=True, slots=True)
class TokenScope:
    """What a job token may act for."""

    tenant: str
    job_name: str
    chain_id: str
    uid: str = ""
    """The AgentJob incarnation the token was issued to ("" for a token issued before
    the uid was recorded): what the job writes through it (its anchor) is that
    object's, not the next one's of the same name."""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def derive_token(subkey: bytes, tenant: str, job_name: str, uid: str) -> str:
    """The token of one AgentJob incarnation under a token sub-key: 43 URL-safe chars."""
    parts = (tenant.encode("utf-8"), job_name.encode("utf-8"), uid.encode("utf-8"))
    raw = bytes.fromhex(signing.mac(subkey, *parts))
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class TokenStore:
    """Issue, resolve and revoke job tokens."""

    def __init__(self, redis: Redis, operator_keys: OperatorKeys) -> None:
        self._redis = redis
        self._subkeys = operator_keys.subkeys(signing.TOKEN_PURPOSE)
        self._issue = redis.register_script(_ISSUE)
        self._revoke = redis.register_script(_REVOKE)

    async def issue(
        self, tenant: str, job_name: str, uid: str, chain_id: str, ttl_seconds: int
    ) -> str:
        """The job's token, its digest recorded in Redis; the same token on every call.

        Raises :class:`TokenRevokedError` once the token was revoked: the job ended (or
        was deleted), and no replay may hand its token out again.
        """
        if ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
        if not uid:
            raise ValueError("a job token needs the AgentJob's uid")
        ttl = min(ttl_seconds, keys.JOB_TOKEN_MAX_TTL_SECONDS)
        token = derive_token(self._subkeys[0], tenant, job_name, uid)
        live = await self._issue(
            keys=[keys.job_token(token_digest(token))], args=[tenant, job_name, chain_id, ttl, uid]
        )
        if not int(live):
            raise TokenRevokedError(f"the token of {tenant}/{job_name} ({uid}) was revoked")
        return token

    async def resolve(self, token: str) -> TokenScope | None:
        """The scope of a live token, or None for unknown, revoked or expired tokens."""
        if not token or len(token) > _MAX_PRESENTED_TOKEN_CHARS:
            return None
        fields = await self._redis.hgetall(keys.job_token(token_digest(token)))  # type: ignore[misc]
        if not fields or b"revoked" in fields:
            return None
        return TokenScope(
            tenant=fields[b"tenant"].decode("utf-8"),
            job_name=fields[b"job"].decode("utf-8"),
            chain_id=fields[b"chain"].decode("utf-8"),
            uid=fields.get(b"uid", b"").decode("utf-8"),
        )

    async def revoke(self, tenant: str, job_name: str, uid: str) -> None:
        """Kill the job's token for good (job ended or deleted); idempotent."""
        digests = [
            keys.job_token(token_digest(derive_token(key, tenant, job_name, uid)))
            for key in self._subkeys
        ]
        # A job started before tokens were derived has a random token, kept in clear.
        legacy = await self._redis.getdel(keys.legacy_job_token_by_job(tenant, job_name))
        if isinstance(legacy, bytes):
            digests.append(keys.job_token(token_digest(legacy.decode("ascii", "replace"))))
        await self._revoke(keys=digests, args=[keys.JOB_TOKEN_MAX_TTL_SECONDS])
