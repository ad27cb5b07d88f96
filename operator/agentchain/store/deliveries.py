"""Webhook delivery dedup (SPEC §7): each (hook id, ``X-GitHub-Delivery``) acts once.

GitHub redelivers on timeouts and on request from the UI, and several operator replicas
(or one restarted operator) may see the same delivery. The first caller claims the
delivery with a single ``SET NX GET``: one round trip, atomic in Redis, so exactly one
of any number of concurrent callers wins, and the losers receive in the same reply the
job names the winner recorded, which the webhook returns as its 202 body again.

The record is not tenant-scoped (unlike every other key): one delivery can start agents
in several namespaces, so job names are whatever the caller stores, typically
``namespace/name``. It lasts :data:`~agentchain.store.keys.DELIVERY_TTL_SECONDS` (72 h),
longer than GitHub keeps redelivering, and survives operator restarts because it lives in
Redis. :meth:`DeliveryLog.release` exists for the one case where the winner created
nothing and wants a redelivery to be able to try again.
"""

from __future__ import annotations

import json

from redis.asyncio import Redis

from agentchain.store import keys


def _decode(raw: bytes) -> list[str]:
    names = json.loads(raw)
    return [str(name) for name in names]


class DeliveryLog:
    """First-caller-wins claims of webhook deliveries."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def claim(
        self, hook_id: str, delivery_id: str, job_names: list[str]
    ) -> tuple[bool, list[str]]:
        """``(True, job_names)`` for the first caller, else ``(False, names recorded)``."""
        previous = await self._redis.set(
            keys.delivery(hook_id, delivery_id),
            json.dumps(job_names),
            nx=True,
            get=True,
            ex=keys.DELIVERY_TTL_SECONDS,
        )
        # With GET, Redis answers the old value when NX refused, and nil when we set it.
        if isinstance(previous, bytes):
            return False, _decode(previous)
        return True, list(job_names)

    async def record(self, hook_id: str, delivery_id: str, job_names: list[str]) -> None:
        """Replace the recorded job names (e.g. once the jobs exist), keeping the claim."""
        await self._redis.set(
            keys.delivery(hook_id, delivery_id),
            json.dumps(job_names),
            xx=True,
            keepttl=True,
        )

    async def get(self, hook_id: str, delivery_id: str) -> list[str] | None:
        raw = await self._redis.get(keys.delivery(hook_id, delivery_id))
        return None if raw is None else _decode(raw)

    async def release(self, hook_id: str, delivery_id: str) -> bool:
        """Forget a claim so a redelivery can act; only for claims that created nothing."""
        return bool(await self._redis.delete(keys.delivery(hook_id, delivery_id)))
