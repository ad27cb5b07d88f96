"""A chain's pull request after its push, when GitHub fails (``workspaces/publishing``, issues
17/18), against the in-process API server and a real Redis.

GitHub is a small fake of the four calls publishing makes (find by head, default branch,
create, update) over a dict of pull requests; its failures are githubkit's own
exceptions for GitHub's answers, classified by ``github/githuberrors.py`` as in production
(the OpenAPI stand-in under e2e/github needs GitHub's description, which e2e/setup.sh
fetches: not for a unit test).  Aspects covered:
- a 500 on the create leaves no pull request and the chain's pull request pending (the
  push is recorded as published all the same); a sweep before it is due sends nothing,
  the one after it opens exactly one, names it in the root's condition, with a Normal
  Event, and settles the entry;
- a create whose answer was lost (GitHub made it) is found by its head on the retry: one
  pull request;
- a rate limit's ``Retry-After`` decides when it is due; the back-off doubles otherwise;
  a rate limit ends the sweep's retries (the others wait for the next sweep);
- a permanent failure (403 at once, or a 404 on a retry) ends it: the condition says
  why (``WorkspacePullRequestFailed``) and a Warning Event on the root AgentJob;
- so does a day of transient failures;
- a root AgentJob that is gone drops the entry without a GitHub request.
"""

from __future__ import annotations

import copy
import datetime as dt
import time
from typing import Any, cast

import httpx
import pytest
from githubkit.exception import PrimaryRateLimitExceeded, RequestFailed
from githubkit.response import Response
from redis.asyncio import Redis

from agentchain import models
from agentchain.core.runtime import Runtime
from agentchain.github.appruntime import GitHubSide
from agentchain.github.apps import GitHubApp
from agentchain.github.githuberrors import UNAVAILABLE, GitHubError, classify
from agentchain.github.githubrecords import JobTokens, WriteBackRecords
from agentchain.github.rules.githubscope import Scope
from agentchain.models.aiagent import Workspace
from agentchain.models.conditions import Reason
from agentchain.workspaces import attaching, publishing
from agentchain.workspaces.rules import jobmounts
from tests.unit.fakeapi import FakeApi, Obj, sealed
from tests.unit.hop.test_hop_write_order import NS, SETTINGS, agent, api, kubeconfig

__all__ = ["api", "kubeconfig"]  # Fixtures.
pytestmark = pytest.mark.redis
REPO = "acme/widgets"
CHAIN = "c0ffee"
ROOT = "fix-1"
BRANCH = f"{jobmounts.BRANCH_PREFIX}{CHAIN}"
RESYNC = SETTINGS.resync_seconds
PULLS = f"https://api.github.com/repos/{REPO}/pulls"


def answer(status: int, method: str = "POST", url: str = PULLS) -> GitHubError:
    """What the App client raises when GitHub answers ``status``."""
    message = {"message": "Server Error" if status >= 500 else "Resource not accessible"}
    response = httpx.Response(status, json=message, request=httpx.Request(method, url))
    return classify(RequestFailed(Response(response, Any)))


def rate_limited(seconds: int) -> GitHubError:
    headers = {"Retry-After": str(seconds), "X-RateLimit-Remaining": "0"}
    request = httpx.Request("POST", PULLS)
    response = httpx.Response(429, json={"message": "limit"}, headers=headers, request=request)
    wait = dt.timedelta(seconds=seconds)
    return classify(PrimaryRateLimitExceeded(Response(response, Any), wait))


class FakeGitHub:
    """The pull-request calls of :class:`GitHubApp` over a dict; ``fail[call]``: the
    errors its next calls raise; ``lose_create``: the next create is made, its answer
    lost (a timeout)."""

    def __init__(self) -> None:
        self.pulls: dict[int, dict[str, str]] = {}
        self.fail: dict[str, list[GitHubError]] = {}
        self.calls: list[str] = []
        self.lose_create: GitHubError | None = None

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.fail.get(name):
            raise self.fail[name].pop(0)

    async def find_pull(self, scope: Scope, branch: str) -> int | None:
        self._call("find_pull")
        return next((n for n, p in self.pulls.items() if p["head"] == branch), None)

    async def default_branch(self, scope: Scope) -> str:
        self._call("default_branch")
        return "main"

    async def create_pull(
        self, scope: Scope, *, title: str, branch: str, base: str, body: str
    ) -> int:
        self._call("create_pull")
        number = len(self.pulls) + 1
        self.pulls[number] = {"head": branch, "base": base, "title": title, "body": body}
        if self.lose_create is not None:
            lost, self.lose_create = self.lose_create, None
            raise lost
        return number

    async def update_pull(self, scope: Scope, number: int, body: str) -> None:
        self._call("update_pull")
        self.pulls[number]["body"] = body

    async def revoke(self, token: str) -> None:
        self._call("revoke")

    def forget(self, scope: Scope) -> None:
        self._call("forget")


