"""The Kubernetes API as the operator's own calls see it: asynchronous JSON over aiohttp.

kopf has its own client for watching.  Our reads and writes used to go through the
official ``kubernetes`` client, pushed to threads because it is synchronous; on a
chain hop that cost ~1-2 ms of thread hand-off and request building per call, on
the critical path, more than a third of some calls.  The operator only ever needs
the API's JSON, so it now speaks REST directly, as kopf does.

The official client still does what it does well: reading the configuration
(in-cluster service account or ``KUBECONFIG``, token refresh hooks, exec plugins).
Errors are raised as its :class:`ApiException`, so callers test ``status`` as before.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import aiohttp
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

GROUP = "labrats.work"
VERSION = "v1alpha1"
MERGE_PATCH = "application/merge-patch+json"
# No call may hang the operator: a dead connection is noticed within a minute.
DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60)
# Chains fan out many small calls at once.
CONNECTIONS = 32
# How long the credentials are reused before the official client's refresh hook runs
# again: well inside any token's life (bound tokens are rotated at 80% of an hour or
# more; in-cluster the hook rereads the token file once a minute at most).
AUTH_REFRESH_SECONDS = 10.0

Obj = dict[str, Any]


@functools.cache
def configuration() -> client.Configuration:
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))  # type: ignore[no-untyped-call]
    return client.Configuration.get_default_copy()


def _ssl_context(cfg: client.Configuration) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=cfg.ssl_ca_cert, cadata=cfg.ca_cert_data)
    if cfg.cert_file:
        context.load_cert_chain(cfg.cert_file, cfg.key_file)
    if not cfg.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


# One session per event loop: the operator has one, tests get one per test.
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)


def _session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        cfg = configuration()
        connector = aiohttp.TCPConnector(ssl=_ssl_context(cfg), limit=CONNECTIONS)
        session = aiohttp.ClientSession(connector=connector, timeout=DEFAULT_TIMEOUT)
        _sessions[loop] = session
    return session


async def close() -> None:
    """Close this loop's session (operator cleanup, test teardown)."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


def reset() -> None:
    """Forget the configuration (another cluster's ``KUBECONFIG``, in tests)."""
    configuration.cache_clear()
    _sessions.clear()
    _auth.clear()


# (when taken, headers): the official client's ``auth_settings`` runs the token
# refresh hook, which for a kubeconfig token resets the host and with it rescans the
# whole environment for proxies: ~0.5 ms of CPU per call under load, measured.
_auth: dict[str, tuple[float, dict[str, str]]] = {}


def _auth_headers() -> dict[str, str]:
    taken, headers = _auth.get("", (-AUTH_REFRESH_SECONDS, {}))
    now = time.monotonic()
    if now - taken < AUTH_REFRESH_SECONDS:
        return headers
    settings: Any = configuration().auth_settings()
    headers = {
        auth["key"]: auth["value"]
        for auth in settings.values()
        if auth.get("in") == "header" and auth.get("value")
    }
    _auth[""] = (now, headers)
    return headers


def _headers(content_type: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", **_auth_headers()}
    if content_type:
        headers["Content-Type"] = content_type
    return headers


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
) -> AsyncIterator[aiohttp.ClientResponse]:
    """The API's response, status checked (ApiException otherwise), body unread."""
    data = None if body is None else json.dumps(body, separators=(",", ":"))
    if data is not None and content_type is None:
        content_type = "application/json"
    cfg = configuration()
    kwargs: dict[str, Any] = {}
    if timeout is not None:
        kwargs["timeout"] = aiohttp.ClientTimeout(total=timeout)
    if cfg.tls_server_name:
        kwargs["server_hostname"] = cfg.tls_server_name
    if cfg.proxy:
        kwargs["proxy"] = cfg.proxy
    async with _session().request(
        method,
        cfg.host.rstrip("/") + url_path,
        params=params,
        data=data,
        headers=_headers(content_type),
        **kwargs,
    ) as resp:
        if resp.status >= 400:
            exc = ApiException(status=resp.status, reason=resp.reason)
            exc.body = (await resp.read()).decode(errors="replace")
            exc.headers = resp.headers
            raise exc
        yield resp


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
        raw = await resp.read()
    return json.loads(raw) if raw else None


def is_status(exc: BaseException, code: int) -> bool:
    return isinstance(exc, ApiException) and exc.status == code


def already_exists(exc: BaseException) -> bool:
    return is_status(exc, 409)


def not_found(exc: BaseException) -> bool:
    return is_status(exc, 404)
