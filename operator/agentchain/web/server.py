"""The HTTP server around the apps: JSON for errors aiohttp answers itself, no decompression.

Some requests never reach an application: bytes that do not parse as HTTP (a
``Content-Length: 10`` followed by a longer body leaves the rest to be parsed as a
next request line), a header line over the limit, a handler that raised past every
middleware.  aiohttp answers those from its low-level protocol
(``RequestHandler.handle_error``) with a plain-text body that quotes the offending
bytes, up to everything that arrived, and logs a traceback.  The API's errors are
JSON and never echo input, so :class:`Protocol` answers those the same way: the
JSON error shape, ``Connection: close``, one log line naming the status and the
exception's type, not its text (which holds the input).  A handler's own crash
(500) is JSON too, and keeps its traceback in the log: that one is a bug of ours.

aiohttp builds its protocol inside ``web.Server`` with no hook to choose the class,
so :class:`Runner` swaps in a :class:`Server` that does; production (``app.serve``)
and the tests (``tests/unit/web/conftest.py``) both run apps through :class:`Runner`.

:data:`HANDLER_ARGS` turns off aiohttp's transparent request decompression for
every app (``intake.py`` says why) and shortens how long a connection may sit idle
or half-way through its request head; it is passed to ``web.Application`` so that
any runner, including aiohttp's test server, applies it.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)

# A connection is closed once it has been idle, or has not sent a complete request
# head, for this long (aiohttp's default is an hour): slow headers cannot hold a
# connection and its parser buffer for longer.  75 s is nginx's keep-alive default.
KEEPALIVE_TIMEOUT_SECONDS = 75.0
HANDLER_ARGS: dict[str, Any] = {
    "auto_decompress": False,
    "keepalive_timeout": KEEPALIVE_TIMEOUT_SECONDS,
}
_KNOWN = frozenset(s.value for s in HTTPStatus)


class Protocol(RequestHandler):
    """aiohttp's connection handler, with JSON error answers that quote nothing."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500 and exc is not None:
            # A handler raised past every middleware: a bug of ours, so the traceback.
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
            detail = "The server failed; the error is logged."
        else:
            what = type(exc).__name__
            log.info("refused a request from %s: %d (%s)", request.remote, status, what)
            detail = "The request could not be read as HTTP/1.1."
        if request.writer.output_size > 0:
            raise ConnectionError("the answer had begun; the connection is closed instead")
        phrase = HTTPStatus(status).phrase.lower() if status in _KNOWN else "error"
        body = {"error": phrase, "detail": detail}
        response = web.Response(
            status=status,
            body=json.dumps(body).encode(),
            content_type="application/json",
            charset="utf-8",
        )
        response.force_close()
        return response


class Server(web.Server):
    """``web.Server`` making :class:`Protocol` connections."""

    def __call__(self) -> RequestHandler:
        return Protocol(self, loop=self._loop, **self._kwargs)


class Runner(web.AppRunner):
    """``web.AppRunner`` serving through :class:`Server`."""

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        return Server(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            loop=made._loop,
            **made._kwargs,
        )