@pytest.fixture
def github() -> FakeGitHub:
    return FakeGitHub()


@pytest.fixture
async def rt(api: FakeApi, redis: Redis, github: FakeGitHub) -> Runtime:
    runtime = Runtime.from_client(SETTINGS, redis)
    app = cast(GitHubApp, github)
    tokens = JobTokens(redis, runtime.operator_keys)
    runtime.github = GitHubSide(runtime, app, WriteBackRecords(redis), tokens)
    runtime.agents.observe(agent("coder"))  # The sweep visits namespaces with agents.
    api.put("agentjobs", sealed(root_job()))
    declared = Workspace(repository=REPO, publish=True)
    chain = jobmounts.resolve(declared, None, CHAIN, SETTINGS.github_git_url)
    assert isinstance(chain, jobmounts.ChainWorkspace)
    await attaching.store(runtime).claim(NS, CHAIN, chain.to_record())
    return runtime


def root_job() -> Obj:
    event = {
        "source": "github",
        "repository": REPO,
        "number": 5,
        "subject": "issue",
        "installationId": 7,
    }
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": ROOT, "namespace": NS},
        "spec": {"agentRole": "coder", "prompt": "go", "event": event},
        "status": {"phase": "Succeeded", "chainId": CHAIN},
    }


def publish_job() -> Obj:
    labels = {models.AGENTJOB_LABEL: ROOT, jobmounts.WORKSPACE_LABEL: CHAIN}
    return {
        "metadata": {"name": jobmounts.publish_job_name(CHAIN), "namespace": NS, "labels": labels},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }


def condition(api: FakeApi) -> dict[str, Any]:
    root = api.objects[("agentjobs", ROOT)]
    (found,) = [c for c in root["status"]["conditions"] if c["type"] == "WorkspacePublished"]
    return copy.deepcopy(found)


def events(api: FakeApi) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in api.of("events")]


async def pending_at(rt: Runtime) -> float | None:
    return await attaching.store(rt).pull_due_at(NS, CHAIN)


async def published(rt: Runtime, api: FakeApi) -> float:
    """The publish Job's end handled; when its pull request is due (it must be pending)."""
    await publishing.on_job(rt, publish_job())
    assert await attaching.store(rt).noted(NS, CHAIN, "published") == "pushed"
    due = await pending_at(rt)
    assert due is not None, "the pull request is not pending"
    return due


