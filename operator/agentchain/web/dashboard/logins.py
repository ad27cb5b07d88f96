"""The dashboard's login: the API's admin tokens, a session cookie, CSRF on every change.

``POST /ui/login`` takes ``{"token": ...}``; an admin token (the same Secret as the
job API's) opens a server-side session (``store/sessionrecords.py``) and sets a cookie that
is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page sends
it), ``Path=/ui/`` and ``Secure`` when the request came over TLS or
``AGENTCHAIN_DASHBOARD_COOKIE_SECURE`` says a TLS proxy is in front.  A session sees
what an admin token sees: the operator's namespaces.  Job tokens are refused here;
they belong to running agents, not to people.

Every request under ``/ui/`` but the login form's own assets goes through
:func:`session_middleware`: without a valid session, JSON calls answer 401 JSON and
pages answer 401 with the page shell, whose script shows the login form.  The session
is checked against the admin tokens configured *now*, so a token removed from the
Secret ends its sessions.

CSRF, for every method that changes something (login and logout included): the
request must come from this origin (``Origin`` equal to ``Host``, or
``Sec-Fetch-Site: same-origin`` when a browser sends no ``Origin``), and, once
logged in, carry the session's CSRF token in ``X-CSRF-Token`` (the page reads it
from ``GET /ui/api/session``, a same-origin JSON call no other site can read).
Login must be JSON, which no cross-site form can send without a CORS preflight the
operator never grants.  The decisions are pure functions, tested in
``tests/unit/web/dashboard/test_logins.py``.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Middleware

from agentchain.core.runtime import Runtime
from agentchain.store.sessionrecords import Session, SessionStore
from agentchain.store.signing import OperatorKeys, mac
from agentchain.web import auth
from agentchain.web.jobapi import reads
from agentchain.web.responses import ApiError, Handler, json_response

COOKIE = "agentchain_session"
CSRF_HEADER = "X-CSRF-Token"
PREFIX = "/ui/"
# Served without a session: what the login form itself needs.
OPEN_PATHS = frozenset({"/ui/login"})
OPEN_PREFIXES = ("/ui/static/",)
SESSION_PURPOSE = b"agentchain/dashboard-session/v1"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOGIN_MAX_BYTES = 4096
SESSIONS_KEY = web.AppKey("agentchain.sessions", SessionStore)
SESSION_KEY: web.RequestKey[tuple[str, Session]] = web.RequestKey("agentchain.session")


# --- pure decisions ---------------------------------------------------------------------
def token_digest(keys: OperatorKeys, token: str) -> str:
    """The digest a session keeps of its token (current operator key)."""
    return mac(keys.subkeys(SESSION_PURPOSE)[0], token.encode("utf-8", "surrogatepass"))


def admin_digest_ok(keys: OperatorKeys, digest: str, admin_tokens: Sequence[str]) -> bool:
    """Whether ``digest`` is still that of a configured admin token (constant time)."""
    ok = False
    for key in keys.subkeys(SESSION_PURPOSE):
        for token in admin_tokens:
            if token:
                ok |= hmac.compare_digest(mac(key, token.encode("utf-8")), digest)
    return ok


def same_origin(headers: Mapping[str, str]) -> bool:
    """Whether a state-changing request comes from the dashboard's own pages."""
    origin, host = headers.get("Origin"), headers.get("Host")
    if origin is not None:
        return bool(host) and origin != "null" and urlsplit(origin).netloc == host
    return headers.get("Sec-Fetch-Site") == "same-origin"


def csrf_ok(session: Session, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(
        session.csrf.encode(), presented.encode("utf-8", "surrogatepass")
    )


def set_cookie(response: web.StreamResponse, value: str, *, secure: bool, max_age: int) -> None:
    """The session cookie (``max_age`` 0 deletes it): no script, no other site, /ui/ only."""
    response.set_cookie(
        COOKIE, value, path=PREFIX, httponly=True, samesite="Strict", secure=secure, max_age=max_age
    )


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


# --- I/O --------------------------------------------------------------------------------
def _secure(request: web.Request, rt: Runtime) -> bool:
    return request.secure or rt.settings.dashboard_cookie_secure


async def current(request: web.Request, rt: Runtime) -> tuple[str, Session] | None:
    """The request's live session, or None."""
    session_id = request.cookies.get(COOKIE)
    if not session_id or len(session_id) > 128:
        return None
    session = await request.app[SESSIONS_KEY].get(session_id)
    if session is None:
        return None
    if not admin_digest_ok(rt.operator_keys, session.token_digest, rt.settings.admin_tokens):
        return None  # Its token was removed from the Secret since.
    return session_id, session


def session_middleware(rt: Runtime, page: Handler) -> Middleware:
    """401 under ``/ui/`` without a session (``page`` answers for pages); CSRF checks."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(PREFIX):
            return await handler(request)
        changes = request.method not in SAFE_METHODS
        if changes and not same_origin(request.headers):
            raise ApiError(403, "cross-site request", "Changes come from the dashboard's pages.")
        if is_open(request.path):
            return await handler(request)
        found = await current(request, rt)
        if found is None:
            if request.path.startswith("/ui/api/") or changes:
                raise ApiError(401, "login required", "Log in to the dashboard at /ui/.")
            response = await page(request)
            response.set_status(401)
            return response
        if changes and not csrf_ok(found[1], request.headers.get(CSRF_HEADER)):
            raise ApiError(403, "csrf token missing or wrong", f"Send {CSRF_HEADER}.")
        request[SESSION_KEY] = found
        request[auth.PRINCIPAL_KEY] = auth.Admin(rt.settings.namespaces)
        return await handler(request)

    return middleware


def _session_body(rt: Runtime, session: Session) -> dict[str, object]:
    return {"csrf": session.csrf, "namespaces": list(rt.settings.namespaces)}


async def login(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    if request.content_type != "application/json":
        raise ApiError(415, "json required", 'Send {"token": "<admin token>"} as JSON.')
    raw = await request.content.read(LOGIN_MAX_BYTES + 1)
    try:
        token = json.loads(raw)["token"] if len(raw) <= LOGIN_MAX_BYTES else None
    except (ValueError, TypeError, KeyError):
        token = None
    if not isinstance(token, str) or not auth.is_admin_token(token, rt.settings.admin_tokens):
        raise ApiError(401, "not an admin token", "Log in with an admin token of the job API.")
    store = request.app[SESSIONS_KEY]
    previous = request.cookies.get(COOKIE)
    if previous and len(previous) <= 128:
        await store.delete(previous)  # A login never keeps an id the browser had before.
    session_id, session = await store.create(token_digest(rt.operator_keys, token))
    response = json_response(_session_body(rt, session))
    set_cookie(response, session_id, secure=_secure(request, rt), max_age=store.ttl)
    return response


async def logout(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    session_id, _ = request[SESSION_KEY]
    await request.app[SESSIONS_KEY].delete(session_id)
    response = json_response({"loggedOut": True})
    set_cookie(response, "", secure=_secure(request, rt), max_age=0)
    return response


async def whoami(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    return json_response(_session_body(rt, request[SESSION_KEY][1]))


def add_routes(app: web.Application, rt: Runtime) -> None:
    app[SESSIONS_KEY] = SessionStore(rt.redis, rt.operator_keys)
    app.router.add_post("/ui/login", login)
    app.router.add_post("/ui/api/logout", logout)
    app.router.add_get("/ui/api/session", whoami)
