"""When the operator cannot write a chain back to GitHub, the job and its AiAgent show it
(issue 17): the write-back worker (``github/writeback.py``) driven through
``writeback.observe`` with each reason GitHub can give, against the in-process API
server (``fakeapi``), a real Redis and a small GitHub over HTTP.

GitHub is an aiohttp server answering the calls a write-back and a job token make (mint
an installation token, the App itself, list/create a comment, revoke a token), each
of which can be made to fail with a given status and headers.  The App client is the
real one (githubkit, ``github/apps.py``), so the reasons are ``github/githuberrors.py``'s
classification of GitHub's own answers on their own paths.

Aspects covered:
* a permanent failure (401 on the App's token request: ``BadAppKey``; 404 on the
  installation: ``NotInstalled``; 403 on the comment's creation: ``PermissionMissing``)
  is counted once in ``agentchain_github_writebacks_total{result="failed",reason=...}``,
  told in one Warning Event ``GitHubWriteBackFailed`` on the chain's root AgentJob and
  one on its AiAgent (the reason and GitHub's answer in the message, never the key or a
  token), set as the AiAgent's ``GitHubWriteBack=False`` with that reason and message,
  and not retried; the chain is untouched (no write to any AgentJob);
* a transient one is not reported: a 500 is counted ``retried`` and retried after a
  back-off, a 429 with ``Retry-After`` is counted ``rate_limited`` and pauses the worker
  for that long; neither writes a condition or an Event, and the retry writes the
  comment, after which the condition says ``WrittenBack`` and ``written`` is counted;
* a rate limit whose answer names no time (a 429, a secondary-limit 403, without
  ``Retry-After`` or ``X-RateLimit-Remaining: 0``) pauses the worker for a minute, and
  is neither a missing permission nor a 5xx to retry at once;
* a transient failure on the last attempt is reported like a permanent one;
* a job token minted at launch counts ``agentchain_github_job_tokens_total{result=
  "minted"}`` (``reused`` when the launch is replayed, ``revoked`` at the job's end);
  one GitHub refuses counts ``failed`` and ``refused``, with its Warning Event.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from agentchain import models
from agentchain.core.runtime import Runtime
from agentchain.github import appruntime, tokenminting, writeback
from agentchain.github.githuberrors import (
    BAD_APP_KEY,
    NOT_INSTALLED,
    PERMISSION_MISSING,
    RATE_LIMITED,
    UNAVAILABLE,
)
from agentchain.settings import Settings
from tests.unit.fakeapi import FakeApi, Obj, sealed
from tests.unit.github.test_writeback import _pem
from tests.unit.hop.test_hop_write_order import NS, SETTINGS, agent, api, kubeconfig

__all__ = ["api", "kubeconfig"]  # Fixtures.
pytestmark = pytest.mark.redis
REPO = "acme/widgets"
CHAIN = "c0ffee"
ROOT = "fix-1"
AGENT = "triage"
ISSUE = 5
INSTALLATION = 7
TOKEN = "ghs_thejobstokenthatmustnotleak"
WRITEBACKS = "agentchain_github_writebacks_total"
JOB_TOKENS = "agentchain_github_job_tokens_total"
KEY = (NS, CHAIN)


# -- GitHub ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)


CALLS: list[tuple[str, str, Callable[[list[str]], bool]]] = [
    ("POST", "mint", lambda p: p[:2] == ["app", "installations"] and p[-1] == "access_tokens"),
    ("GET", "app", lambda p: p == ["app"]),
    ("GET", "list_comments", lambda p: p[0] == "repos" and p[-1] == "comments"),
    ("POST", "create_comment", lambda p: p[0] == "repos" and p[-1] == "comments"),
    ("PATCH", "update_comment", lambda p: p[0] == "repos" and p[-2] == "comments"),
    ("DELETE", "revoke", lambda p: p == ["installation", "token"]),
]


def _user(login: str) -> Obj:
    url = f"https://api.github.com/users/{login}"
    links = ["followers", "following", "gists", "starred", "subscriptions", "organizations"]
    return {
        "login": login,
        "id": 1,
        "node_id": "U_1",
        "avatar_url": "",
        "gravatar_id": "",
        "url": url,
        "html_url": url,
        "repos_url": url,
        "events_url": url,
        "received_events_url": url,
        "type": "Bot",
        "site_admin": False,
        **{f"{link}_url": url for link in links},
    }


class FakeGitHub:
    """GitHub's answers to the App's calls; ``fail[call]``: the answers its next calls
    get instead; ``calls``: every call made, by name, with when."""

    def __init__(self) -> None:
        self.fail: dict[str, list[Answer]] = {}
        self.calls: list[tuple[str, float]] = []
        self.minted: list[Obj] = []
        self.comments: list[str] = []
        self.url = ""

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    async def handle(self, request: web.Request) -> web.Response:
        parts = request.path.strip("/").split("/")
        name = next(
            (n for method, n, match in CALLS if method == request.method and match(parts)), None
        )
        if name is None:
            return web.json_response({"message": f"unexpected {request.method}"}, status=418)
        self.calls.append((name, time.monotonic()))
        if self.fail.get(name):
            answer = self.fail[name].pop(0)
            body = {"message": answer.message}
            return web.json_response(body, status=answer.status, headers=answer.headers)
        body = await request.json() if request.can_read_body else {}
        return self._succeed(name, body, parts)

    def _succeed(self, name: str, body: Obj, parts: list[str]) -> web.Response:
        if name == "mint":
            self.minted.append(body)
            return web.json_response(
                {"token": TOKEN, "expires_at": "2099-01-01T00:00:00Z"}, status=201
            )
        if name == "app":
            return web.json_response(self._app())
        if name == "list_comments":
            return web.json_response([])
        if name == "create_comment":
            self.comments.append(str(body["body"]))
            return web.json_response(self._comment(len(self.comments)), status=201)
        if name == "update_comment":  # Edited in place: comment ids count from 1.
            number = int(parts[-1])
            self.comments[number - 1] = str(body["body"])
            return web.json_response(self._comment(number))
        return web.Response(status=204)

    @staticmethod
    def _app() -> Obj:
        at = "2026-01-01T00:00:00Z"
        return {
            "id": 1,
            "slug": "agentchain",
            "node_id": "A_1",
            "owner": _user("acme"),
            "name": "agentchain",
            "description": None,
            "external_url": "https://example.com",
            "html_url": "https://github.com/apps/agentchain",
            "created_at": at,
            "updated_at": at,
            "permissions": {"issues": "write"},
            "events": [],
        }

    @staticmethod
    def _comment(number: int) -> Obj:
        url = f"https://api.github.com/repos/{REPO}/issues/comments/{number}"
        at = "2026-01-01T00:00:00Z"
        return {
            "id": number,
            "node_id": f"C_{number}",
            "url": url,
            "html_url": url,
            "issue_url": url,
            "user": _user("agentchain[bot]"),
            "created_at": at,
            "updated_at": at,
        }


@pytest.fixture
async def github() -> AsyncIterator[FakeGitHub]:
    fake = FakeGitHub()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    server = TestServer(app)
    await server.start_server()
    fake.url = str(server.make_url(""))
    try:
        yield fake
    finally:
        await server.close()


# -- the operator's side --------------------------------------------------------------
@pytest.fixture
async def rt(api: FakeApi, redis: Redis, github: FakeGitHub) -> AsyncIterator[Runtime]:
    settings = Settings(
        operator_key=SETTINGS.operator_key,
        github_app_id=1,
        github_private_key=_pem(),
        github_api_url=github.url,
        github_writeback_delay_seconds=0.05,
    )
    runtime = Runtime.from_client(settings, redis)
    triage = agent(AGENT)
    triage["spec"]["github"] = {"permissions": {"issues": "write"}}
    api.put("aiagents", triage)
    api.put("agentjobs", sealed(root_job()))
    yield runtime
    await appruntime.close(runtime)


def root_job() -> Obj:
    event = {
        "source": "github",
        "name": "issues",
        "action": "opened",
        "repository": REPO,
        "number": ISSUE,
        "subject": "issue",
        "installationId": INSTALLATION,
    }
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": ROOT, "namespace": NS, "labels": {models.CHAIN_ID: CHAIN}},
        "spec": {"agentRole": AGENT, "prompt": "go", "event": event},
        "status": {"phase": "Running", "reason": "Running", "chainId": CHAIN, "chainDepth": 0},
    }


def worker(rt: Runtime) -> writeback.Worker:
    side = appruntime.side_of(rt)
    assert side is not None and isinstance(side.worker, writeback.Worker)
    return side.worker


class Counts:
    """The write-back counter's samples, as moved since this was made."""

    def __init__(self, name: str = WRITEBACKS) -> None:
        self.name = name
        self.before = self._now()

    def _now(self) -> dict[tuple[str, ...], float]:
        found: dict[tuple[str, ...], float] = {}
        for metric in REGISTRY.collect():
            for s in metric.samples:
                if s.name == self.name:
                    found[tuple(s.labels.values())] = s.value
        return found

    def moved(self) -> dict[tuple[str, ...], float]:
        now = self._now()
        return {k: v - self.before.get(k, 0.0) for k, v in now.items() if v != self.before.get(k)}


