"""Webhook bodies the fuzz run found answered badly: lone surrogates and undecodable bodies.

Lone UTF-16 surrogates: a JSON payload may escape a surrogate that pairs with nothing
(``"\\ud800"``); decoded, it has no UTF-8 form and would fail wherever the text went
next (a queued AgentJob body in Redis, the job's spec).  Undecodable bodies: a body
its ``Content-Encoding`` did not match raised aiohttp's ``RequestPayloadError``
past the webhook's own refusals, so the delivery metric never counted it, and
aiohttp, reading the broken rest of the body after the answer ("lingering"), logged
an unhandled ERROR with a traceback for what is only a client's mistake.  Since
then the server decompresses nothing (issue 14): an encoded body is refused (415)
before it is read.

Aspects covered:
* ``parse_payload``: a lone surrogate escape (a value, a key, nested, a high or a low
  half) in a JSON body or in a form's ``payload`` field is a 400 naming the problem;
  a paired escape (an emoji) and an escaped backslash before ``ud800`` are text;
* over HTTP, an ``issues`` delivery a triage agent would match, carrying a lone
  surrogate (JSON or form) → 400 counted as invalid, nothing queued, no job planned;
* ``read_capped``: a stream that fails mid-read → 400 ``unreadable body`` and the stream
  marked ended (nothing for aiohttp to read after the answer); over the cap still 413;
* over HTTP, any body with a ``Content-Encoding`` other than identity (valid gzip, gzip
  or deflate that does not decode, brotli) → 415 counted as invalid, answered with
  ``Connection: close``, never decompressed, no ERROR logged by aiohttp, and the next
  delivery is answered as usual; ``identity`` is read;
* a chunked body whose framing breaks mid-body → a JSON 400, no ERROR logged.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import urllib.parse
from unittest import mock

import pytest
from aiohttp import StreamReader
from aiohttp.web_protocol import RequestPayloadError
from redis.asyncio import Redis

from agentchain.web.hooks.webhook import FORM_TYPE, JSON_TYPE, parse_payload
from agentchain.web.intake import read_capped
from agentchain.web.responses import ApiError
from tests.unit.web.conftest import Client
from tests.unit.web.hooks.test_webhook_http import (
    ISSUE,
    PATH,
    PING,
    FakeKube,
    assert_error,
    delivered,
    headers,
    kube,
)

__all__ = ["kube"]  # The fixture is used by name.


# --------------------------------------------------------------------------- lone surrogates

LONE = [
    b'{"issue": {"title": "a\\ud800"}}',
    b'{"issue": {"title": "\\uDFFF"}}',
    b'{"issue": {"\\udc00": 1}}',
    b'{"labels": [["\\uDBFF"]]}',
    b'{"title": "\\ud83d"}',  # A high half whose low half never comes.
]


def form(payload: bytes) -> bytes:
    return urllib.parse.urlencode({"payload": payload.decode()}).encode()


@pytest.mark.parametrize("raw", LONE)
@pytest.mark.parametrize("content_type", [JSON_TYPE, FORM_TYPE])
def test_a_lone_surrogate_is_a_malformed_payload(raw: bytes, content_type: str) -> None:
    body = form(raw) if content_type == FORM_TYPE else raw
    with pytest.raises(ApiError) as refused:
        parse_payload(content_type, body)
    assert refused.value.status == 400 and refused.value.error == "malformed payload"
    assert "surrogate" in refused.value.detail


@pytest.mark.parametrize("content_type", [JSON_TYPE, FORM_TYPE])
def test_paired_surrogates_and_escaped_backslashes_are_text(content_type: str) -> None:
    raw = b'{"title": "\\ud83d\\ude00 and \\\\ud800"}'
    body = form(raw) if content_type == FORM_TYPE else raw
    assert parse_payload(content_type, body) == {"title": "\U0001f600 and \\ud800"}


@pytest.mark.parametrize(
    "body", [b'{"title": "\xed\xa0\x80"}', b"payload=%7B%22t%22%3A%22%ED%A0%80%22%7D"]
)
def test_a_raw_encoded_surrogate_is_not_utf8(body: bytes) -> None:
    # json.loads alone decodes bytes with "surrogatepass": the first would pass.
    content_type = FORM_TYPE if body.startswith(b"payload=") else JSON_TYPE
    with pytest.raises(ApiError) as refused:
        parse_payload(content_type, body)
    assert refused.value.status == 400


def with_lone_surrogate() -> bytes:
    """The matching ``issues.opened`` of the queue tests, its title ending in ``\\ud800``."""
    return ISSUE.replace(b'"title": "t"', b'"title": "t\\ud800"')


@pytest.mark.parametrize("content_type", [JSON_TYPE, FORM_TYPE])
async def test_a_matching_delivery_with_a_lone_surrogate_is_400_and_queues_nothing(
    client: Client, kube: FakeKube, redis: Redis, content_type: str
) -> None:
    raw = with_lone_surrogate()
    assert raw != ISSUE
    body = form(raw) if content_type == FORM_TYPE else raw
    before = delivered("invalid")
    sent = headers(body, "issues", **{"Content-Type": content_type})
    answer = await assert_error(await client.post(PATH, data=body, headers=sent), 400)
    assert "surrogate" in str(answer["detail"])
    assert delivered("invalid") == before + 1
    assert kube.listings == 0 and kube.creates == 0
    assert await redis.dbsize() == 0
    # The same delivery without the surrogate is one the agent takes: it was the text.
    fine = ISSUE if content_type == JSON_TYPE else form(ISSUE)
    sent = headers(fine, "issues", **{"Content-Type": content_type})
    assert (await client.post(PATH, data=fine, headers=sent)).status == 202


# --------------------------------------------------------------------------- read_capped


def stream() -> StreamReader:
    return StreamReader(mock.Mock(_reading_paused=False), 2**16, loop=asyncio.get_running_loop())


async def test_a_stream_that_fails_mid_read_is_an_unreadable_body() -> None:
    body = stream()
    body.feed_data(b"first bytes")
    body.set_exception(RequestPayloadError("Can not decode content-encoding: gzip"))
    with pytest.raises(ApiError) as refused:
        await read_capped(body, 1024)
    assert (refused.value.status, refused.value.error) == (400, "unreadable body")
    assert isinstance(refused.value.__cause__, RequestPayloadError)
    # Ended: aiohttp has nothing left to read (and fail on again) after the answer.
    assert body.is_eof()


async def test_a_stream_over_the_cap_is_still_413() -> None:
    body = stream()
    body.feed_data(b"x" * 2048)
    body.feed_eof()
    with pytest.raises(ApiError) as refused:
        await read_capped(body, 1024)
    assert refused.value.status == 413


async def test_a_whole_stream_is_read() -> None:
    body = stream()
    body.feed_data(b"all of it")
    body.feed_eof()
    assert await read_capped(body, 1024) == b"all of it"


# --------------------------------------------------------------------------- encoded bodies


def bad_crc(data: bytes) -> bytes:
    """``data`` gzipped, its trailer's checksum wrong: it fails at the very end."""
    zipped = gzip.compress(data)
    return zipped[:-8] + bytes(b ^ 0xFF for b in zipped[-8:-4]) + zipped[-4:]


