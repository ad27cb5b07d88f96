"""Anchors (SPEC §6, seed 004): small structured recovery points for jobs and chains.

A *job anchor* is written by the running job (through the API, with its own token) and
put back into the prompt of a retried attempt, so it must be small enough to inject
without crowding the context: at most :data:`JOB_ANCHOR_MAX_BYTES` of compact JSON.
Its shape is fixed (:data:`JOB_ANCHOR_FIELDS`) and checked here, next to the bytes that
are stored, so no other layer can store a shape the prompt builder does not expect.
The size is measured on exactly the serialization that is stored, so the limit an agent
is told about is the limit that is enforced.

A *team anchor* is kept by the operator for a whole chain (jobs and phases, hand-offs,
escalations; at most :data:`TEAM_ANCHOR_MAX_BYTES`). Several handlers may update it at
once, so :meth:`AnchorStore.update_team_anchor` is a read-modify-write under
``WATCH``/``MULTI``: the caller passes a pure function, which is re-run on a fresh copy
whenever another writer got in first, so no update is lost.

Both outlive their job or chain for audit (:data:`~agentchain.store.keys.ANCHOR_TTL_SECONDS`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from agentchain.store import keys
from agentchain.store.storeerrors import AnchorTooLargeError, ContentionError, InvalidAnchorError

JOB_ANCHOR_MAX_BYTES = 2048
TEAM_ANCHOR_MAX_BYTES = 4096
# Field name -> accepted JSON types; progress may be a sentence or a list of steps.
JOB_ANCHOR_FIELDS: dict[str, tuple[type, ...]] = {
    "task": (str,),
    "status": (str,),
    "progress": (str, list),
    "decisions": (list,),
    "waitingOn": (list,),
    "blockedBy": (list,),
    "files": (list,),
    "keyFacts": (list,),
}
# Each WATCH round has one winner, so N concurrent writers need at most N rounds.
TEAM_ANCHOR_MAX_ATTEMPTS = 100

TeamAnchorMutation = Callable[[dict[str, Any]], dict[str, Any]]


def serialize(anchor: dict[str, Any]) -> bytes:
    """Compact JSON, the form that is stored and measured."""
    try:
        text = json.dumps(anchor, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidAnchorError(f"anchor is not JSON-serializable: {exc}") from exc
    return text.encode("utf-8")


def validate_job_anchor(anchor: object) -> dict[str, Any]:
    """The anchor, if it is an object with known fields of the right types."""
    if not isinstance(anchor, dict):
        raise InvalidAnchorError(f"anchor must be a JSON object, got {type(anchor).__name__}")
    unknown = sorted(str(name) for name in anchor if name not in JOB_ANCHOR_FIELDS)
    if unknown:
        allowed = ", ".join(JOB_ANCHOR_FIELDS)
        raise InvalidAnchorError(f"unknown anchor fields {unknown}; allowed: {allowed}")
    for name, value in anchor.items():
        accepted = JOB_ANCHOR_FIELDS[name]
        if not isinstance(value, accepted):
            wanted = " or ".join("string" if t is str else "list" for t in accepted)
            raise InvalidAnchorError(f"anchor field {name!r} must be a {wanted}")
    return anchor


def _check_size(what: str, raw: bytes, limit: int) -> None:
    if len(raw) > limit:
        raise AnchorTooLargeError(what, len(raw), limit)


class AnchorStore:
    """Job anchors and team anchors, scoped by tenant."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def put_job_anchor(
        self, tenant: str, job_name: str, uid: str, anchor: dict[str, Any]
    ) -> int:
        """Replace the anchor of the job (``uid``: that object, not its name's next
        one); returns its serialized size in bytes."""
        raw = serialize(validate_job_anchor(anchor))
        _check_size("job anchor", raw, JOB_ANCHOR_MAX_BYTES)
        key = keys.job_anchor(tenant, job_name, uid)
        await self._redis.set(key, raw, ex=keys.ANCHOR_TTL_SECONDS)
        return len(raw)

    async def get_job_anchor(self, tenant: str, job_name: str, uid: str) -> dict[str, Any] | None:
        return await self._get(keys.job_anchor(tenant, job_name, uid))

    async def get_team_anchor(self, tenant: str, chain_id: str) -> dict[str, Any] | None:
        return await self._get(keys.team_anchor(tenant, chain_id))

    async def _get(self, key: str) -> dict[str, Any] | None:
        raw = await self._redis.get(key)
        if raw is None:
            return None
        loaded: dict[str, Any] = json.loads(raw)
        return loaded

    async def update_team_anchor(
        self, tenant: str, chain_id: str, mutate: TeamAnchorMutation
    ) -> dict[str, Any]:
        """Apply ``mutate`` atomically to the chain's team anchor ({} when absent).

        ``mutate`` gets a private copy and may run several times; it must not have side
        effects. Nothing is written when it raises or its result is over the limit.
        """
        key = keys.team_anchor(tenant, chain_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            for _ in range(TEAM_ANCHOR_MAX_ATTEMPTS):
                try:
                    return await self._try_update(pipe, key, mutate)
                except WatchError:
                    continue
        raise ContentionError(
            f"team anchor of chain {chain_id!r} lost {TEAM_ANCHOR_MAX_ATTEMPTS} update races"
        )

    @staticmethod
    async def _try_update(pipe: Pipeline, key: str, mutate: TeamAnchorMutation) -> dict[str, Any]:
        # Any exception leaves the pipeline watching; the caller's ``async with`` resets it.
        await pipe.watch(key)
        current = await pipe.get(key)
        updated = mutate(json.loads(current) if current is not None else {})
        if not isinstance(updated, dict):
            raise InvalidAnchorError("a team anchor mutation must return a JSON object")
        raw = serialize(updated)
        _check_size("team anchor", raw, TEAM_ANCHOR_MAX_BYTES)
        pipe.multi()  # type: ignore[no-untyped-call]
        pipe.set(key, raw, ex=keys.ANCHOR_TTL_SECONDS)
        await pipe.execute()
        return updated
