"""Anchors against a real Redis (SPEC §6, seed 004).

Aspects covered:
- job anchor round trip with compact serialization, size returned, 30-day expiry;
- size limits at the boundary: exactly 2048 bytes accepted, 2049 refused with
  ``size``/``limit`` and a message naming both, nothing stored on refusal;
- unknown fields and wrong types refused with clear messages;
- team anchor: mutation on {} when absent, 4096-byte limit, nothing written when the
  mutation raises or is too large;
- 50 concurrent team-anchor mutations with no lost update; tenant isolation.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from redis.asyncio import Redis

from agentchain.memory.anchors import JOB_ANCHOR_MAX_BYTES, TEAM_ANCHOR_MAX_BYTES, AnchorStore
from agentchain.store import keys
from agentchain.store.storeerrors import AnchorTooLargeError, InvalidAnchorError, ValueTooLargeError

pytestmark = pytest.mark.redis

T = "team-a"
UID = "uid-1"
ANCHOR: dict[str, Any] = {
    "task": "Fix auth bypass in gateway/auth.py",
    "status": "in_progress",
    "progress": [{"completed": "Identified root cause"}, {"current": "error handling"}],
    "decisions": [{"with": "tester", "decided": "parametrized tests"}],
    "waitingOn": [],
    "blockedBy": [],
    "files": ["gateway/auth.py"],
    "keyFacts": ["Must stay compatible with v1 tokens"],
}


@pytest.fixture
def anchors(redis: Redis) -> AnchorStore:
    return AnchorStore(redis)


def _sized(size: int) -> dict[str, Any]:
    base = len(json.dumps({"task": ""}, separators=(",", ":")))
    return {"task": "x" * (size - base)}


async def test_job_anchor_round_trips_compactly(anchors: AnchorStore, redis: Redis) -> None:
    size = await anchors.put_job_anchor(T, "job-1", UID, ANCHOR)
    assert size == len(json.dumps(ANCHOR, separators=(",", ":")).encode())
    assert await anchors.get_job_anchor(T, "job-1", UID) == ANCHOR
    ttl = await redis.ttl(keys.job_anchor(T, "job-1", UID))
    assert keys.ANCHOR_TTL_SECONDS - 5 < ttl <= keys.ANCHOR_TTL_SECONDS


async def test_job_anchor_limit_is_exact(anchors: AnchorStore) -> None:
    assert await anchors.put_job_anchor(T, "job", UID, _sized(JOB_ANCHOR_MAX_BYTES)) == 2048
    with pytest.raises(AnchorTooLargeError, match="2049 bytes, over the limit of 2048") as info:
        await anchors.put_job_anchor(T, "job", UID, _sized(JOB_ANCHOR_MAX_BYTES + 1))
    assert (info.value.size, info.value.limit) == (2049, 2048)
    assert isinstance(info.value, ValueTooLargeError)
    assert await anchors.get_job_anchor(T, "job", UID) == _sized(JOB_ANCHOR_MAX_BYTES)


async def test_size_counts_utf8_bytes(anchors: AnchorStore) -> None:
    with pytest.raises(AnchorTooLargeError):
        await anchors.put_job_anchor(T, "job", UID, {"task": "é" * 1100})


@pytest.mark.parametrize(
    ("anchor", "message"),
    [
        ({"task": "t", "mood": "good"}, r"unknown anchor fields \['mood'\]"),
        ({"task": 3}, "'task' must be a string"),
        ({"files": "a.py"}, "'files' must be a list"),
        ({"progress": 1}, "'progress' must be a string or list"),
        ({"keyFacts": [float("nan")]}, "not JSON-serializable"),
        (["task"], "must be a JSON object"),
    ],
)
async def test_malformed_job_anchors_are_refused(
    anchors: AnchorStore, anchor: Any, message: str
) -> None:
    with pytest.raises(InvalidAnchorError, match=message):
        await anchors.put_job_anchor(T, "job", UID, anchor)
    assert await anchors.get_job_anchor(T, "job", UID) is None


async def test_team_anchor_starts_empty(anchors: AnchorStore) -> None:
    assert await anchors.get_team_anchor(T, "c1") is None
    result = await anchors.update_team_anchor(T, "c1", lambda a: {**a, "jobs": {"j1": "Running"}})
    assert result == {"jobs": {"j1": "Running"}}
    assert await anchors.get_team_anchor(T, "c1") == result


async def test_team_anchor_refusals_write_nothing(anchors: AnchorStore) -> None:
    await anchors.update_team_anchor(T, "c1", lambda a: {"ok": True})

    def boom(anchor: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("handler bug")

    with pytest.raises(RuntimeError):
        await anchors.update_team_anchor(T, "c1", boom)
    with pytest.raises(AnchorTooLargeError, match="limit of 4096") as info:
        await anchors.update_team_anchor(T, "c1", lambda a: {"x": "y" * TEAM_ANCHOR_MAX_BYTES})
    assert info.value.limit == TEAM_ANCHOR_MAX_BYTES
    assert await anchors.get_team_anchor(T, "c1") == {"ok": True}


async def test_concurrent_team_anchor_mutations_lose_nothing(anchors: AnchorStore) -> None:
    def add(i: int) -> Any:
        return lambda a: {**a, "events": [*a.get("events", []), i]}

    await asyncio.gather(*(anchors.update_team_anchor(T, "c1", add(i)) for i in range(50)))
    anchor = await anchors.get_team_anchor(T, "c1")
    assert anchor is not None and sorted(anchor["events"]) == list(range(50))


async def test_anchors_are_per_tenant(anchors: AnchorStore) -> None:
    await anchors.put_job_anchor("team-a", "job", UID, ANCHOR)
    await anchors.update_team_anchor("team-a", "c1", lambda a: {"a": 1})
    assert await anchors.get_job_anchor("team-b", "job", UID) is None
    assert await anchors.get_team_anchor("team-b", "c1") is None


async def test_a_job_anchor_is_its_objects_not_the_next_one_of_the_same_name(
    anchors: AnchorStore,
) -> None:
    await anchors.put_job_anchor(T, "job", "uid-first", ANCHOR)
    assert await anchors.get_job_anchor(T, "job", "uid-second") is None