async def test_a_500_leaves_it_pending_and_a_later_sweep_opens_one(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["create_pull"] = [answer(500)]
    due = await published(rt, api)
    assert github.pulls == {}
    cond = condition(api)
    assert (cond["status"], cond["reason"]) == ("True", "WorkspacePublished")
    assert "Pull request pending" in cond["message"] and "500" in cond["message"]
    calls = len(github.calls)

    await publishing.sweep(rt, now=due - 1)  # Not due yet: nothing sent.
    assert len(github.calls) == calls and github.pulls == {}

    await publishing.sweep(rt, now=due + 1)
    assert list(github.pulls) == [1] and github.pulls[1]["head"] == BRANCH
    cond = condition(api)
    assert (cond["status"], cond["reason"]) == ("True", "WorkspacePublished")
    assert cond["message"].endswith("Pull request #1.") and "pending" not in cond["message"]
    assert ("Normal", "WorkspacePublished", cond["message"]) in events(api)
    assert await pending_at(rt) is None
    assert await attaching.store(rt).pull(NS, CHAIN) is None
    assert await attaching.store(rt).noted(NS, CHAIN, "pr") == "1"

    calls = len(github.calls)
    await publishing.sweep(rt, now=due + 10_000)  # Settled: never again.
    await publishing.on_job(rt, publish_job())  # The Job seen again (a restart's list).
    assert len(github.calls) == calls and list(github.pulls) == [1]


async def test_a_create_whose_answer_was_lost_is_found_by_its_head(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.lose_create = GitHubError(UNAVAILABLE, "GitHub unreachable: ReadTimeout")
    due = await published(rt, api)
    assert list(github.pulls) == [1]  # Made, but the operator does not know it.
    await publishing.sweep(rt, now=due + 1)
    assert list(github.pulls) == [1]
    assert github.calls[-2:] == ["find_pull", "update_pull"]
    assert condition(api)["message"].endswith("Pull request #1.")


async def test_retry_after_decides_when_it_is_due_and_back_off_doubles(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["find_pull"] = [rate_limited(120), answer(502, "GET"), answer(503, "GET")]
    before = time.time()
    due = await published(rt, api)
    assert before + 120 <= due <= time.time() + 120

    await publishing.sweep(rt, now=due)  # 502, the second failure: two resync periods.
    assert await pending_at(rt) == pytest.approx(due + 2 * RESYNC)
    await publishing.sweep(rt, now=due + 2 * RESYNC)  # 503, the third: twice that.
    assert await pending_at(rt) == pytest.approx(due + 6 * RESYNC)
    pending = await attaching.store(rt).pull(NS, CHAIN)
    assert pending is not None and pending["attempts"] == 3
    assert github.pulls == {}

    await publishing.sweep(rt, now=due + 6 * RESYNC)
    assert list(github.pulls) == [1] and await pending_at(rt) is None


async def test_a_rate_limit_ends_the_sweeps_retries(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["create_pull"] = [answer(500)]
    due = await published(rt, api)
    store = attaching.store(rt)
    pending = await store.pull(NS, CHAIN)
    assert pending is not None
    await store.pull_pending(NS, "other", pending, due + 0.5)  # Due after this one.
    github.fail["find_pull"] = [rate_limited(60)]
    await publishing.sweep(rt, now=due + 1)
    assert github.calls.count("find_pull") == 2  # The on_job's, and one that was limited.
    assert await store.pulls_due(NS, due + 1) == ["other"]  # Left for the next sweep.
    assert await pending_at(rt) == pytest.approx(due + 61)


async def test_a_permanent_failure_ends_it_at_once_with_a_warning(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["create_pull"] = [answer(403)]
    await publishing.on_job(rt, publish_job())
    assert github.pulls == {} and await pending_at(rt) is None
    cond = condition(api)
    assert (cond["status"], cond["reason"]) == ("True", Reason.WORKSPACE_PULL_REQUEST_FAILED)
    assert "No pull request: PermissionMissing" in cond["message"]
    assert ("Warning", Reason.WORKSPACE_PULL_REQUEST_FAILED, cond["message"]) in events(api)


async def test_a_404_on_a_retry_ends_it_with_a_warning(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["create_pull"] = [answer(500)]
    due = await published(rt, api)
    github.fail["find_pull"] = [answer(404, "GET")]
    await publishing.sweep(rt, now=due + 1)
    assert github.pulls == {} and await pending_at(rt) is None
    assert await attaching.store(rt).pull(NS, CHAIN) is None
    cond = condition(api)
    assert (cond["status"], cond["reason"]) == ("True", Reason.WORKSPACE_PULL_REQUEST_FAILED)
    assert "No pull request: NotFound" in cond["message"]
    assert ("Warning", Reason.WORKSPACE_PULL_REQUEST_FAILED, cond["message"]) in events(api)
    calls = len(github.calls)
    await publishing.sweep(rt, now=due + 10_000)
    assert len(github.calls) == calls


async def test_a_day_of_transient_failures_ends_it(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["create_pull"] = [answer(500), answer(500)]
    due = await published(rt, api)
    await publishing.sweep(rt, now=due + publishing.PULL_GIVE_UP_SECONDS)
    assert await pending_at(rt) is None
    cond = condition(api)
    assert cond["reason"] == Reason.WORKSPACE_PULL_REQUEST_FAILED
    assert "GitHub failed 2 times for a day" in cond["message"]


async def test_a_root_that_is_gone_drops_the_entry(
    rt: Runtime, api: FakeApi, github: FakeGitHub
) -> None:
    github.fail["create_pull"] = [answer(500)]
    due = await published(rt, api)
    del api.objects[("agentjobs", ROOT)]
    calls = len(github.calls)
    await publishing.sweep(rt, now=due + 1)
    assert len(github.calls) == calls and github.pulls == {}
    assert await pending_at(rt) is None and await attaching.store(rt).pull(NS, CHAIN) is None
