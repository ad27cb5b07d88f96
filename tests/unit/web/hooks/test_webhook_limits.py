"""What an unauthenticated sender can make the webhook hold, over a real socket (issue 14).

Every case stalls or misframes a request on a raw TCP connection to the real app,
served by the operator's own runner, with the queue on real Redis.

Aspects covered:
* bodies in flight: while one stalled upload holds the whole byte budget, the next
  delivery is answered 503 with ``Retry-After`` (JSON, ``Connection: close``) at once,
  before any of its body is read; once the stalled one ends, deliveries are read again;
* the read deadline: a body that stalls (or trickles) past it is cut with a JSON 408,
  its budget released, one INFO line logged and no ERROR;
* a client hanging up mid-body: one INFO line, no traceback, no ERROR;
* ``Content-Length: 10`` followed by a longer body: the rest is answered as a JSON 400
  that quotes none of it (aiohttp's own answer echoed it all as text);
* a connection that never completes its request head is closed at the keep-alive
  timeout (75 s, not aiohttp's hour);
* a handler's crash past every middleware: a JSON 500, its traceback logged;
* the deadline and the budget are settings (``webhook_read_timeout_seconds``,
  ``webhook_inflight_bytes``), the budget never below one body at the cap.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.settings import Settings
from agentchain.web import server
from agentchain.web.app import build_app
from tests.unit.web.conftest import SMALL_CAP, Client, make_runtime, serving
from tests.unit.web.hooks.test_webhook_http import PATH, PING, delivered, headers

DEADLINE = 1.0


@pytest.fixture
async def limited(redis: Redis, with_settings: Callable[..., Settings]) -> AsyncIterator[Client]:
    """The app with a budget of exactly one body at the cap and a 1 s read deadline."""
    settings = with_settings(
        webhook_inflight_bytes=SMALL_CAP, webhook_read_timeout_seconds=DEADLINE
    )
    async with serving(build_app(make_runtime(redis, settings))) as c:
        yield c


Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def stalled(client: Client, declared: int, sent: bytes) -> Stream:
    """A delivery declaring ``declared`` body bytes, of which only ``sent`` arrive."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    lines = [f"POST {PATH} HTTP/1.1", f"Host: {client.host}"]
    lines += [f"{k}: {v}" for k, v in headers(b"x" * declared, "issues").items()]
    lines.append(f"Content-Length: {declared}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + sent)
    await writer.drain()
    return reader, writer


async def answer(reader: asyncio.StreamReader, timeout: float) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    status_line, *header_lines = head.decode("latin-1").strip().split("\r\n")
    fields = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    body = await asyncio.wait_for(reader.readexactly(int(fields["content-length"])), timeout)
    return int(status_line.split()[1]), fields, body


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


# --------------------------------------------------------------------------- bodies in flight


async def test_past_the_budget_a_delivery_is_503_with_retry_after_at_once(
    limited: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    hog_reader, hog = await stalled(limited, SMALL_CAP, b"x" * 1000)
    try:
        await asyncio.sleep(0.2)  # The hog's handler has reserved its bytes.
        before = delivered("busy")
        started = time.monotonic()
        response = await limited.post(PATH, data=PING, headers=headers(PING))
        elapsed = time.monotonic() - started
        assert response.status == 503, await response.text()
        assert response.headers["Retry-After"].isdigit()
        assert response.headers.get("Connection") == "close"
        body = await response.json()
        assert body["error"] == "too many requests in flight"
        assert body["retry_after"] == int(response.headers["Retry-After"])
        assert elapsed < DEADLINE / 2, f"the 503 took {elapsed:.2f} s"
        assert delivered("busy") == before + 1
    finally:
        hog.close()
    # The hog's body ends (cut or abandoned): its reservation is released.
    await until(lambda: "mid-body" in caplog.text or "408" in caplog.text)
    assert (await limited.post(PATH, data=PING, headers=headers(PING))).status == 200
    del hog_reader


async def test_small_deliveries_share_the_budget(limited: Client) -> None:
    """Reservations are the declared sizes: many small bodies fit beside each other."""
    streams = [await stalled(limited, 1000, b"x" * 10) for _ in range(5)]
    try:
        await asyncio.sleep(0.2)
        assert (await limited.post(PATH, data=PING, headers=headers(PING))).status == 200
    finally:
        for _, writer in streams:
            writer.close()


# --------------------------------------------------------------------------- read deadline


async def test_a_stalled_body_is_cut_with_408_after_the_deadline(
    limited: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    before = delivered("timeout")
    reader, writer = await stalled(limited, 100_000, b"x" * 100)
    started = time.monotonic()
    try:
        status, fields, body = await answer(reader, timeout=DEADLINE + 5)
    finally:
        writer.close()
    elapsed = time.monotonic() - started
    assert status == 408
    assert fields["content-type"].startswith("application/json")
    assert fields.get("connection") == "close"
    assert json.loads(body)["error"] == "request timeout"
    assert DEADLINE * 0.9 <= elapsed < DEADLINE + 3, f"cut after {elapsed:.2f} s"
    assert delivered("timeout") == before + 1
    lines = [r for r in caplog.records if "not received within" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO and lines[0].exc_info is None
    assert errors(caplog) == []
    # Its budget is free again: a body at the cap is read.
    assert (await limited.post(PATH, data=PING, headers=headers(PING))).status == 200


async def test_a_trickling_body_is_cut_too(limited: Client) -> None:
    """A byte every 0.2 s never lets an idle timeout fire; the deadline is for the body."""
    reader, writer = await stalled(limited, 1000, b"")
    started = time.monotonic()
    try:
        while time.monotonic() - started < DEADLINE + 3 and not reader.at_eof():
            writer.write(b"x")
            await writer.drain()
            try:
                status, _, _ = await answer(reader, timeout=0.2)
                break
            except TimeoutError:
                continue
        else:
            pytest.fail("no answer to a trickling body")
    finally:
        writer.close()
    assert status == 408


async def test_a_client_hanging_up_mid_body_is_one_line(
    limited: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    _, writer = await stalled(limited, 100_000, b"x" * 100)
    await asyncio.sleep(0.2)
    writer.close()
    await until(lambda: "mid-body" in caplog.text)
    await asyncio.sleep(0.2)  # Anything aiohttp would add comes right after.
    assert errors(caplog) == []
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert (await limited.post(PATH, data=PING, headers=headers(PING))).status == 200


# --------------------------------------------------------------------------- misframed requests


async def test_a_body_longer_than_its_content_length_is_answered_json_without_echo(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    reader, writer = await asyncio.open_connection(client.host, client.port)
    rest = b"A" * 96_000
    head = f"POST /api/openapi.json HTTP/1.1\r\nHost: {client.host}\r\nContent-Length: 10\r\n\r\n"
    try:
        writer.write(head.encode() + rest)
        await writer.drain()
        sent = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
    # The refusal of the rest comes last (after the first request's answer, if any).
    last = sent[[m.start() for m in re.finditer(rb"HTTP/1\.[01] \d{3} ", sent)][-1] :]
    status, fields, body = await answer(_reader_of(last), timeout=1)
    assert status == 400
    assert fields["content-type"].startswith("application/json")
    assert json.loads(body) == {
        "error": "bad request",
        "detail": "The request could not be read as HTTP/1.1.",
    }
    assert b"AAAA" not in sent and len(sent) < 4096, len(sent)
    assert errors(caplog) == []
    assert "AAAA" not in caplog.text


def _reader_of(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


# --------------------------------------------------------------------------- settings


async def test_the_budget_is_never_below_one_body_at_the_cap(
    redis: Redis, with_settings: Callable[..., Settings]
) -> None:
    settings = with_settings(webhook_inflight_bytes=1)
    async with serving(build_app(make_runtime(redis, settings))) as c:
        assert (await c.post(PATH, data=PING, headers=headers(PING))).status == 200


async def test_a_handler_crash_is_a_json_500_with_its_traceback_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What no middleware turned into an answer: still the JSON shape, never a text page."""

    async def crash(request: web.Request) -> web.Response:
        raise RuntimeError("a bug")

    app = web.Application()
    app.router.add_get("/crash", crash)
    async with serving(app) as c:
        response = await c.get("/crash", headers={"Accept": "text/html"})
        assert response.status == 500 and response.content_type == "application/json"
        assert (await response.json())["error"] == "internal server error"
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.exc_info is not None and "a bug" in str(record.exc_info[1])


async def test_a_connection_that_never_finishes_its_head_is_closed(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slow headers: the keep-alive timeout (an hour in aiohttp) is short, and also
    applies before the first request; shortened further here to keep the test quick."""
    assert server.KEEPALIVE_TIMEOUT_SECONDS <= 120
    monkeypatch.setitem(server.HANDLER_ARGS, "keepalive_timeout", 0.5)
    async with serving(build_app(runtime)) as c:
        reader, writer = await asyncio.open_connection(c.host, c.port)
        try:
            writer.write(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: pi".encode())
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # Closed.
        finally:
            writer.close()
