"""Reading request bodies before anyone has proven who sent them, with bounded memory.

A webhook body is read before its signature can be checked (the signature covers
the body), so until then its sender is anyone on the internet.  Three limits keep
what an unauthenticated sender can make the process hold small and stated:

* **No decompression.**  The server never decodes a ``Content-Encoding`` (aiohttp's
  ``auto_decompress`` is off for the whole app, ``server.py``), and a request that
  declares one other than ``identity`` is refused with 415 before its body is read:
  GitHub does not compress deliveries, and a compressed body is a multiplier an
  attacker chooses (a few KiB of gzip become the whole cap).
* **A byte budget for bodies in flight** (:class:`BodyBudget`).  Before reading, a
  request reserves its declared ``Content-Length`` (the cap when it declares none,
  i.e. chunked) from a process-wide budget; if the budget cannot cover it the answer
  is an immediate 503 with ``Retry-After``, and the connection closes.  So the bodies
  being read never add up to more than the budget, however many connections stall.
* **A read deadline** (:func:`read_within`).  The whole body must arrive within a
  set time from when the handler starts reading, not per chunk: a trickle of one
  byte a second would pass any idle timeout.  Past it the answer is a 408 and the
  reservation is released.

The bound on what unauthenticated bodies hold is therefore the budget (plus
aiohttp's per-connection read buffer, 2 x 64 KiB, for each open connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from aiohttp import StreamReader, web
from aiohttp.web_protocol import RequestPayloadError

from agentchain.web.responses import ApiError

log = logging.getLogger(__name__)

CHUNK_BYTES = 64 * 1024
# What a refused sender is told to wait; GitHub itself does not retry (a failed
# delivery is redelivered from its UI or API), other senders may.
RETRY_AFTER_SECONDS = 5
IDENTITY = "identity"


class ClosingError(ApiError):
    """A refusal after which the connection is closed: no next request can follow it.

    Oversized, undecodable, late or unread bodies leave the stream mid-body, so
    nothing after them can be parsed as a request.
    """

    def response(self) -> web.Response:
        response = super().response()
        response.force_close()
        return response


def refuse_encoded(request: web.BaseRequest) -> None:
    """415 for a body with a ``Content-Encoding`` other than ``identity``.

    The server does not decode such bodies (``auto_decompress`` is off), so reading
    one would hand compressed bytes to a JSON parser; say so instead.
    """
    encoding = request.headers.get("Content-Encoding", IDENTITY).strip().lower()
    if encoding not in ("", IDENTITY):
        raise ClosingError(
            415,
            "unsupported content encoding",
            "Request bodies are not decompressed; send them uncompressed (identity).",
        )


class BodyBudget:
    """Bytes of request bodies the process may be reading at once (one event loop).

    Reservations are taken and released on the event loop's thread only, so a
    plain counter is enough: no await happens between the check and the update.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0

    @contextlib.contextmanager
    def reserve(self, size: int) -> Iterator[None]:
        """Hold ``size`` bytes for the block; 503 with ``Retry-After`` if they are not free."""
        if self.held + size > self.total:
            raise busy()
        self.held += size
        try:
            yield
        finally:
            self.held -= size


def busy() -> ClosingError:
    return ClosingError(
        503,
        "too many requests in flight",
        f"The server is reading as many bodies as it may; retry in {RETRY_AFTER_SECONDS} s.",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        retry_after=RETRY_AFTER_SECONDS,
    )


def too_large(cap: int) -> ClosingError:
    return ClosingError(413, "payload too large", f"The body is over {cap} bytes.", limit=cap)


async def read_capped(stream: StreamReader, cap: int) -> bytearray:
    """The whole body; 413 as soon as it passes ``cap`` bytes, 400 if it does not decode.

    A ``bytearray`` rather than ``bytes``: copying a 25 MiB buffer into an immutable
    one would double it for a moment, and HMAC and JSON read either.
    """
    buf = bytearray()
    try:
        async for chunk in stream.iter_chunked(CHUNK_BYTES):
            if len(buf) + len(chunk) > cap:
                raise too_large(cap)
            buf += chunk
    except RequestPayloadError as exc:
        # aiohttp's parser feeds a stream nothing more once it failed it; marking it ended
        # keeps aiohttp from reading it again after the answer ("lingering"), where the
        # same error is logged as an unhandled ERROR.  The stream keeps its exception.
        stream.feed_eof()
        detail = "The request body could not be decoded."
        raise ClosingError(400, "unreadable body", detail) from exc
    return buf


async def read_within(request: web.BaseRequest, cap: int, timeout: float, what: str) -> bytearray:
    """The body, read under ``cap`` bytes and ``timeout`` seconds; 408 when it is late.

    ``what`` names the request in the one log line a late or abandoned body gets.
    A client that hangs up mid-body is logged in one line too, never as a traceback.
    """
    try:
        async with asyncio.timeout(timeout):
            return await read_capped(request.content, cap)
    except TimeoutError:
        log.info("%s: body not received within %g s; refused (408)", what, timeout)
        raise ClosingError(
            408, "request timeout", f"The body did not arrive within {timeout:g} s.", limit=timeout
        ) from None
    except ConnectionError:
        log.info("%s: client closed the connection mid-body", what)
        raise incomplete() from None


def incomplete() -> ClosingError:
    """For a client that hung up mid-body: nobody reads the answer, but the log line says why."""
    return ClosingError(400, "incomplete body", "The connection closed mid-body.")
