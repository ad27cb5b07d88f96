"""``POST /webhooks/github`` over HTTP, up to the point where agents would be listed.

Aspects covered (no Kubernetes needed: every case answers before the API server):
* ``ping`` with a valid signature → 200 ``{"pong": true}``, JSON or form-encoded;
* missing or invalid ``X-GitHub-Event`` / ``X-GitHub-Delivery`` → 400;
* missing, bad or wrong-secret signature → 401; secrets and signatures never logged;
* content type other than JSON / form → 415; malformed JSON, a non-object payload or a
  form without ``payload`` → 400;
* size cap: a declared ``Content-Length`` over the cap → 413 before any body byte is
  sent; a chunked body growing past the cap → 413 while traced memory stays bounded;
* every error is JSON ``{"error", "detail"}``; deliveries are counted by result;
* fail closed: without a secret ``build_app`` raises ``WebhookNotConfigured``, and
  ``webhook=False`` serves a 503 at the webhook path while the rest stays up.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tracemalloc
import urllib.parse
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import ClientError, ClientResponse
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from agentchain.settings import Settings
from agentchain.web.app import WebhookNotConfigured, build_app
from agentchain.web.signatures import sign
from tests.unit.web.conftest import SMALL_CAP, WEBHOOK_SECRET, Client, make_runtime

PATH = "/webhooks/github"
PING = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()


def headers(body: bytes, event: str = "ping", **extra: str) -> dict[str, str]:
    base = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "X-GitHub-Hook-ID": "1",
        "X-Hub-Signature-256": sign(body, WEBHOOK_SECRET),
        "Content-Type": "application/json",
    }
    base.update(extra)
    return {k: v for k, v in base.items() if v != "-"}


def delivered(result: str) -> float:
    value = REGISTRY.get_sample_value("agentchain_webhook_deliveries_total", {"result": result})
    return value or 0.0


async def assert_error(response: ClientResponse, status: int) -> dict[str, object]:
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    body = await response.json()
    assert isinstance(body["error"], str) and isinstance(body["detail"], str)
    return dict(body)


# --------------------------------------------------------------------------- accepted


async def test_ping_is_answered(client: Client) -> None:
    before = delivered("accepted")
    response = await client.post(PATH, data=PING, headers=headers(PING))
    assert response.status == 200
    assert (await response.json())["pong"] is True
    assert delivered("accepted") == before + 1


async def test_form_encoded_ping_is_answered(client: Client) -> None:
    body = urllib.parse.urlencode({"payload": PING.decode()}).encode()
    form = headers(body, **{"Content-Type": "application/x-www-form-urlencoded"})
    response = await client.post(PATH, data=body, headers=form)
    assert response.status == 200
    assert (await response.json())["pong"] is True


# --------------------------------------------------------------------------- 400 / 401 / 415


@pytest.mark.parametrize(
    "change",
    [
        {"X-GitHub-Event": "-"},
        {"X-GitHub-Delivery": "-"},
        {"X-GitHub-Event": "Issues; rm -rf"},
        {"X-GitHub-Delivery": "x" * 200},
        {"X-GitHub-Hook-ID": "../../etc"},
    ],
    ids=["no-event", "no-delivery", "bad-event", "long-delivery", "bad-hook-id"],
)
async def test_missing_or_invalid_headers_are_400(client: Client, change: dict[str, str]) -> None:
    before = delivered("invalid")
    response = await client.post(PATH, data=PING, headers=headers(PING, **change))
    await assert_error(response, 400)
    assert delivered("invalid") == before + 1


@pytest.mark.parametrize(
    "signature",
    ["-", "", sign(PING, "wrong secret"), "sha1=" + sign(PING, WEBHOOK_SECRET)[7:]],
    ids=["missing", "empty", "wrong-secret", "sha1"],
)
async def test_bad_signatures_are_401_and_never_logged(
    client: Client, signature: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    before = delivered("unauthorized")
    sent = headers(PING, **{"X-Hub-Signature-256": signature})
    response = await client.post(PATH, data=PING, headers=sent)
    await assert_error(response, 401)
    assert delivered("unauthorized") == before + 1
    assert WEBHOOK_SECRET not in caplog.text
    if signature not in ("", "-"):
        assert signature not in caplog.text


async def test_a_changed_body_is_401(client: Client) -> None:
    sent = headers(PING)
    response = await client.post(PATH, data=PING.replace(b"awesome", b"awesome!"), headers=sent)
    await assert_error(response, 401)


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "-"])
async def test_other_content_types_are_415(client: Client, content_type: str) -> None:
    sent = headers(PING, **{"Content-Type": content_type})
    response = await client.post(PATH, data=PING, headers=sent)
    await assert_error(response, 415)


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe", b"[" * 100_000],
    ids=["broken", "array", "string", "not-utf8", "deeply-nested"],
)
async def test_malformed_json_is_400(client: Client, body: bytes) -> None:
    response = await client.post(PATH, data=body, headers=headers(body))
    await assert_error(response, 400)


@pytest.mark.parametrize("body", [b"other=1", b"payload=%7Bbroken", b"\xff=1"])
async def test_malformed_forms_are_400(client: Client, body: bytes) -> None:
    form = headers(body, **{"Content-Type": "application/x-www-form-urlencoded"})
    response = await client.post(PATH, data=body, headers=form)
    await assert_error(response, 400)


# --------------------------------------------------------------------------- size cap


async def raw_request(client: Client, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``head`` (and ``body``) on a fresh socket; the status and the response bytes."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    try:
        writer.write(head + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(65536), timeout=5)
    finally:
        writer.close()
    return int(answer.split(b" ", 2)[1]), answer


async def test_declared_content_length_over_cap_is_413_before_the_body(client: Client) -> None:
    before = delivered("too_large")
    sent = headers(PING)
    lines = [f"POST {PATH} HTTP/1.1", f"Host: {client.host}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in sent.items()]
    lines.append(f"Content-Length: {26 * 1024 * 1024}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    # No body byte is sent: the answer must not wait for the 26 MB it was promised.
    status, answer = await raw_request(client, head)
    assert status == 413
    assert b'"error"' in answer
    assert delivered("too_large") == before + 1


async def chunks(total: int, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    block = b"x" * size  # One buffer reused, so the sender allocates nothing per chunk.
    sent = 0
    while sent < total:
        yield block
        sent += size


async def test_chunked_body_over_cap_is_413_with_bounded_memory(client: Client) -> None:
    sent = headers(PING)  # The signature cannot match; the cap must trip first.
    tracemalloc.start()
    try:
        try:
            response = await client.post(PATH, data=chunks(26 * 1024 * 1024), headers=sent)
            status = response.status
            await assert_error(response, 413)
        except ClientError as exc:  # pragma: no cover - depends on socket timing
            pytest.fail(f"the server closed the upload without a 413 answer: {exc!r}")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 413
    # The cap is 1 MiB: the server holds at most cap + one chunk of body, far below 26 MB.
    assert peak < 4 * SMALL_CAP, f"peak traced memory {peak} bytes"


async def test_body_at_the_cap_is_read(redis: Redis) -> None:
    settings = Settings(webhook_secrets=(WEBHOOK_SECRET,), webhook_max_bytes=len(PING))
    app = build_app(make_runtime(redis, settings), dashboard_enabled=False)
    async with TestClient(TestServer(app)) as c:
        ok = await c.post(PATH, data=PING, headers=headers(PING))
        assert ok.status == 200
        longer = PING + b" "
        too_long = await c.post(PATH, data=longer, headers=headers(longer))
        await assert_error(too_long, 413)


# --------------------------------------------------------------------------- fail closed


@pytest.mark.parametrize("secrets", [(), ("",)], ids=["none", "empty"])
def test_no_secret_refuses_to_build(redis: Redis, secrets: tuple[str, ...]) -> None:
    settings = Settings(webhook_secrets=secrets)
    with pytest.raises(WebhookNotConfigured, match="no GitHub webhook secret"):
        build_app(make_runtime(redis, settings))


async def test_webhook_off_answers_503_and_the_rest_stays_up(
    redis: Redis, with_settings: Callable[..., Settings]
) -> None:
    rt = make_runtime(redis, with_settings(webhook_secrets=()))
    async with TestClient(TestServer(build_app(rt, webhook=False))) as c:
        await assert_error(await c.post(PATH, data=PING, headers=headers(PING)), 503)
        assert (await c.get("/healthz")).status == 200
        assert (await c.get("/api/openapi.json")).status == 200