def write_back_condition(api: FakeApi) -> Obj | None:
    stored = api.objects[("aiagents", AGENT)]
    found = [c for c in (stored.get("status") or {}).get("conditions") or []]
    return next((copy.deepcopy(c) for c in found if c["type"] == "GitHubWriteBack"), None)


def failure_events(api: FakeApi) -> list[Obj]:
    return [e for e in api.of("events") if e["reason"] == writeback.REASON_FAILED]


async def until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def untouched_chain(api: FakeApi) -> None:
    """No write to any AgentJob: its phase, status and labels are what they were."""
    assert [w for w in api.writes if w.kind.startswith("agentjobs")] == []
    stored = api.objects[("agentjobs", ROOT)]
    assert stored["status"] == root_job()["status"]


# -- permanent failures -----------------------------------------------------------------
PERMANENT = [
    pytest.param(
        "mint",
        Answer(401, "A JSON web token could not be decoded"),
        BAD_APP_KEY,
        "GitHub refused the App's JWT (app id or key): "
        f"POST /app/installations/{INSTALLATION}/access_tokens: 401",
        id="BadAppKey",
    ),
    pytest.param(
        "mint",
        Answer(404, "Not Found"),
        NOT_INSTALLED,
        "The App is not installed there: "
        f"POST /app/installations/{INSTALLATION}/access_tokens: 404",
        id="NotInstalled",
    ),
    pytest.param(
        "create_comment",
        Answer(403, "Resource not accessible by integration"),
        PERMISSION_MISSING,
        f"Permission missing: POST /repos/{REPO}/issues/{ISSUE}/comments: 403 "
        "Resource not accessible by integration",
        id="PermissionMissing",
    ),
]


