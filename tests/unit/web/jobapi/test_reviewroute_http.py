"""``PUT /api/jobs/{ns}/{name}/review``: a reviewer job sends its review through the job
API (``agentchain.web.jobapi.reviewroute``), over HTTP, with job tokens on real Redis and
the Kubernetes API served by the in-process fake (``FakeApi``).

Aspects covered:
* the job's own token keeps the review on its AgentJob, sealed for that job: the
  write-back reads it back (``reviewing.sent_review``) and ``due`` takes it over the
  output's block; multi-line comments pass;
* only the job's own token (403 for another job's or an admin's, 401 without); a job
  that has ended is a 409; what is not a review a 422 saying why, one over the size
  limit a 413, each keeping nothing;
* no authority from editing AgentJobs: a review written straight into the annotation,
  or one sealed for another job (copied over, or for an earlier incarnation of the same
  name), is ignored;
* the route is in the OpenAPI document.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from agentchain import models
from agentchain.core.runtime import Runtime
from agentchain.github import reviewing
from agentchain.github.githubrecords import ChainRecord
from agentchain.github.rules import progress, reviews
from agentchain.models.agentjob import AgentJob
from agentchain.settings import Settings
from agentchain.web import openapi
from agentchain.web.app import build_app
from tests.unit.fakeapi import OPERATOR_KEY, FakeApi, Obj, sealed
from tests.unit.hop.test_hop_write_order import NS, api, kubeconfig
from tests.unit.web.conftest import Client
from tests.unit.web.jobapi.test_reads_http import ADMIN, error

__all__ = ["api", "kubeconfig"]  # Fixtures.
pytestmark = pytest.mark.redis
CHAIN = "chain-r"
PATH = f"/api/jobs/{NS}/rev-1/review"
REVIEW = {
    "verdict": "request_changes",
    "body": "Two details.",
    "comments": [
        {"path": "a.py", "line": 3, "body": "This can be None."},
        {"path": "a.py", "start_line": 5, "line": 7, "side": "RIGHT", "body": "These three."},
    ],
}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The web tests' settings, with the key the jobs here are sealed with."""
    return settings.model_copy(update={"operator_key": (OPERATOR_KEY,)})


@pytest.fixture
async def client(runtime: Runtime, api: FakeApi) -> AsyncIterator[Client]:
    async with TestClient(TestServer(build_app(runtime, dispatch=False))) as made:
        yield made


def reviewer(api: FakeApi, name: str = "rev-1", phase: str = "Running") -> Obj:
    made = {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": name, "namespace": NS, "labels": {models.CHAIN_ID: CHAIN}},
        "spec": {"agentRole": "ai-reviewer", "prompt": "review"},
        "status": {"phase": phase, "chainId": CHAIN},
    }
    return api.put("agentjobs", sealed(made))


async def token_of(runtime: Runtime, obj: Obj) -> dict[str, str]:
    meta = obj["metadata"]
    token = await runtime.tokens.issue(NS, meta["name"], meta["uid"], CHAIN, 600)
    return {"Authorization": f"Bearer {token}"}


def _due(runtime: Runtime, obj: Obj, result: str = "") -> list[object]:
    """What the write-back would post for ``obj`` once it succeeded with ``result``."""
    status = {"phase": "Succeeded", "result": result}
    job = AgentJob.model_validate({"spec": obj["spec"], "status": status})
    record = progress.JobRecord(obj["metadata"]["name"], "2026-11-28T00:00:00Z", job)
    kept = reviewing.sent_review(runtime.operator_keys, obj)
    sent = {record.name: kept} if kept is not None else {}
    return [r for _, r in reviewing.due([record], frozenset({"ai-reviewer"}), ChainRecord(), sent)]


async def test_the_jobs_own_review_is_kept_sealed_and_counts_over_its_block(
    client: Client, runtime: Runtime, api: FakeApi
) -> None:
    obj = reviewer(api)
    answer = await client.put(PATH, json=REVIEW, headers=await token_of(runtime, obj))
    assert answer.status == 200, await answer.text()
    assert await answer.json() == {
        "id": "rev-1", "namespace": NS, "verdict": "request_changes", "comments": 2,
    }  # fmt: skip
    stored = api.objects[("agentjobs", "rev-1")]
    block = "```agentchain-review\n" + json.dumps({"verdict": "approve"}) + "\n```"
    (review,) = _due(runtime, stored, result=block)
    assert isinstance(review, reviews.Review) and review.verdict == "request_changes"
    assert review.comments[1] == reviews.InlineComment("a.py", 7, "RIGHT", "These three.", 5)
    assert [type(r) for r in _due(runtime, obj, result=block)] == [reviews.Review]  # Unsent.


async def test_only_the_job_itself_sends_its_review(
    client: Client, runtime: Runtime, api: FakeApi
) -> None:
    reviewer(api)
    other = reviewer(api, "rev-2")
    await error(await client.put(PATH, json=REVIEW, headers=await token_of(runtime, other)), 403)
    await error(await client.put(PATH, json=REVIEW, headers=ADMIN), 403)
    await error(await client.put(PATH, json=REVIEW), 401)
    assert models.REVIEW not in api.objects[("agentjobs", "rev-1")]["metadata"]["annotations"]
    ended = reviewer(api, "rev-3", phase="Succeeded")
    late = f"/api/jobs/{NS}/rev-3/review"
    await error(await client.put(late, json=REVIEW, headers=await token_of(runtime, ended)), 409)


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"verdict": "lgtm"}, 422),
        (
            {
                "verdict": "comment",
                "comments": [{"path": "a", "line": 2, "start_line": 2, "body": "x"}],
            },
            422,
        ),
        ([REVIEW], 422),
        ({"verdict": "comment", "body": "x" * reviews.MAX_BLOCK_CHARS}, 413),
    ],
)
async def test_what_is_not_a_review_is_refused_and_kept_nowhere(
    client: Client, runtime: Runtime, api: FakeApi, body: object, status: int
) -> None:
    obj = reviewer(api)
    found = await error(
        await client.put(PATH, json=body, headers=await token_of(runtime, obj)), status
    )
    assert status == 413 or "Not a review" in found["detail"]
    assert models.REVIEW not in api.objects[("agentjobs", "rev-1")]["metadata"]["annotations"]


async def test_a_review_not_sealed_for_the_job_is_ignored(
    client: Client, runtime: Runtime, api: FakeApi
) -> None:
    obj = reviewer(api)
    sent = await client.put(PATH, json=REVIEW, headers=await token_of(runtime, obj))
    assert sent.status == 200, await sent.text()
    kept = api.objects[("agentjobs", "rev-1")]["metadata"]["annotations"][models.REVIEW]
    forged = reviewer(api, "rev-4")
    forged["metadata"]["annotations"][models.REVIEW] = json.dumps(REVIEW)  # Hand-written.
    copied = reviewer(api, "rev-5")
    copied["metadata"]["annotations"][models.REVIEW] = kept  # Another job's seal.
    again = json.loads(json.dumps(api.objects[("agentjobs", "rev-1")]))
    again["metadata"]["uid"] = "a-later-incarnation"
    for obj in (forged, copied, again):
        assert reviewing.sent_review(runtime.operator_keys, obj) is None
        assert _due(runtime, obj) == []  # No block either: nothing to post.


def test_the_route_is_documented() -> None:
    assert "put" in openapi.document()["paths"]["/api/jobs/{namespace}/{name}/review"]
