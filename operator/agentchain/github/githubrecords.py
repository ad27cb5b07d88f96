"""GitHub write-back records, job installation tokens and comment-command claims, in Redis.

**Chains** (:class:`WriteBackRecords`): per chain, the id of its comment and Check Run
and the digest of what was last written to each (``github:chain:``), the pull request its
workspace opened and, per reviewing job, its posted review's id.  Creating one is
claimed first (``github:claim:``, ``SET NX`` with an owner token and a TTL, released by
compare-and-delete), so two flushes or two replicas never create two; and the engine
looks for its marked comment on the issue before creating one, so a crash between the
create and :meth:`WriteBackRecords.set_id` still finds the same comment (a review: its
marked review on the pull request, before :meth:`WriteBackRecords.set_review`).

**Job tokens** (:class:`JobTokens`): the scope fixed at launch (``github:job-scope:``),
sealed with the operator key over the job's namespace, name and uid (``sealing.py``),
so whoever can write Redis can neither choose a job's repository or permissions nor
hand one incarnation's scope to another of the same name (dropped at the job's end);
and every installation token minted for the job (``github:job-tokens:``), *sealed*:
AES-GCM under a sub-key of the operator key, bound to the job, so Redis alone never
yields a usable GitHub token.  They are kept only to be revoked at the job's end:
:meth:`JobTokens.take` removes and returns them in one transaction, so two revokers
never both get them, and a token recorded after that (a refresh racing the end) is
found by the refresh itself (it checks the job is still alive after recording).

**Comment commands** (:func:`claim_command`, :func:`claim_answer`): a comment's command
is claimed with ``SET NX`` (``github:applied:<id>``) before it acts, so it acts at most
once however its comment comes back (a replayed delivery, a redelivery under a new
delivery id, another body carrying the same comment id); its answer is claimed apart
(``github:command:<id>``, kept as long as GitHub may redeliver), so a redelivered
comment is answered once, even by two replicas at once. GitHub would not add the same
reaction twice anyway, but a reply would be written twice.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from redis.asyncio import Redis

from agentchain.store import keys, sealing, signing
from agentchain.store.signing import OperatorKeys

_OWNER_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_LEVELS = frozenset({"read", "write"})
SEAL_PURPOSE = b"agentchain/github-token/v1"
REVIEW_FIELD = "review:"
REPLY_FIELD = "reply:"
"""A chain record's field per reviewing job: ``review:<job name>``."""
REUSE_MARGIN_SECONDS = 30 * 60
"""A recorded token with less life left than this is not handed to a new attempt."""

# KEYS[1] claim; ARGV[1] owner token. Deletes the claim only if this owner holds it.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True)
class ChainRecord:
    comment_id: int | None = None
    comment_digest: str | None = None
    check_id: int | None = None
    check_digest: str | None = None
    final: bool = False
    """The chain's end is written: nothing about it can change any more (until its
    pull request opens: :meth:`WriteBackRecords.set_pull`)."""
    pull: str | None = None
    """The pull request the chain's workspace opened, once it did: ``owner/name#N``."""
    reviews: dict[str, str] = field(default_factory=dict)
    """Per job, what became of its review: the review's id, or ``refused``."""
    replies: dict[str, str] = field(default_factory=dict)
    """Per follow-up round's job, the id of its reply in a review thread."""


def _int(value: bytes | None) -> int | None:
    return int(value) if value else None


def _text(value: bytes | None) -> str | None:
    return value.decode() if value else None


