"""The store API over a namespace's quota (issue 14): a clear 413, as JSON.

Aspects covered: the quota comes from the operator's settings; a job token's write past
its namespace's entry quota answers 413 ``store quota exceeded`` naming the use and the
limit, and other namespaces still write.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from agentchain.settings import Settings
from agentchain.web.app import build_app
from tests.unit.web.conftest import make_runtime


async def test_a_write_over_the_quota_is_a_413_json(
    redis: Redis, with_settings: Callable[..., Settings]
) -> None:
    rt = make_runtime(redis, with_settings(store_quota_entries=2))
    tokens = {
        ns: await rt.tokens.issue(ns, "job", "uid", "chain", 600) for ns in ("team-a", "team-b")
    }
    auth = {ns: {"Authorization": f"Bearer {t}"} for ns, t in tokens.items()}
    async with TestClient(TestServer(build_app(rt))) as client:
        for key in ("one", "two"):
            put = await client.put(
                f"/api/store/notes/{key}", json={"value": "v"}, headers=auth["team-a"]
            )
            assert put.status in (200, 201), await put.text()
        refused = await client.put(
            "/api/store/notes/three", json={"value": "v"}, headers=auth["team-a"]
        )
        assert refused.status == 413 and refused.content_type == "application/json"
        body = await refused.json()
        assert body["error"] == "store quota exceeded"
        assert (body["used"], body["limit"]) == (2, 2) and "2 of 2 entries" in body["detail"]
        other = await client.put(
            "/api/store/notes/three", json={"value": "v"}, headers=auth["team-b"]
        )
        assert other.status in (200, 201)
