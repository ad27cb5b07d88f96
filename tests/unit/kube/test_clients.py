"""The one request function against a scripted API server, in-process over real HTTP.

The server (aiohttp) answers each request from a script (a code, a body, headers) and
records what it was sent; the operator's client logs in from a kubeconfig file as in
production.  Aspects: a transient 500/503/429/broken connection is retried at once
(a 429 after its ``Retry-After``) and the call succeeds; refusals are raised typed
from their Status, after one attempt; a 401 logs in again (the kubeconfig rewritten
with a rotated token) and retries once; the credentials go on every call; a closed
write fence (the engine's, after leadership ran out) sends no write, but reads.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from agentchain.kube import apierrors, clients

Script = list[tuple[int, Any, dict[str, str]]]


class FakeApi:
    """Answers from ``script`` (then 200 ``{"ok": true}``); records every request."""

    def __init__(self) -> None:
        self.script: Script = []
        self.seen: list[tuple[str, str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.method, request.path, request.headers.get("Authorization", "")))
        if not self.script:
            return web.json_response({"ok": True, "body": await request.text()})
        code, body, headers = self.script.pop(0)
        if code == 0:  # A connection that breaks before any answer.
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        return web.json_response(body, status=code, headers=headers)


def status(code: int, reason: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "Status", "status": "Failure", "code": code, "reason": reason, **extra}


def write_kubeconfig(path: Path, server: str, token: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(config))


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    clients.reset()
    yield path
    clients.reset()


@pytest.fixture
async def api(kubeconfig: Path) -> AsyncIterator[FakeApi]:
    fake = FakeApi()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    server = TestServer(app)
    await server.start_server()
    write_kubeconfig(kubeconfig, str(server.make_url("")), "first")
    try:
        yield fake
    finally:
        await clients.close()
        await server.close()


def waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits the client slept before each retry, as it logged them: what it chose,
    not the wall time a loaded machine stretches."""
    found = (re.search(r"retrying in ([0-9.]+)s", r.getMessage()) for r in caplog.records)
    return [float(m.group(1)) for m in found if m]


@pytest.mark.parametrize(
    "failure",
    [
        (500, status(500, "InternalError"), {}),
        (503, status(503, "ServiceUnavailable"), {}),
        (504, "<html>gateway timeout</html>", {}),
        (0, None, {}),
    ],
)
async def test_a_transient_failure_is_retried_at_once(
    api: FakeApi, failure: tuple[int, Any, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    api.script = [failure]
    answer = await clients.request("POST", "/apis/batch/v1/namespaces/n/jobs", body={"a": 1})
    assert answer == {"ok": True, "body": '{"a":1}'}
    assert len(waits(caplog)) == 1 and waits(caplog)[0] <= 0.1
    assert [m for m, _, _ in api.seen] == ["POST", "POST"]


async def test_too_many_requests_waits_its_retry_after(
    api: FakeApi, caplog: pytest.LogCaptureFixture
) -> None:
    api.script = [(429, status(429, "TooManyRequests"), {"Retry-After": "1"})]
    started = time.monotonic()
    assert await clients.request("PATCH", "/x", body={}) == {"ok": True, "body": "{}"}
    assert time.monotonic() - started >= 1.0
    assert waits(caplog) == [1.0]
    assert len(api.seen) == 2


async def test_a_refusal_is_raised_typed_after_one_attempt(api: FakeApi) -> None:
    api.script = [(409, status(409, "AlreadyExists", message="exists"), {})]
    with pytest.raises(apierrors.AlreadyExists) as caught:
        await clients.request("POST", "/x", body={})
    assert (caught.value.code, caught.value.message) == (409, "exists")
    assert len(api.seen) == 1


async def test_failures_past_the_attempts_are_raised(api: FakeApi) -> None:
    api.script = [(500, status(500, "InternalError"), {})] * 10
    with pytest.raises(apierrors.ServerError):
        await clients.request("GET", "/x")
    assert len(api.seen) == apierrors.DEFAULT_POLICY.attempts


async def test_an_unreachable_server_is_unreachable(kubeconfig: Path) -> None:
    write_kubeconfig(kubeconfig, "http://127.0.0.1:9", "t")  # Discard port: refused.
    policy = apierrors.RetryPolicy(attempts=2)
    with pytest.raises(apierrors.Unreachable):
        async with clients.open_response("GET", "/x", policy=policy):
            pass
    await clients.close()


async def test_a_401_logs_in_again_and_retries_once(api: FakeApi, kubeconfig: Path) -> None:
    assert await clients.request("GET", "/a") == {"ok": True, "body": ""}
    server = clients.current_login().server
    write_kubeconfig(kubeconfig, server, "rotated")
    api.script = [(401, status(401, "Unauthorized"), {})]
    assert await clients.request("GET", "/b") == {"ok": True, "body": ""}
    assert [auth for _, _, auth in api.seen] == ["Bearer first", "Bearer first", "Bearer rotated"]
    api.script = [(401, status(401, "Unauthorized"), {})] * 2
    with pytest.raises(apierrors.Unauthorized):
        await clients.request("GET", "/c")


async def test_a_callers_timeout_bounds_the_retries_too(
    api: FakeApi, caplog: pytest.LogCaptureFixture
) -> None:
    api.script = [(429, status(429, "TooManyRequests"), {"Retry-After": "2"})]
    with pytest.raises(apierrors.TooManyRequests):
        await clients.request("POST", "/x", body={}, timeout=1.0)
    assert waits(caplog) == []  # raised at once: the wait asked for is past the timeout
    assert len(api.seen) == 1


async def test_a_401_with_no_credentials_left_to_read_stays_a_401(
    api: FakeApi, kubeconfig: Path
) -> None:
    assert await clients.request("GET", "/a") == {"ok": True, "body": ""}
    kubeconfig.unlink()
    api.script = [(401, status(401, "Unauthorized"), {})]
    with pytest.raises(apierrors.Unauthorized):
        await clients.request("GET", "/b")


async def test_a_closed_write_fence_sends_no_write_but_still_reads(api: FakeApi) -> None:
    """The engine's context carries the elector's fence: once it is closed (leadership
    ran out), writes are refused before anything is sent; reads still go out."""
    leading = [True]
    token = clients.WRITE_FENCE.set(lambda: leading[0])
    try:
        await clients.request("PATCH", "/a", body={})
        leading[0] = False
        for method in ("POST", "PATCH", "PUT", "DELETE"):
            with pytest.raises(apierrors.Fenced):
                await clients.request(method, "/b", body={})
        await clients.request("GET", "/c")
    finally:
        clients.WRITE_FENCE.reset(token)
    await clients.request("POST", "/d", body={})  # Outside the engine's context: unfenced.
    assert [(m, p) for m, p, _ in api.seen] == [("PATCH", "/a"), ("GET", "/c"), ("POST", "/d")]
