"""The dashboard's buttons (web/dashboard/pages.py): the job API's flow control, as a session.

Aspects covered (served on real Redis; what reaches Kubernetes is in
``e2e/test_dashboard_browser.py``):
* without a session every action answers 401, even from this origin;
* with a session, an action without the session's CSRF token, or from another
  origin, is a 403 before anything is read;
* the API's own checks apply unchanged: a bad body is a 422, a namespace the
  operator does not serve a 403 (the same handlers answer);
* a dashboard action records ``dashboard`` as who asked; the API records ``api``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp.test_utils import make_mocked_request
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.settings import Settings
from agentchain.web.app import build_internal_app
from agentchain.web.dashboard import logins, pages
from agentchain.web.jobapi import stoproutes
from tests.unit.web.conftest import Client, make_runtime, serving
from tests.unit.web.dashboard.test_logins import log_in, same_origin

pytestmark = pytest.mark.redis

ACTIONS = [
    "/ui/api/jobs/team-a/job-1/stop",
    "/ui/api/jobs/team-a/job-1/approve",
    "/ui/api/jobs/team-a/job-1/reject",
    "/ui/api/chains/team-a/chain-1/stop",
]


@pytest.fixture
async def ui(runtime: Runtime) -> AsyncIterator[Client]:
    async with serving(build_internal_app(runtime)) as c:
        yield c


@pytest.mark.parametrize("path", ACTIONS)
async def test_an_action_without_a_session_is_401(ui: Client, path: str) -> None:
    response = await ui.post(path, json={}, headers=same_origin(ui))
    assert response.status == 401
    assert (await response.json())["error"] == "login required"


@pytest.mark.parametrize("path", ACTIONS)
async def test_an_action_needs_the_csrf_token_and_this_origin(ui: Client, path: str) -> None:
    csrf = await log_in(ui)
    missing = await ui.post(path, json={}, headers=same_origin(ui))
    assert missing.status == 403
    assert (await missing.json())["error"] == "csrf token missing or wrong"
    wrong = await ui.post(path, json={}, headers=same_origin(ui, csrf[:-1] + "x"))
    assert wrong.status == 403
    evil = {"Origin": "http://evil.example", logins.CSRF_HEADER: csrf}
    cross = await ui.post(path, json={}, headers=evil)
    assert cross.status == 403
    assert (await cross.json())["error"] == "cross-site request"


@pytest.mark.parametrize("path", ACTIONS)
@pytest.mark.parametrize("body", [b'{"why": "x"}', b'{"reason": "' + b"x" * 201 + b'"}', b"{"])
async def test_a_bad_body_is_the_apis_422(ui: Client, path: str, body: bytes) -> None:
    csrf = await log_in(ui)
    headers = {**same_origin(ui, csrf), "Content-Type": "application/json"}
    response = await ui.post(path, data=body, headers=headers)
    assert response.status == 422, await response.text()


@pytest.mark.parametrize("path", ACTIONS)
async def test_a_namespace_the_operator_does_not_serve_is_the_apis_403(
    redis: Redis, with_settings: Callable[..., Settings], path: str
) -> None:
    rt = make_runtime(redis, with_settings(namespaces=("team-b",)))
    async with serving(build_internal_app(rt)) as c:
        csrf = await log_in(c)
        response = await c.post(path, json={}, headers=same_origin(c, csrf))
        assert response.status == 403, await response.text()
        assert "does not serve" in (await response.json())["detail"]


async def test_the_dashboard_is_recorded_as_who_asked() -> None:
    request = make_mocked_request("POST", "/ui/api/jobs/a/b/stop")
    assert (await stoproutes._request_of(request)).by == stoproutes.STOPPED_BY_API
    request[stoproutes.ACTOR_KEY] = pages.ACTOR
    wanted = await stoproutes._request_of(request)
    assert wanted.by == "dashboard" and not wanted.reason
