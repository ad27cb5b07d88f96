"""JSON answers shared by the webhook and the job API: one error shape everywhere.

Every refusal is ``{"error": <short sentence>, "detail": <what to fix>}`` plus
optional machine-readable extras (a reason, a size and its limit), so clients
and the fuzz tests can rely on one shape.  Handlers raise :class:`ApiError`
and :func:`error_middleware` turns it into a response, which keeps handlers
linear: check, act, answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from redis.exceptions import RedisError

from agentchain.kube import apierrors as kube

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """An HTTP refusal with the JSON error body it must carry."""

    def __init__(
        self,
        status: int,
        error: str,
        detail: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = extra

    def response(self) -> web.Response:
        response = error_response(self.status, self.error, self.detail, **self.extra)
        response.headers.update(self.headers)
        return response


def json_response(data: Any, status: int = 200) -> web.Response:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # A lone surrogate (a JSON "\ud800" escape in a webhook payload, echoed in a reason)
    # has no UTF-8 form; "backslashreplace" writes it back as that same escape, which is
    # valid JSON, instead of failing the answer with a 500.
    body = text.encode("utf-8", "backslashreplace")
    return web.Response(body=body, status=status, content_type="application/json", charset="utf-8")


def error_response(status: int, error: str, detail: str = "", **extra: Any) -> web.Response:
    return json_response({"error": error, "detail": detail, **extra}, status=status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """ApiError → its JSON; aiohttp's own HTTP errors (404, 405) → the same JSON shape."""
    try:
        return await handler(request)
    except ApiError as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = error_response(exc.status, exc.reason, "")
        if isinstance(exc, web.HTTPMethodNotAllowed):
            # RFC 9110: a 405 lists the methods the resource supports.
            response.headers["Allow"] = ", ".join(sorted(exc.allowed_methods))
        return response
    except RequestPayloadError:
        # The body stopped decoding mid-read (a gzip or deflate Content-Encoding it does not
        # match, a broken chunk): the client's fault.  Undecodable from the first byte,
        # aiohttp's parser answers 400 itself, before any handler runs.
        # Ending the failed stream keeps aiohttp from reading it again after the answer
        # (its "lingering"), which logged the same error as unhandled; the parser cannot
        # find a next request behind a broken body, so the connection closes.
        request.content.feed_eof()
        response = error_response(400, "unreadable body", "The request body could not be decoded.")
        response.force_close()
        return response
    except RedisError as exc:
        # A dependency being down is the server's problem but not a bug: 503, retry later.
        log.warning("redis unavailable for %s %s: %s", request.method, request.path, type(exc))
        return error_response(503, "store unavailable", "Redis did not answer; retry later.")
    except kube.KubeError as exc:
        log.warning("kubernetes API for %s %s: %s", request.method, request.path, exc)
        return kube_error_response(exc)


# The API server's refusals a client can act on keep their code; the rest (throttled
# past the client's retries, failing, unreachable) is the server's trouble: 503.
_KUBE_REFUSALS: dict[type[kube.ApiError], tuple[int, str, str]] = {
    kube.BadRequest: (422, "invalid object", "The API server refused the object."),
    kube.Invalid: (422, "invalid object", "The API server refused the object."),
    kube.Forbidden: (403, "forbidden", "The operator may not do this in that namespace."),
    kube.NotFound: (404, "not found", "The API server has no such namespace or object."),
    kube.Conflict: (409, "conflict", "The API server reports a conflicting object."),
}


def kube_error_response(exc: kube.KubeError) -> web.Response:
    """The JSON answer for what the Kubernetes API boundary raised."""
    if isinstance(exc, kube.ApiError):
        for cls, (status, error, detail) in _KUBE_REFUSALS.items():
            if isinstance(exc, cls):
                return error_response(status, error, detail, reason=exc.reason)
        return error_response(503, "kubernetes unavailable", "The API server refused or failed.")
    return error_response(503, "kubernetes unavailable", "The API server did not answer.")


# Every answer, JSON or HTML: the dashboard's pages load nothing but themselves (no
# script, style or frame from anywhere else, not framed by anyone), and no browser
# guesses a type from content (a JSON error quoting "<html>" stays JSON).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; "
        "object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response
