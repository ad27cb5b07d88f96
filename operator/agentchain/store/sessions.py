"""Dashboard sessions (issue 19): server-side, so logging out ends one at once.

A session is created when an admin token logs in to the dashboard.  The browser
holds only a random session id (a cookie); Redis holds, under the id's SHA-256 (so
reading Redis yields no cookie), the token's digest (an HMAC under the operator key,
so Redis never holds the token either), the session's CSRF token and when it began.
The web layer checks the digest against the admin tokens configured *now* on every
request, so removing a token from the Secret ends its sessions too.

A session lives :data:`keys.DASHBOARD_SESSION_TTL_SECONDS` from login and is not
extended by use: a stolen cookie is worth a bounded time.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from agentchain.store import keys

# Random bytes in a session id and a CSRF token (256 bits each).
ID_BYTES = 32


@dataclass(frozen=True, slots=True)
class Session:
    """What the server knows about one logged-in browser."""

    token_digest: str
    csrf: str
    created_at: float


def _key(session_id: str) -> str:
    return keys.dashboard_session(hashlib.sha256(session_id.encode("utf-8")).hexdigest())


class SessionStore:
    def __init__(self, redis: Redis, ttl: int = keys.DASHBOARD_SESSION_TTL_SECONDS) -> None:
        self._redis = redis
        self.ttl = ttl

    async def create(self, token_digest: str) -> tuple[str, Session]:
        """A new session for the token with ``token_digest``; its id goes in the cookie."""
        session_id = secrets.token_urlsafe(ID_BYTES)
        session = Session(token_digest, secrets.token_urlsafe(ID_BYTES), time.time())
        fields = {
            "token_digest": session.token_digest,
            "csrf": session.csrf,
            "created_at": repr(session.created_at),
        }
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(_key(session_id), mapping=fields)
            pipe.expire(_key(session_id), self.ttl)
            await pipe.execute()
        return session_id, session

    async def get(self, session_id: str) -> Session | None:
        raw = await self._redis.hgetall(_key(session_id))  # type: ignore[misc]
        try:
            return Session(
                raw[b"token_digest"].decode(), raw[b"csrf"].decode(), float(raw[b"created_at"])
            )
        except (KeyError, ValueError, UnicodeDecodeError):
            return None  # Absent, expired, or not one this code wrote: no session.

    async def delete(self, session_id: str) -> None:
        await self._redis.delete(_key(session_id))
