"""The Kubernetes API as the operator's own calls see it: asynchronous JSON over aiohttp.

kopf has its own client for watching; the operator's reads and writes are REST over
one aiohttp session per event loop, as kopf's are, with the same credentials: kopf's
minimal login functions (``kopf.login_with_service_account`` in a pod,
``kopf.login_with_kubeconfig`` elsewhere) read the token, client certificate and CA,
so the official ``kubernetes`` package is not a runtime dependency.  What they do not
do, and so neither does the operator: exec plugins and auth-provider refresh hooks
(a developer's cloud kubeconfig needs a plain token or certificate instead).

Every call goes through :func:`open_response`, the error boundary:

- an error answer becomes the typed exception of ``errors`` built from its Status
  body (``NotFound``, ``AlreadyExists``, ``Conflict``, ``Gone``, ``Forbidden``,
  ``TooManyRequests``, ``ServerError``, ...); a failed connection, ``Unreachable``;
- 429, 500/502/503/504 and connection failures are retried there, at once for a
  transient hiccup (0.1 s, doubling, jittered, capped; ``Retry-After`` honoured;
  attempts and total time bounded, ``apierrors.RetryPolicy``), one log line per retry,
  so a hop is not left to the next resync for a blip of the API server;
- a 401 logs in again (a rotated service-account token is reread) and retries once.

A response is retried only before it is handed to the caller: a stream (a watch, a
log) that breaks later is the caller's to restart.

The write fence (:data:`WRITE_FENCE`): the engine runs in a context where it holds a
callable answering whether this replica still leads (``kube/electing.py``); every
attempt to send anything but a GET consults it first and raises ``apierrors.Fenced``
instead of sending when it answers False.  Web requests run outside that context and
are never fenced: every replica serves them.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import logging
import os
import ssl
import time
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import kopf

from agentchain.kube import apierrors

log = logging.getLogger(__name__)

GROUP = "labrats.work"
VERSION = "v1alpha1"
MERGE_PATCH = "application/merge-patch+json"
# No call may hang the operator: a dead connection is noticed within a minute.
DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60)
# Chains fan out many small calls at once.
CONNECTIONS = 32

Obj = dict[str, Any]
# Set (per context) by whoever runs the engine: writes are sent only while it says so.
WRITE_FENCE: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "agentchain_write_fence", default=None
)


@dataclass(frozen=True)
class Login:
    """Where the API server is and how to prove who we are, from one login."""

    server: str
    headers: dict[str, str]
    ssl_context: ssl.SSLContext
    proxy: str | None = None
    # Which login this is: a 401 logs in again only if no other call did meanwhile.
    generation: int = 0


def connection_info() -> kopf.ConnectionInfo:
    """kopf's reading of the service account (in a pod) or of ``KUBECONFIG``."""
    settings = kopf.OperatorSettings()
    info: kopf.ConnectionInfo | None
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
        info = kopf.login_with_service_account(settings=settings)
    else:
        info = kopf.login_with_kubeconfig(settings=settings)
    if info is None:
        raise kopf.LoginError("No service account token and no kubeconfig to log in with.")
    return info


def login_from(info: kopf.ConnectionInfo, generation: int = 0) -> Login:
    headers: dict[str, str] = {}
    if info.token:
        headers["Authorization"] = f"{info.scheme or 'Bearer'} {info.token}"
    elif info.username and info.password:
        basic = aiohttp.BasicAuth(info.username, info.password)
        headers["Authorization"] = basic.encode()
    return Login(
        server=info.server.rstrip("/"),
        headers=headers,
        ssl_context=info.as_ssl_context(),
        proxy=info.proxy_url,
        generation=generation,
    )


_login: list[Login] = []


def current_login() -> Login:
    if not _login:
        _login.append(login_from(connection_info()))
    return _login[-1]


def relogin(failed: Login) -> Login:
    """Log in again after ``failed`` was refused (401), unless another call already did."""
    latest = current_login()
    if latest.generation != failed.generation:
        return latest
    fresh = login_from(connection_info(), failed.generation + 1)
    _login[:] = [fresh]
    log.info("kubernetes API refused the credentials (401): logged in again")
    return fresh


# One session per event loop: the operator has one, tests get one per test.
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)


def _session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        # The TLS context goes with each request (it changes when a login does).
        connector = aiohttp.TCPConnector(limit=CONNECTIONS)
        session = aiohttp.ClientSession(connector=connector, timeout=DEFAULT_TIMEOUT)
        _sessions[loop] = session
    return session