class WriteBackRecords:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def get(self, namespace: str, chain_id: str) -> ChainRecord:
        raw = await self._redis.hgetall(keys.github_chain(namespace, chain_id))  # type: ignore[misc]
        pull = _text(raw.get(b"pull"))
        return ChainRecord(
            _int(raw.get(b"comment")),
            _text(raw.get(b"comment-digest")),
            _int(raw.get(b"check")),
            _text(raw.get(b"check-digest")),
            _text(raw.get(b"final")) == (pull or "1"),
            pull,
            {
                k.decode()[len(REVIEW_FIELD) :]: v.decode()
                for k, v in raw.items()
                if k.startswith(REVIEW_FIELD.encode())
            },
            {
                k.decode()[len(REPLY_FIELD) :]: v.decode()
                for k, v in raw.items()
                if k.startswith(REPLY_FIELD.encode())
            },
        )

    async def _set(self, namespace: str, chain_id: str, fields: dict[str, str | int]) -> None:
        key = keys.github_chain(namespace, chain_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)
            pipe.expire(key, keys.CHAIN_TTL_SECONDS)
            await pipe.execute()

    async def set_id(self, namespace: str, chain_id: str, kind: str, object_id: int) -> None:
        """Record the comment's or Check Run's id (``kind``: comment or check)."""
        await self._set(namespace, chain_id, {kind: object_id})

    async def set_digest(self, namespace: str, chain_id: str, kind: str, digest: str) -> None:
        await self._set(namespace, chain_id, {f"{kind}-digest": digest})

    async def set_final(self, namespace: str, chain_id: str, pull: str | None) -> None:
        """Mark the chain final as of pull request ``pull`` (None: it had none): a pull
        request recorded after this (:meth:`set_pull`) makes it not final again, so
        its reviews are posted, whichever of the two writes came first."""
        await self._set(namespace, chain_id, {"final": pull or "1"})

    async def reopen(self, namespace: str, chain_id: str) -> None:
        """The chain runs again (a follow-up round): its comment is written again."""
        await self._redis.hdel(keys.github_chain(namespace, chain_id), "final")  # type: ignore[misc]

    async def set_pull(self, namespace: str, chain_id: str, repository: str, number: int) -> None:
        """The chain's workspace opened pull request ``number`` of ``repository``: its
        reviews are due, so a chain already final is looked at once more."""
        await self._set(namespace, chain_id, {"pull": f"{repository}#{number}"})

    async def set_reply(self, namespace: str, chain_id: str, job: str, reply_id: str) -> None:
        """Record the reply a follow-up round's ``job`` posted in its review thread."""
        await self._set(namespace, chain_id, {f"{REPLY_FIELD}{job}": reply_id})

    async def set_review(self, namespace: str, chain_id: str, job: str, outcome: str) -> None:
        """Record what became of ``job``'s review (its id, or ``refused``)."""
        await self._set(namespace, chain_id, {f"{REVIEW_FIELD}{job}": outcome})

    async def forget_id(self, namespace: str, chain_id: str, kind: str) -> None:
        key = keys.github_chain(namespace, chain_id)
        await self._redis.hdel(key, kind, f"{kind}-digest")  # type: ignore[misc]

    async def claim(self, namespace: str, chain_id: str) -> str | None:
        """An owner token when this caller may create the chain's objects now, else None."""
        owner = secrets.token_hex(16)
        key = keys.github_claim(namespace, chain_id)
        got = await self._redis.set(key, owner, nx=True, ex=keys.GITHUB_CLAIM_TTL_SECONDS)
        return owner if got else None

    async def claim_left(self, namespace: str, chain_id: str) -> float:
        """Seconds until the chain's creation claim expires (0: there is none)."""
        left = await self._redis.pttl(keys.github_claim(namespace, chain_id))
        return max(0.0, int(left) / 1000)

    async def release(self, namespace: str, chain_id: str, owner: str) -> None:
        await self._redis.eval(_RELEASE, 1, keys.github_claim(namespace, chain_id), owner)  # type: ignore[misc]


