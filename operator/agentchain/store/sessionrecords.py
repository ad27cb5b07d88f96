"""Dashboard sessions: server-side, so logging out ends one at once.

A session is created when an admin token logs in to the dashboard.  The browser
holds only a random session id (a cookie); Redis holds, under the id's SHA-256 (so
reading Redis yields no cookie), the token's digest (an HMAC under the operator key,
so Redis never holds the token either), the session's CSRF token and when it began.
The web layer checks the digest against the admin tokens configured *now* on every
request, so removing a token from the Secret ends its sessions too.

The record is sealed (``sealing.py``): an HMAC under the operator key over the session
id and the record, so whoever can write Redis can neither make a session up nor copy a
real one under an id of their own; a record that does not open is no session.

A session lives :data:`keys.DASHBOARD_SESSION_TTL_SECONDS` from login and is not
extended by use: a stolen cookie is worth a bounded time.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from agentchain.store import keys, sealing, signing
from agentchain.store.signing import OperatorKeys

# Random bytes in a session id and a CSRF token (256 bits each).
ID_BYTES = 32
RECORD_FIELD = "record"  # The hash's one field: the sealed session.


@dataclass(frozen=True, slots=True)
class Session:
    """What the server knows about one logged-in browser."""

    token_digest: str
    csrf: str
    created_at: float


def _key(session_id: str) -> str:
    return keys.dashboard_session(hashlib.sha256(session_id.encode("utf-8")).hexdigest())


class SessionStore:
    def __init__(
        self,
        redis: Redis,
        operator_keys: OperatorKeys,
        ttl: int = keys.DASHBOARD_SESSION_TTL_SECONDS,
    ) -> None:
        self._redis = redis
        self._keys = operator_keys
        self.ttl = ttl

    async def create(self, token_digest: str) -> tuple[str, Session]:
        """A new session for the token with ``token_digest``; its id goes in the cookie."""
        session_id = secrets.token_urlsafe(ID_BYTES)
        session = Session(token_digest, secrets.token_urlsafe(ID_BYTES), time.time())
        fields: dict[str, object] = {"token_digest": token_digest, "csrf": session.csrf}
        fields["created_at"] = session.created_at
        payload = json.dumps(fields, sort_keys=True)
        sealed = sealing.seal(self._keys, signing.SESSION_RECORD_PURPOSE, [session_id], payload)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(_key(session_id), RECORD_FIELD, sealed)
            pipe.expire(_key(session_id), self.ttl)
            await pipe.execute()
        return session_id, session

    async def get(self, session_id: str) -> Session | None:
        """The session, or None: absent, expired, or not sealed for this id."""
        key = _key(session_id)
        raw = await self._redis.hget(key, RECORD_FIELD)  # type: ignore[misc]
        if raw is None:
            return None
        purpose = signing.SESSION_RECORD_PURPOSE
        payload = sealing.open_sealed(self._keys, purpose, [session_id], bytes(raw))
        if payload is None:
            sealing.refused("dashboard session", key, "its seal does not match")
            return None
        try:
            fields = json.loads(payload)
            digest, csrf = str(fields["token_digest"]), str(fields["csrf"])
            return Session(digest, csrf, float(fields["created_at"]))
        except (ValueError, TypeError, KeyError):
            return None  # Sealed by us, so only a bug of ours gets here: no session either.

    async def delete(self, session_id: str) -> None:
        await self._redis.delete(_key(session_id))