async def close() -> None:
    """Close this loop's session (operator cleanup, test teardown)."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


def reset() -> None:
    """Forget the login (another cluster's ``KUBECONFIG``, in tests)."""
    _login.clear()
    _sessions.clear()


def path(*segments: str) -> str:
    return "/" + "/".join(quote(s, safe="") for s in segments)


def custom_path(namespace: str | None, plural: str, *rest: str) -> str:
    scope = ("namespaces", namespace) if namespace else ()
    return path("apis", GROUP, VERSION, *scope, plural, *rest)


def core_path(namespace: str, plural: str, *rest: str) -> str:
    return path("api", "v1", "namespaces", namespace, plural, *rest)


def batch_path(namespace: str, *rest: str) -> str:
    return path("apis", "batch", "v1", "namespaces", namespace, "jobs", *rest)


@asynccontextmanager
async def open_response(
    method: str,
    url_path: str,
    *,
    params: Mapping[str, str] | None = None,
    body: object = None,
    content_type: str | None = None,
    timeout: float | None = None,
    policy: apierrors.RetryPolicy = apierrors.DEFAULT_POLICY,
) -> AsyncIterator[aiohttp.ClientResponse]:
    """The API's successful response, body unread; retried as the module says, typed
    errors (``errors``) otherwise.  ``timeout`` bounds the whole call, retries included."""
    data = None if body is None else json.dumps(body, separators=(",", ":"))
    if data is not None and content_type is None:
        content_type = "application/json"
    call = _Call(method, url_path, params, data, content_type, timeout)
    if timeout is not None:
        policy = dataclasses.replace(policy, budget=min(policy.budget, timeout))
    resp = await _send_retrying(call, policy)
    try:
        yield resp
    finally:
        resp.release()


@dataclass(frozen=True)
class _Call:
    method: str
    url_path: str
    params: Mapping[str, str] | None
    data: str | None
    content_type: str | None
    timeout: float | None


async def _send_retrying(call: _Call, policy: apierrors.RetryPolicy) -> aiohttp.ClientResponse:
    started = time.monotonic()
    login = current_login()
    attempt, reauthenticated = 0, False
    while True:
        attempt += 1
        try:
            return await _send(call, login, time.monotonic() - started)
        except apierrors.Unauthorized as exc:
            if reauthenticated:
                raise
            reauthenticated = True
            try:
                login = relogin(login)
            except (kopf.LoginError, OSError, ValueError, KeyError) as failure:
                raise exc from failure  # No credentials to try instead: the 401 stands.
            continue
        except (apierrors.ApiError, apierrors.Unreachable) as exc:
            wait = policy.delay(call.method, exc, attempt, time.monotonic() - started)
            if wait is None:
                raise
            log.warning(
                "kubernetes API: %s %s failed (%s), attempt %d; retrying in %.2fs",
                call.method,
                call.url_path,
                exc,
                attempt,
                wait,
            )
        await asyncio.sleep(wait)


async def _send(call: _Call, login: Login, elapsed: float) -> aiohttp.ClientResponse:
    """One attempt: the open response if it succeeded, its typed error otherwise."""
    fence = WRITE_FENCE.get()
    if fence is not None and call.method != "GET" and not fence():
        raise apierrors.Fenced(f"{call.method} {call.url_path}: this replica no longer leads")
    headers = {"Accept": "application/json", **login.headers}
    if call.content_type:
        headers["Content-Type"] = call.content_type
    kwargs: dict[str, Any] = {}
    if call.timeout is not None:
        # What is left of the call's time: retries never stretch a caller's deadline.
        kwargs["timeout"] = aiohttp.ClientTimeout(total=max(0.1, call.timeout - elapsed))
    try:
        resp = await _session().request(
            call.method,
            login.server + call.url_path,
            params=call.params,
            data=call.data,
            headers=headers,
            ssl=login.ssl_context,
            proxy=login.proxy,
            **kwargs,
        )
        if resp.status < 400:
            return resp
        try:
            raw = await resp.read()
        finally:
            resp.release()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise apierrors.Unreachable(f"{type(exc).__name__}: {exc}") from exc
    raise apierrors.from_status(resp.status, raw, resp.headers)


async def request(
    method: str,
    url_path: str,
    *,
    params: Mapping[str, str] | None = None,
    body: object = None,
    content_type: str | None = None,
    timeout: float | None = None,
) -> Any:
    """One call; the API's JSON answer as is."""
    async with open_response(
        method, url_path, params=params, body=body, content_type=content_type, timeout=timeout
    ) as resp:
        try:
            raw = await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise apierrors.Unreachable(f"{type(exc).__name__}: {exc}") from exc
    return json.loads(raw) if raw else None