class JobTokens:
    def __init__(self, redis: Redis, operator_keys: OperatorKeys) -> None:
        self._redis = redis
        self._operator_keys = operator_keys
        self._keys = operator_keys.subkeys(SEAL_PURPOSE)

    # -- sealing ----------------------------------------------------------------------
    def seal(self, namespace: str, job: str, token: str) -> str:
        nonce = os.urandom(12)
        sealed = AESGCM(self._keys[0]).encrypt(nonce, token.encode(), f"{namespace}/{job}".encode())
        return base64.b64encode(nonce + sealed).decode()

    def unseal(self, namespace: str, job: str, sealed: str) -> str | None:
        raw = base64.b64decode(sealed)
        for key in self._keys:  # Every configured key: a rotation must not orphan tokens.
            try:
                plain = AESGCM(key).decrypt(raw[:12], raw[12:], f"{namespace}/{job}".encode())
            except InvalidTag:
                continue
            return plain.decode()
        return None

    # -- scope ------------------------------------------------------------------------
    async def set_scope(self, namespace: str, job: str, uid: str, record: dict[str, Any]) -> None:
        """Record the scope of incarnation ``uid`` of the job (sealed, bound to all three)."""
        payload = json.dumps({**record, "uid": uid}, sort_keys=True)
        subject = [namespace, job, uid]
        sealed = sealing.seal(self._operator_keys, signing.GITHUB_SCOPE_PURPOSE, subject, payload)
        key = keys.github_job_scope(namespace, job)
        await self._redis.set(key, sealed, ex=keys.GITHUB_JOB_TTL_SECONDS)

    async def scope(self, namespace: str, job: str, uid: str) -> dict[str, Any] | None:
        """The scope recorded for incarnation ``uid`` of the job; None when there is none,
        it is another incarnation's, or it does not open (forged, altered, unsealed)."""
        key = keys.github_job_scope(namespace, job)
        raw = await self._redis.get(key)
        if raw is None:
            return None
        subject = [namespace, job, uid]
        purpose = signing.GITHUB_SCOPE_PURPOSE
        payload = sealing.open_sealed(self._operator_keys, purpose, subject, bytes(raw))
        if payload is None:
            if not self._other_incarnation(namespace, job, bytes(raw)):
                sealing.refused("GitHub job scope", key, "its seal does not match")
            return None
        record = json.loads(payload)
        return record if _sound_scope(record, uid) else None

    def _other_incarnation(self, namespace: str, job: str, raw: bytes) -> bool:
        """Whether ``raw`` is the genuine scope of another incarnation of the job (one
        deleted and created again): expected, so not worth a warning."""
        try:
            uid = json.loads(raw[sealing.MAC_CHARS :])["uid"]
        except (ValueError, TypeError, KeyError):
            return False
        subject = [namespace, job, str(uid)]
        purpose = signing.GITHUB_SCOPE_PURPOSE
        return sealing.open_sealed(self._operator_keys, purpose, subject, raw) is not None

    async def drop_scope(self, namespace: str, job: str, uid: str) -> None:
        """Forget the scope of incarnation ``uid`` (its end): nothing can be refreshed for
        it any more.  Another incarnation's (the job created again meanwhile) stays."""
        key = keys.github_job_scope(namespace, job)
        raw = await self._redis.get(key)
        if raw is None or await self.scope(namespace, job, uid) is None:
            return
        await self._redis.eval(_RELEASE, 1, key, raw)  # type: ignore[misc]

    # -- tokens -----------------------------------------------------------------------
    async def record(self, namespace: str, job: str, token: str, expires_at: float) -> None:
        entry = json.dumps({"sealed": self.seal(namespace, job, token), "expires": expires_at})
        key = keys.github_job_tokens(namespace, job)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, entry)
            pipe.expire(key, keys.GITHUB_JOB_TTL_SECONDS)
            await pipe.execute()

    async def _entries(self, namespace: str, job: str, raw: list[bytes]) -> list[tuple[str, float]]:
        found = []
        for item in raw:
            entry = json.loads(item)
            token = self.unseal(namespace, job, entry["sealed"])
            if token is not None:
                found.append((token, float(entry["expires"])))
        return found

    async def count(self, namespace: str, job: str) -> int:
        """How many tokens are recorded for the job (minted and not yet revoked)."""
        key = keys.github_job_tokens(namespace, job)
        return int(await self._redis.llen(key))  # type: ignore[misc]

    async def live(self, namespace: str, job: str) -> str | None:
        """The most recent recorded token with at least REUSE_MARGIN_SECONDS to live."""
        key = keys.github_job_tokens(namespace, job)
        raw = await self._redis.lrange(key, 0, -1)  # type: ignore[misc]
        for token, expires in reversed(await self._entries(namespace, job, raw)):
            if expires - time.time() > REUSE_MARGIN_SECONDS:
                return token
        return None

    async def take(self, namespace: str, job: str) -> list[str]:
        """Every recorded token of the job, removed from the record in the same step."""
        key = keys.github_job_tokens(namespace, job)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lrange(key, 0, -1)
            pipe.delete(key)
            raw, _ = await pipe.execute()
        now = time.time()
        return [t for t, expires in await self._entries(namespace, job, raw) if expires > now]


def _sound_scope(record: object, uid: str) -> bool:
    """Whether a scope that opened is one ``githubscope.Scope.to_record`` makes: a
    positive installation, an ``owner/name`` repository, read or write permissions."""
    if not isinstance(record, dict) or record.get("uid") != uid:
        return False
    installation, repository = record.get("installation"), record.get("repository")
    permissions = record.get("permissions")
    return (
        isinstance(installation, int)
        and installation > 0
        and isinstance(repository, str)
        and bool(_OWNER_NAME.match(repository))
        and isinstance(permissions, dict)
        and all(isinstance(k, str) and v in _LEVELS for k, v in permissions.items())
    )


async def claim_answer(redis: Redis, comment_id: int) -> bool:
    """Whether this is the first answer to ``comment_id`` (and it is claimed now)."""
    claimed = await redis.set(
        keys.github_command(comment_id), "1", nx=True, ex=keys.GITHUB_COMMAND_TTL_SECONDS
    )
    return bool(claimed)


async def claim_command(redis: Redis, comment_id: int) -> bool:
    """Whether ``comment_id``'s command acts now (claimed now; False: it already did)."""
    claimed = await redis.set(
        keys.github_command_applied(comment_id),
        "1",
        nx=True,
        ex=keys.GITHUB_COMMAND_APPLIED_TTL_SECONDS,
    )
    return bool(claimed)