# None of these is decoded any more: each is refused for its Content-Encoding alone.
ENCODED = {
    "gzip-valid": ("gzip", gzip.compress(PING)),
    "gzip-not-gzip": ("gzip", b"not gzip"),
    "deflate-garbage": ("deflate", b"\x00garbage that is no zlib stream"),
    "gzip-bad-checksum": ("gzip", bad_crc(b"x" * 200)),
    # Most of it has not arrived when the handler starts.
    "gzip-large": ("gzip", b"\x1f\x8b" + bytes(range(256)) * 2048),
    "br": ("br", b"\x0b\x02\x80hello\x03"),
}


async def exchange(client: Client, head: bytes, body: bytes) -> bytes:
    """Send one request on a fresh socket; everything the server sent until it closed.

    Reading to EOF means the server finished with the connection, lingering included,
    so anything aiohttp would log about the rest of the body has been logged by then.
    """
    reader, writer = await asyncio.open_connection(client.host, client.port)
    try:
        writer.write(head)
        writer.write(body)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=15)
    finally:
        writer.close()


def request_head(client: Client, body: bytes, **extra: str) -> bytes:
    sent = headers(body, "issues", **extra)
    lines = [f"POST {PATH} HTTP/1.1", f"Host: {client.host}"]
    lines += [f"{k}: {v}" for k, v in sent.items()]
    if "Transfer-Encoding" not in extra:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize(("encoding", "body"), list(ENCODED.values()), ids=list(ENCODED))
async def test_an_encoded_body_is_415_closes_and_logs_no_error(
    client: Client, caplog: pytest.LogCaptureFixture, encoding: str, body: bytes
) -> None:
    caplog.set_level(logging.WARNING)
    before = delivered("invalid")
    head = request_head(client, body, **{"Content-Encoding": encoding})
    answer = await exchange(client, head, body)
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 415 "), answer[:300]
    assert b"Connection: close" in head.split(b"\r\n")
    assert json.loads(payload)["error"] == "unsupported content encoding"
    assert delivered("invalid") == before + 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [(r.name, r.getMessage()) for r in errors]
    # The server is fine: the next delivery is answered as usual.
    assert (await client.post(PATH, data=PING, headers=headers(PING))).status == 200


async def test_a_gzip_body_is_not_decompressed(client: Client) -> None:
    """Signed over the decompressed JSON, as a forger would: it used to be decoded and read.

    Failing this means the server decompressed an unauthenticated body (a multiplier the
    sender chooses) before checking who sent it.
    """
    zipped = gzip.compress(PING)
    sent = {**headers(PING), "Content-Encoding": "gzip"}
    response = await client.post(PATH, data=zipped, headers=sent)
    body = await assert_error(response, 415)
    assert body["error"] == "unsupported content encoding"
    assert response.headers.get("Connection") == "close"


async def test_identity_encoding_is_read(client: Client) -> None:
    sent = {**headers(PING), "Content-Encoding": "identity"}
    assert (await client.post(PATH, data=PING, headers=sent)).status == 200


async def test_a_broken_chunked_body_is_400_and_logs_no_error(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    head = request_head(client, PING, **{"Transfer-Encoding": "chunked"})
    # A chunk size that is not hexadecimal: the parser fails the stream mid-body.
    answer = await exchange(client, head, b"5\r\nhello\r\nzz\r\n")
    status, _, payload = answer.partition(b"\r\n\r\n")
    # Parsed with the head it arrived with, the framing error is the parser's own 400.
    assert status.split(b"\r\n")[0].split(b" ")[1] == b"400", answer[:300]
    assert json.loads(payload)["error"] in ("unreadable body", "bad request")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [(r.name, r.getMessage()) for r in errors]
