"""The store API's times are seconds since the epoch, as docs/store-api.md says.

Aspects covered: ``created``, ``updated`` and ``expiresAt`` of a written and a read
entry are (fractional) seconds since the epoch, ``expiresAt`` 90 days after ``updated``
for a plain write and ``null`` for a persistent one; a plain write over a persistent
entry leaves it persistent, as the page says (never shortened); the page's own example
answer holds values of that unit, so a client following the docs computes today's dates,
not 1970's.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from agentchain.settings import Settings
from agentchain.store import keys
from agentchain.web.app import build_app
from tests.unit.web.conftest import make_runtime

DOC = Path(__file__).resolve().parents[3] / "docs" / "store-api.md"


def _seconds_now(value: object) -> bool:
    return isinstance(value, float | int) and abs(float(value) - time.time()) < 60


async def test_times_are_seconds_since_the_epoch(
    redis: Redis, with_settings: Callable[..., Settings]
) -> None:
    rt = make_runtime(redis, with_settings())
    token = await rt.tokens.issue("team-a", "job", "uid", "chain", 600)
    auth = {"Authorization": f"Bearer {token}"}
    async with TestClient(TestServer(build_app(rt))) as client:
        put = await client.put("/api/store/notes/tip", json={"value": "v"}, headers=auth)
        assert put.status in (200, 201), await put.text()
        written = await put.json()
        got = await client.get("/api/store/notes/tip", headers=auth)
        read = await got.json()
        forever = await client.put(
            "/api/store/notes/rule", json={"value": "v", "persistent": True}, headers=auth
        )
        kept = await forever.json()
    for entry in (written, read):
        assert _seconds_now(entry["created"]) and _seconds_now(entry["updated"]), entry
        ttl = entry["expiresAt"] - entry["updated"]
        assert abs(ttl - keys.DEFAULT_CONTEXT_TTL_SECONDS) < 2, entry
    assert _seconds_now(kept["updated"]) and kept["expiresAt"] is None


async def test_a_plain_write_over_a_persistent_entry_keeps_it_persistent(
    redis: Redis, with_settings: Callable[..., Settings]
) -> None:
    rt = make_runtime(redis, with_settings())
    token = await rt.tokens.issue("team-a", "job", "uid", "chain", 600)
    auth = {"Authorization": f"Bearer {token}"}
    async with TestClient(TestServer(build_app(rt))) as client:
        path = "/api/store/notes/rule"
        first = await client.put(path, json={"value": "v1", "persistent": True}, headers=auth)
        assert first.status in (200, 201), await first.text()
        plain = await client.put(path, json={"value": "v2"}, headers=auth)
        assert plain.status == 200, await plain.text()
        written = await plain.json()
        read = await (await client.get(path, headers=auth)).json()
    assert (written["value"], written["expiresAt"]) == ("v2", None), written
    assert (read["value"], read["expiresAt"]) == ("v2", None), read


def test_the_docs_example_and_words_say_seconds() -> None:
    text = DOC.read_text()
    example = re.search(r"```json\n(\{\"namespace\".*?\})\n```", text, re.S)
    assert example is not None
    entry = json.loads(example.group(1).replace("…", ""))
    for field in ("created", "updated", "expiresAt"):
        assert 1e9 < entry[field] < 1e10, (field, entry[field])  # Seconds: 2001..2286.
    assert abs(entry["expiresAt"] - entry["updated"] - keys.DEFAULT_CONTEXT_TTL_SECONDS) < 1
    assert "seconds since the epoch" in text
    assert "microseconds" not in text and "milliseconds" not in text