@pytest.mark.parametrize(("call", "answer", "reason", "said"), PERMANENT)
async def test_a_permanent_failure_is_shown_on_the_job_and_the_agent(
    rt: Runtime,
    api: FakeApi,
    github: FakeGitHub,
    call: str,
    answer: Answer,
    reason: str,
    said: str,
) -> None:
    github.fail[call] = [answer]
    counts = Counts()
    writeback.observe(rt, "MODIFIED", root_job())
    await until(lambda: write_back_condition(api) is not None, "the agent's condition")

    assert counts.moved() == {("failed", reason): 1.0}
    message = f"Chain {CHAIN} could not be written back to GitHub ({reason}): {said}"
    events = failure_events(api)
    about = sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events)
    assert about == [("AgentJob", ROOT), ("AiAgent", AGENT)]
    for event in events:
        assert event["type"] == "Warning"
        assert event["message"].startswith(message), event["message"]
        assert TOKEN not in event["message"] and "PRIVATE KEY" not in event["message"]
    condition = write_back_condition(api)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", reason)
    assert condition["message"] == events[0]["message"]
    assert github.comments == []
    untouched_chain(api)

    # Given up until the chain changes: nothing due, no attempt kept, no request more.
    w = worker(rt)
    assert KEY not in w.due and KEY not in w.attempts
    calls = len(github.calls)
    await asyncio.sleep(0.3)
    assert len(github.calls) == calls
    assert counts.moved() == {("failed", reason): 1.0}


