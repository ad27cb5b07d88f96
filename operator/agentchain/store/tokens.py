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
* **Redis cannot vouch for a token.** :meth:`TokenStore.resolve` derives the token
  again from the record's tenant, job and uid and compares: a record someone wrote
  straight into Redis for a token of their own choosing resolves to nothing, and the
  uid a resolved token carries is proven (GitHub token refresh is bound to it). A
  record without a uid (written before uids were recorded) resolves to nothing either.
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
import hmac
from dataclasses import dataclass

from redis.asyncio import Redis

from agentchain.prompts.rules import storetrust
from agentchain.store import keys, signing
from agentchain.store.signing import OperatorKeys

# Tokens are 43 characters; anything far longer is not ours and is not worth hashing.
_MAX_PRESENTED_TOKEN_CHARS = 256

# KEYS[1] token digest key; ARGV = tenant, job, chain, ttl seconds, uid, trust. Writes the
# scope unless the token is live (kept as is, given its uid if it was recorded without
# one: the digest is of the token derived from that uid) or revoked (stays dead);
# answers 0 when revoked.
_ISSUE = """
local revoked = redis.call('HGET', KEYS[1], 'revoked')
if revoked then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSETNX', KEYS[1], 'uid', ARGV[5])
  redis.call('HSETNX', KEYS[1], 'trust', ARGV[6])
  return 1
end
redis.call('HSET', KEYS[1], 'tenant', ARGV[1], 'job', ARGV[2], 'chain', ARGV[3], 'uid', ARGV[5])
redis.call('HSET', KEYS[1], 'trust', ARGV[6])
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
    uid: str
    """The AgentJob incarnation, proven by the token itself."""
    trust: str = storetrust.TRUSTED
    """The trust mark of what the job writes to the store (``prompts/rules/storetrust.py``)."""


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
        self,
        tenant: str,
        job_name: str,
        uid: str,
        chain_id: str,
        ttl_seconds: int,
        *,
        trust: str = storetrust.TRUSTED,
    ) -> str:
        """The job's token, its digest recorded in Redis; the same token on every call.

        ``trust`` is the mark its store entries get (``storetrust.mark_of`` its event).

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
            keys=[keys.job_token(token_digest(token))],
            args=[tenant, job_name, chain_id, ttl, uid, trust],
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
        try:
            tenant, job = fields[b"tenant"].decode("utf-8"), fields[b"job"].decode("utf-8")
            chain = fields[b"chain"].decode("utf-8")
            uid = fields[b"uid"].decode("utf-8")
            trust = fields[b"trust"].decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            return None  # Not a record this code wrote (or one from before uids).
        if not self._derived(token, tenant, job, uid):
            return None  # Written into Redis for a token the operator never derived.
        return TokenScope(tenant=tenant, job_name=job, chain_id=chain, uid=uid, trust=trust)

    def _derived(self, token: str, tenant: str, job_name: str, uid: str) -> bool:
        """Whether ``token`` is the one some configured key derives for this job (constant
        time, every key tried)."""
        ok = False
        for key in self._subkeys:
            ok |= hmac.compare_digest(derive_token(key, tenant, job_name, uid), token)
        return ok

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
