"""``POST /api/github/token`` is bound to the caller's AgentJob incarnation, over HTTP on
a real Redis (``web/jobapi/tokenroute.py``, ``github/tokenminting.py``).

The App is a small stand-in that mints numbered tokens (GitHub itself is not reached);
the job tokens, the scope records and the web app are the operator's own.

Aspects covered:
* a job's own token refreshes the scope recorded at its launch;
* an AgentJob deleted and created again under the same name (a new uid, so a new job
  token) refreshes nothing of the old incarnation's scope: 404;
* once the job's tokens are revoked at its end, its scope is dropped: nothing refreshes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import cast

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.github import tokenminting
from agentchain.github.appruntime import GitHubSide
from agentchain.github.apps import GitHubApp, Minted
from agentchain.github.githubrecords import JobTokens, WriteBackRecords
from agentchain.github.rules.githubscope import Scope
from agentchain.store import sealing
from agentchain.web.app import build_app
from tests.unit.web.conftest import Client, serving

pytestmark = pytest.mark.redis
NS = "team"
NAME = "triage-1"
AGENT = "triage"
EVENT = {
    "source": "github",
    "name": "issues",
    "action": "opened",
    "repository": "acme/widgets",
    "number": 7,
    "subject": "issue",
    "installationId": 42,
}


class StandInApp:
    """The two calls of :class:`GitHubApp` a job token needs: mint and revoke."""

    def __init__(self) -> None:
        self.minted: list[Scope] = []
        self.revoked: list[str] = []

    async def mint(self, scope: Scope) -> Minted:
        self.minted.append(scope)
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        return Minted(f"ghs_{len(self.minted)}", expires)

    async def revoke(self, token: str) -> None:
        self.revoked.append(token)


def _job(uid: str) -> dict[str, object]:
    meta = {"name": NAME, "namespace": NS, "uid": uid}
    return {"metadata": meta, "spec": {"agentRole": AGENT, "prompt": "go", "event": EVENT}}


@pytest.fixture
def app() -> StandInApp:
    return StandInApp()


@pytest.fixture
async def rt(runtime: Runtime, redis: Redis, app: StandInApp) -> Runtime:
    tokens = JobTokens(redis, runtime.operator_keys)
    runtime.github = GitHubSide(runtime, cast(GitHubApp, app), WriteBackRecords(redis), tokens)
    spec = {
        "triggerName": AGENT,
        "command": ["true"],
        "eventTriggers": [{"source": "github", "event": "issues.opened"}],
        "github": {"permissions": {"issues": "write"}},
    }
    meta = {"name": AGENT, "namespace": NS}
    runtime.agents.observe({"kind": "AiAgent", "metadata": meta, "spec": spec})
    return runtime


@pytest.fixture
async def api(rt: Runtime) -> AsyncIterator[Client]:
    async with serving(build_app(rt)) as client:
        yield client


async def _launched(rt: Runtime, uid: str) -> str:
    """Launch incarnation ``uid``, made by the webhook (its event under the operator's
    seals): its GitHub scope recorded, its job token issued."""
    job = sealing.seal_job(rt.operator_keys, _job(uid))
    assert await tokenminting.secret_data(rt, job) != {}
    return await rt.tokens.issue(NS, NAME, uid, "chain", 3600)


async def _refresh(api: Client, job_token: str) -> int:
    answer = await api.post("/api/github/token", headers={"Authorization": f"Bearer {job_token}"})
    return answer.status


async def test_a_job_refreshes_its_own_scope(rt: Runtime, api: Client, app: StandInApp) -> None:
    token = await _launched(rt, "uid-1")
    assert await _refresh(api, token) == 200
    assert [scope.repository for scope in app.minted] == ["acme/widgets", "acme/widgets"]


async def test_a_job_created_again_under_the_same_name_refreshes_nothing_of_the_old_one(
    rt: Runtime, api: Client, app: StandInApp
) -> None:
    await _launched(rt, "uid-old")
    # The same name again, whose agent now declares nothing: no scope of its own.
    newcomer = await rt.tokens.issue(NS, NAME, "uid-new", "chain", 3600)
    assert await _refresh(api, newcomer) == 404
    assert len(app.minted) == 1  # Only the old incarnation's launch.


async def test_the_scope_is_dropped_when_the_jobs_tokens_are_revoked(
    rt: Runtime, api: Client, app: StandInApp
) -> None:
    token = await _launched(rt, "uid-1")
    side = rt.github
    assert isinstance(side, GitHubSide)
    await tokenminting.revoke(side, NS, NAME, "uid-1")
    assert app.revoked == ["ghs_1"]
    assert await side.tokens.scope(NS, NAME, "uid-1") is None
    assert await _refresh(api, token) == 404