async def test_the_same_cause_again_is_one_event_each(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["mint"] = [Answer(404, "Not Found"), Answer(404, "Not Found")]
    counts = Counts()
    writeback.observe(rt, "MODIFIED", root_job())
    await until(lambda: len(failure_events(api)) == 2, "the first report")
    writeback.observe(rt, "MODIFIED", root_job())  # The chain changed: tried again.
    await until(lambda: counts.moved().get(("failed", NOT_INSTALLED)) == 2, "the second report")
    await asyncio.sleep(0.1)
    assert len(failure_events(api)) == 2
    condition = write_back_condition(api)
    assert condition is not None and condition["reason"] == NOT_INSTALLED
    untouched_chain(api)


# -- transient failures ------------------------------------------------------------------
async def test_a_500_is_retried_after_a_back_off_not_reported(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["create_comment"] = [Answer(500, "Server Error")]
    counts = Counts()
    writeback.observe(rt, "MODIFIED", root_job())
    await until(lambda: counts.moved() != {}, "the failure's count")
    failed_at = time.monotonic()

    assert counts.moved() == {("retried", UNAVAILABLE): 1.0}
    w = worker(rt)
    assert w.attempts[KEY] == 1
    assert failed_at + 0.3 < w.due[KEY] <= failed_at + 2.0  # The first back-off: 1-2 s.
    assert failure_events(api) == [] and write_back_condition(api) is None
    untouched_chain(api)

    await until(lambda: github.comments != [], "the retry", timeout=5)
    await until(lambda: write_back_condition(api) is not None, "the agent's condition")
    assert counts.moved() == {("retried", UNAVAILABLE): 1.0, ("written", ""): 1.0}
    condition = write_back_condition(api)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "WrittenBack")
    assert failure_events(api) == [] and KEY not in w.attempts
    untouched_chain(api)


async def test_a_429_pauses_the_worker_until_its_retry_after(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    limited = Answer(429, "API rate limit exceeded", {"Retry-After": "1"})
    github.fail["create_comment"] = [limited]
    counts = Counts()
    writeback.observe(rt, "MODIFIED", root_job())
    await until(lambda: counts.moved() != {}, "the rate limit's count")
    limited_at = dict(github.calls)["create_comment"]

    assert counts.moved() == {("rate_limited", RATE_LIMITED): 1.0}
    w = worker(rt)
    assert w.paused_until == pytest.approx(limited_at + 1.0, abs=0.2)
    assert w.due[KEY] == pytest.approx(limited_at + 1.0, abs=0.2)
    assert KEY not in w.attempts  # A rate limit is no failed attempt.
    assert failure_events(api) == [] and write_back_condition(api) is None

    await until(lambda: github.comments != [], "the write after the pause", timeout=5)
    retried_at = [at for name, at in github.calls if name == "list_comments"][-1]
    assert retried_at - limited_at >= 0.95  # Nothing asked of GitHub before Retry-After.
    await until(lambda: write_back_condition(api) is not None, "the agent's condition")
    condition = write_back_condition(api)
    assert condition is not None and condition["status"] == "True"
    assert counts.moved() == {("rate_limited", RATE_LIMITED): 1.0, ("written", ""): 1.0}
    assert failure_events(api) == []
    untouched_chain(api)


async def test_a_transient_failure_on_the_last_attempt_is_reported(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["create_comment"] = [Answer(502, "Bad Gateway")]
    counts = Counts()
    writeback.observe(rt, "MODIFIED", root_job())
    worker(rt).attempts[KEY] = writeback.MAX_ATTEMPTS - 1  # Seven failed before this one.
    await until(lambda: write_back_condition(api) is not None, "the agent's condition")
    assert counts.moved() == {("failed", UNAVAILABLE): 1.0}
    condition = write_back_condition(api)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", UNAVAILABLE)
    assert "502 Bad Gateway" in condition["message"]
    assert len(failure_events(api)) == 2
    assert KEY not in worker(rt).due and KEY not in worker(rt).attempts
    untouched_chain(api)


# -- job tokens ---------------------------------------------------------------------------
async def test_a_job_token_mint_is_counted(rt: Runtime, api: FakeApi, github: FakeGitHub) -> None:
    job = copy.deepcopy(api.objects[("agentjobs", ROOT)])
    counts = Counts(JOB_TOKENS)
    assert await tokenminting.secret_data(rt, job) == {"github-token": TOKEN}
    assert counts.moved() == {("minted",): 1.0}
    (minted,) = github.minted
    assert minted == {"repositories": ["widgets"], "permissions": {"issues": "write"}}

    assert await tokenminting.secret_data(rt, job) == {"github-token": TOKEN}  # A replay.
    assert counts.moved() == {("minted",): 1.0, ("reused",): 1.0}
    assert len(github.minted) == 1

    ended = {**job, "status": {**job["status"], "phase": "Succeeded"}}
    writeback.observe(rt, "MODIFIED", ended)
    await until(lambda: "revoke" in github.names(), "the revocation")
    await until(lambda: ("revoked",) in counts.moved(), "the revocation's count")
    assert counts.moved() == {("minted",): 1.0, ("reused",): 1.0, ("revoked",): 1.0}


async def test_a_refused_job_token_is_counted_with_an_event(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["mint"] = [Answer(404, "Not Found")]
    job = copy.deepcopy(api.objects[("agentjobs", ROOT)])
    counts = Counts(JOB_TOKENS)
    assert await tokenminting.secret_data(rt, job) == {}
    assert counts.moved() == {("failed",): 1.0, ("refused",): 1.0}
    (event,) = [e for e in api.of("events") if e["reason"] == tokenminting.REASON_UNAVAILABLE]
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == ROOT
    assert event["message"].startswith(
        f"The job runs without GITHUB_TOKEN: {NOT_INSTALLED}: The App is not installed there"
    )


SECONDARY = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)


@pytest.mark.parametrize(
    "answer",
    [Answer(403, SECONDARY), Answer(429, "Too many requests")],
    ids=["secondary-403", "429"],
)
async def test_a_rate_limit_without_its_headers_waits_a_minute_not_reported(
    rt: Runtime, api: FakeApi, github: FakeGitHub, answer: Answer
) -> None:
    """GitHub: "otherwise, wait for at least one minute before retrying" (no Retry-After,
    no X-RateLimit-Remaining: 0). Neither a missing permission nor a 5xx to hurry back to."""
    github.fail["create_comment"] = [answer]
    counts = Counts()
    writeback.observe(rt, "MODIFIED", root_job())
    await until(lambda: counts.moved() != {}, "the rate limit's count")
    limited_at = dict(github.calls)["create_comment"]
    assert counts.moved() == {("rate_limited", RATE_LIMITED): 1.0}
    w = worker(rt)
    assert w.paused_until == pytest.approx(limited_at + 60, abs=0.5)
    assert w.due[KEY] == pytest.approx(limited_at + 60, abs=0.5)
    await asyncio.sleep(0.2)
    assert failure_events(api) == [] and write_back_condition(api) is None
    untouched_chain(api)
