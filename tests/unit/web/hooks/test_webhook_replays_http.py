"""Replays and forgeries at ``POST /webhooks/github`` and its dispatcher (issues 14, 15).

Aspects covered, over HTTP with the queue on real Redis (Kubernetes faked as in
``test_webhook_http.py``):
* the first accepted copy of a delivery fixes its content: a second, validly signed
  body under the same delivery id never replaces the queued job's body, and never
  creates a job with it, even after the first job is gone;
* a replayed signed body starts no second chain, whatever the unsigned headers say
  (another or no ``X-GitHub-Hook-ID``, another ``X-GitHub-Delivery``);
* a queue entry the webhook did not seal (written straight to Redis, as any pod that
  reaches Redis could) is dropped with one log line and counted ``forged``, never
  created, while sealed entries beside it are created.
"""

from __future__ import annotations

import json

import pytest
from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.store import keys
from agentchain.web.app import build_app
from tests.unit.web.conftest import Client
from tests.unit.web.hooks.test_webhook_http import (
    ISSUE,
    NAMESPACE,
    PATH,
    FakeKube,
    dispatched,
    drained,
    eventually,
    headers,
    kube,
)

__all__ = ["kube"]  # The fixture, imported for the tests below.

REPLACED = ISSUE.replace(b'"title": "t"', b'"title": "replaced"')


def sent(body: bytes, delivery: str = "d-1", **extra: str) -> dict[str, str]:
    return headers(body, "issues", **{"X-GitHub-Delivery": delivery, **extra})


async def test_a_second_body_under_the_same_delivery_id_changes_nothing(
    runtime: Runtime, kube: FakeKube, redis: Redis
) -> None:
    app = build_app(runtime, dispatch=False)
    async with TestClient(TestServer(app)) as c:
        first = await c.post(PATH, data=ISSUE, headers=sent(ISSUE))
        assert first.status == 202, await first.text()
        second = await (await c.post(PATH, data=REPLACED, headers=sent(REPLACED))).json()
    assert second["duplicate"] is True
    [queued] = await redis.hvals(keys.webhook_queue_body(NAMESPACE))  # type: ignore[misc]
    assert b"replaced" not in queued


async def test_a_second_body_is_never_created_even_after_the_first_job_is_gone(
    client: Client, kube: FakeKube, redis: Redis
) -> None:
    assert (await client.post(PATH, data=ISSUE, headers=sent(ISSUE))).status == 202
    await eventually(drained(redis))
    kube.jobs.clear()  # Someone deleted the AgentJob.
    answer = await (await client.post(PATH, data=REPLACED, headers=sent(REPLACED))).json()
    assert answer["duplicate"] is True
    await eventually(drained(redis))
    assert kube.jobs == {} and kube.creates == 1


@pytest.mark.parametrize(
    "replay",
    [
        {"X-GitHub-Hook-ID": "2"},
        {"X-GitHub-Hook-ID": "-"},
        {"X-GitHub-Delivery": "d-2"},
        {"X-GitHub-Delivery": "d-3", "X-GitHub-Hook-ID": "3"},
    ],
    ids=["other-hook", "no-hook", "other-delivery", "both"],
)
async def test_a_replayed_signed_body_starts_no_second_chain(
    client: Client, kube: FakeKube, redis: Redis, replay: dict[str, str]
) -> None:
    first = await (await client.post(PATH, data=ISSUE, headers=sent(ISSUE))).json()
    again = await (await client.post(PATH, data=ISSUE, headers=sent(ISSUE, **replay))).json()
    assert again["duplicate"] is True
    assert [j["name"] for j in again["jobs"]] == [j["name"] for j in first["jobs"]]
    await eventually(drained(redis))
    assert len(kube.jobs) == 1


async def test_an_unsealed_queue_entry_is_dropped_never_created(
    runtime: Runtime, kube: FakeKube, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    async with TestClient(TestServer(build_app(runtime, dispatch=False))) as c:
        [job] = (await (await c.post(PATH, data=ISSUE, headers=sent(ISSUE))).json())["jobs"]
    bodies = keys.webhook_queue_body(NAMESPACE)
    sealed = await redis.hget(bodies, job["name"])  # type: ignore[misc]
    body = json.loads(sealed[sealed.index(b"{") :])  # Behind the seal, if any.
    body["metadata"]["name"] = "forged"
    plain = json.dumps(body).encode()
    forged = {
        "forged": plain,  # What the webhook queued before entries were sealed.
        "forged-mac": b"0" * 64 + plain,
        "moved": sealed,  # A genuine entry under another name.
    }
    await redis.hset(bodies, mapping=forged)  # type: ignore[misc]
    await redis.zadd(keys.webhook_queue(NAMESPACE), dict.fromkeys(forged, 0))
    before = dispatched("forged")
    async with TestClient(TestServer(build_app(runtime))):
        await eventually(drained(redis))
    assert list(kube.jobs) == [f"{NAMESPACE}/{job['name']}"]
    assert dispatched("forged") == before + 3
    assert sum("no valid seal" in r.getMessage() for r in caplog.records) == 3
