"""The dashboard's login, sessions and CSRF checks (issue 19), served on real Redis.

Aspects covered:
* pure decisions: same-origin (``Origin`` against ``Host``, ``Sec-Fetch-Site`` without
  one), the CSRF token compare, a session's token digest checked against the admin
  tokens configured now (a removed token ends its sessions);
* without a session: every page answers 401 with the shell (whose script shows the
  login form), every JSON call 401 JSON; the shell and its assets carry the strict CSP;
* login: only an admin token, only JSON, only from this origin; the cookie is
  ``HttpOnly``, ``SameSite=Strict``, ``Path=/ui/``, ``Secure`` when configured, and
  Redis holds neither the session id nor the token;
* a session reads ``/ui/api/session``; state-changing calls need the CSRF token and
  this origin; logout ends the session at once, and so does a new login (no fixation);
* the dashboard is on by default on the internal listener, never on the public one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.settings import Settings
from agentchain.store import keys
from agentchain.store.sessionrecords import Session
from agentchain.store.signing import OperatorKeys
from agentchain.web.app import build_internal_app
from agentchain.web.dashboard import logins, pages
from tests.unit.web.conftest import ADMIN_TOKEN, Client, serving

pytestmark = pytest.mark.redis

KEYS = OperatorKeys(["k1"])


class TestPureDecisions:
    @pytest.mark.parametrize(
        ("headers", "expected"),
        [
            ({"Origin": "http://localhost:8081", "Host": "localhost:8081"}, True),
            ({"Origin": "https://dash.example", "Host": "dash.example"}, True),
            ({"Origin": "http://evil.example", "Host": "localhost:8081"}, False),
            ({"Origin": "http://localhost:8081.evil", "Host": "localhost:8081"}, False),
            ({"Origin": "null", "Host": "null"}, False),
            ({"Origin": "http://localhost:8081"}, False),
            ({"Sec-Fetch-Site": "same-origin", "Host": "x"}, True),
            ({"Sec-Fetch-Site": "cross-site", "Host": "x"}, False),
            ({"Host": "x"}, False),
        ],
    )
    def test_same_origin(self, headers: dict[str, str], expected: bool) -> None:
        assert logins.same_origin(headers) is expected

    def test_csrf_token_must_match_exactly(self) -> None:
        session = Session("digest", "the-csrf-token", 0.0)
        assert logins.csrf_ok(session, "the-csrf-token")
        for wrong in (None, "", "the-csrf-toke", "the-csrf-token ", "\udcff"):
            assert not logins.csrf_ok(session, wrong)

    def test_a_digest_lives_as_long_as_its_token_is_configured(self) -> None:
        digest = logins.token_digest(KEYS, "tok-a")
        assert logins.admin_digest_ok(KEYS, digest, ["tok-b", "tok-a"])
        assert not logins.admin_digest_ok(KEYS, digest, ["tok-b"])
        assert not logins.admin_digest_ok(KEYS, digest, [])
        assert not logins.admin_digest_ok(OperatorKeys(["k2"]), digest, ["tok-a"])
        # During a key rotation (new key first) the old key still verifies.
        assert logins.admin_digest_ok(OperatorKeys(["k2", "k1"]), digest, ["tok-a"])


ORIGIN = "http://127.0.0.1"


def same_origin(client: Client, csrf: str | None = None) -> dict[str, str]:
    host = f"{client.host}:{client.port}"
    headers = {"Origin": f"http://{host}", "Host": host}
    if csrf is not None:
        headers[logins.CSRF_HEADER] = csrf
    return headers


async def log_in(client: Client, token: str = ADMIN_TOKEN) -> str:
    response = await client.post("/ui/login", json={"token": token}, headers=same_origin(client))
    assert response.status == 200, await response.text()
    csrf: str = (await response.json())["csrf"]
    return csrf


@pytest.fixture
async def ui(runtime: Runtime) -> AsyncIterator[Client]:
    async with serving(build_internal_app(runtime)) as c:
        yield c


@pytest.mark.parametrize("path", ["/ui/", "/ui/jobs/ns/job-1", "/ui/chains/ns/c1"])
async def test_without_a_session_a_page_is_401_with_the_login_shell(ui: Client, path: str) -> None:
    response = await ui.get(path)
    assert response.status == 401 and response.content_type == "text/html"
    assert 'id="login-form"' in await response.text()
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy and "require-trusted-types-for 'script'" in policy
    assert response.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    "path",
    [
        "/ui/api/session",
        "/ui/api/jobs",
        "/ui/api/jobs/ns/job-1",
        "/ui/api/jobs/ns/job-1/output",
        "/ui/api/jobs/ns/job-1/log",
        "/ui/api/chains/ns/c1",
        "/ui/api/chains/ns/c1/events",
        "/ui/api/events",
    ],
)
async def test_without_a_session_every_json_call_is_401(ui: Client, path: str) -> None:
    response = await ui.get(path)
    assert response.status == 401 and response.content_type == "application/json"
    assert (await response.json())["error"] == "login required"


async def test_the_assets_load_without_a_session(ui: Client) -> None:
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        response = await ui.get(f"/ui/static/{name}")
        assert response.status == 200 and response.content_type == kind
    assert (await ui.get("/ui/static/index.html")).status == 404
    assert (await ui.get("/ui/static/..%2Fdashboard.py")).status == 404
    home = await ui.get("/")  # Redirected to /ui/: the shell, 401 until logged in.
    assert home.url.path == "/ui/" and home.status == 401


async def test_login_sets_a_strict_cookie_and_redis_holds_no_secret(
    ui: Client, runtime: Runtime
) -> None:
    response = await ui.post("/ui/login", json={"token": ADMIN_TOKEN}, headers=same_origin(ui))
    assert response.status == 200
    cookie = response.cookies[logins.COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/ui/"
    assert not cookie["secure"]  # Plain HTTP and no TLS proxy configured.
    assert int(cookie["max-age"]) == keys.DASHBOARD_SESSION_TTL_SECONDS
    stored = [k async for k in runtime.redis.scan_iter(f"{keys.DASHBOARD_SESSION_PREFIX}*")]
    assert len(stored) == 1
    dump = repr(stored) + repr(await runtime.redis.hgetall(stored[0]))  # type: ignore[misc]
    assert cookie.value not in dump and ADMIN_TOKEN not in dump
    assert 0 < await runtime.redis.ttl(stored[0]) <= keys.DASHBOARD_SESSION_TTL_SECONDS
    session = await ui.get("/ui/api/session")
    assert (
        session.status == 200 and (await session.json())["csrf"] == (await response.json())["csrf"]
    )
    assert (await ui.get("/ui/")).status == 200


async def test_the_cookie_is_secure_behind_a_tls_proxy(
    redis: Redis, with_settings: Callable[..., Settings]
) -> None:
    rt = Runtime.from_client(with_settings(dashboard_cookie_secure=True), redis)
    async with serving(build_internal_app(rt)) as c:
        response = await c.post("/ui/login", json={"token": ADMIN_TOKEN}, headers=same_origin(c))
        assert response.cookies[logins.COOKIE]["secure"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"token": "wrong"}, 401),
        ({"token": ""}, 401),
        ({"token": 5}, 401),
        ({}, 401),
        ([ADMIN_TOKEN], 401),
    ],
)
async def test_login_refuses_anything_but_an_admin_token(
    ui: Client, body: object, status: int
) -> None:
    response = await ui.post("/ui/login", json=body, headers=same_origin(ui))
    assert response.status == status
    assert logins.COOKIE not in response.cookies


async def test_login_refuses_a_form_and_another_origin(ui: Client) -> None:
    form = await ui.post("/ui/login", data={"token": ADMIN_TOKEN}, headers=same_origin(ui))
    assert form.status == 415
    evil = {"Origin": "http://evil.example"}
    cross = await ui.post("/ui/login", json={"token": ADMIN_TOKEN}, headers=evil)
    assert cross.status == 403 and logins.COOKIE not in cross.cookies
    bare = await ui.post("/ui/login", json={"token": ADMIN_TOKEN})  # No Origin, no Sec-Fetch-Site.
    assert bare.status == 403


async def test_changes_need_the_csrf_token_and_this_origin(ui: Client) -> None:
    csrf = await log_in(ui)
    assert (await ui.post("/ui/api/logout", headers=same_origin(ui))).status == 403
    wrong = await ui.post("/ui/api/logout", headers=same_origin(ui, "x" * 43))
    assert wrong.status == 403
    cross = await ui.post(
        "/ui/api/logout", headers={"Origin": "http://evil.example", logins.CSRF_HEADER: csrf}
    )
    assert cross.status == 403
    assert (await ui.get("/ui/api/session")).status == 200  # Still logged in.
    out = await ui.post("/ui/api/logout", headers=same_origin(ui, csrf))
    assert out.status == 200
    assert (await ui.get("/ui/api/session")).status == 401


async def test_logout_ends_the_session_even_for_a_copied_cookie(ui: Client) -> None:
    csrf = await log_in(ui)
    session_id = ui.session.cookie_jar.filter_cookies(ui.make_url("/ui/"))[logins.COOKIE].value
    await ui.post("/ui/api/logout", headers=same_origin(ui, csrf))
    stolen = await ui.get("/ui/api/session", cookies={logins.COOKIE: session_id})
    assert stolen.status == 401


async def test_a_token_removed_from_the_secret_ends_its_sessions(
    redis: Redis, runtime: Runtime, with_settings: Callable[..., Settings]
) -> None:
    async with serving(build_internal_app(runtime)) as c:
        await log_in(c)
        jar = c.session.cookie_jar.filter_cookies(c.make_url("/ui/"))
        session_id = jar[logins.COOKIE].value
    rotated = Runtime.from_client(with_settings(admin_tokens=("another-token",)), redis)
    rotated.operator_keys = runtime.operator_keys  # Same operator, same key.
    async with serving(build_internal_app(rotated)) as c:
        response = await c.get("/ui/api/session", cookies={logins.COOKIE: session_id})
        assert response.status == 401


async def test_a_forged_cookie_is_no_session(ui: Client) -> None:
    for value in ("x", "a" * 43, "a" * 500):
        response = await ui.get("/ui/api/session", cookies={logins.COOKIE: value})
        assert response.status == 401


def test_the_shell_is_static_and_loads_only_its_own_files() -> None:
    text = pages.SHELL.decode()
    assert '<script src="/ui/static/app.js" defer></script>' in text
    assert "<style" not in text and "onclick" not in text and "{{" not in text


async def test_a_new_login_ends_the_session_the_browser_had(ui: Client) -> None:
    await log_in(ui)
    first = ui.session.cookie_jar.filter_cookies(ui.make_url("/ui/"))[logins.COOKIE].value
    await log_in(ui)
    second = ui.session.cookie_jar.filter_cookies(ui.make_url("/ui/"))[logins.COOKIE].value
    assert first != second
    assert (await ui.get("/ui/api/session", cookies={logins.COOKIE: first})).status == 401
    assert (await ui.get("/ui/api/session")).status == 200
