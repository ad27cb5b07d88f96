"""``/agentchain`` comment commands at ``POST /webhooks/github``: at most once, sender first.

Over HTTP, with the delivery record and the comment claim on real Redis and the
Kubernetes API served by the in-process fake (``FakeApi``: lists honour label selectors
and pages, and are recorded).  Aspects covered:
* a signed ``approve`` (or ``stop``) delivery replayed with the same delivery id acts
  once: a job that waits (or runs) by the time of the replay is left alone, and the
  replay's answer says ``duplicate``;
* the same comment delivered again under a NEW delivery id, with another body (so the
  body digest does not recognise it either), acts once too: the comment id is claimed;
* a stranger's command makes no API server call at all (no list, no write) and is
  answered as refused because of the sender;
* an allowed commenter's command lists the issue's jobs by their
  ``labrats.work/github-issue`` label, a page at a time, and acts on every page; a job
  of another issue is neither listed nor touched.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from agentchain.core.runtime import Runtime
from agentchain.flow.rules import approvals, stoprules
from agentchain.github.rules.matching import AgentCandidate
from agentchain.hop.rules import chains
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import AiAgentSpec
from agentchain.settings import Settings
from agentchain.web import listing
from agentchain.web.app import build_app
from agentchain.web.hooks import commands
from tests.unit.fakeapi import OPERATOR_KEY, FakeApi, Obj, sealed
from tests.unit.hop.test_hop_write_order import NS, api, kubeconfig
from tests.unit.web.conftest import Client
from tests.unit.web.hooks.test_webhook_http import PATH, headers

__all__ = ["api", "kubeconfig"]  # Fixtures.

REPOSITORY = "octo/repo"
GATED = AiAgentSpec.model_validate(
    {"triggerName": "gated", "approval": {"approvers": ["carol"], "associations": []}}
)
WORKER = AiAgentSpec.model_validate({"triggerName": "worker"})


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The web tests' settings, with the key the jobs here are sealed with."""
    return settings.model_copy(update={"operator_key": (OPERATOR_KEY,)})


@pytest.fixture
async def webhook(
    runtime: Runtime, api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Client]:
    async def agents(namespaces: object) -> dict[str, list[AgentCandidate]]:
        return {NS: [AgentCandidate("gated", GATED), AgentCandidate("worker", WORKER)]}

    monkeypatch.setattr(listing, "agents_by_namespace", agents)
    async with TestClient(TestServer(build_app(runtime, dispatch=False))) as client:
        yield client


def job(api: FakeApi, name: str, agent: str, phase: str, number: int = 7) -> Obj:
    event = JobEvent(source="github", repository=REPOSITORY, number=number)
    made = {  # As the webhook makes one: its event under the operator's seals.
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": name, "namespace": NS, "labels": chains.issue_labels(event)},
        "spec": {"agentRole": agent, "origin": "github", "event": event.to_api()},
        "status": {"phase": phase, "reason": phase},
    }
    return api.put("agentjobs", sealed(made))


def comment(body: str, login: str, association: str, comment_id: int = 42, **extra: Any) -> bytes:
    payload = {
        "action": "created",
        "comment": {
            "id": comment_id,
            "body": body,
            "user": {"login": login},
            "author_association": association,
        },
        "issue": {"number": 7},
        "repository": {"full_name": REPOSITORY},
        "sender": {"login": login, "type": "User"},
        **extra,
    }
    return json.dumps(payload).encode()


async def deliver(client: Client, body: bytes, delivery: str) -> Obj:
    sent = headers(body, "issue_comment", **{"X-GitHub-Delivery": delivery})
    response = await client.post(PATH, data=body, headers=sent)
    assert response.status in (200, 202), await response.text()
    answer: Obj = (await response.json())["command"]
    return answer


def annotations_of(api: FakeApi, name: str) -> dict[str, str]:
    return dict(api.objects[("agentjobs", name)]["metadata"].get("annotations") or {})


async def test_a_replayed_approve_acts_once_whatever_waits_by_then(
    webhook: Client, api: FakeApi
) -> None:
    job(api, "first", "gated", "AwaitingApproval")
    approve = comment("/agentchain approve", "carol", "NONE")
    applied = await deliver(webhook, approve, "d-1")
    assert applied["result"] == "applied", applied
    assert annotations_of(api, "first")[approvals.APPROVAL] == "approved"

    job(api, "second", "gated", "AwaitingApproval")  # Waits by the time of the replays.
    replay = await deliver(webhook, approve, "d-1")
    assert replay["result"] == commands.DUPLICATE and replay["jobs"] == [], replay
    # The same comment under a new delivery id and another body (GitHub added a field).
    again = comment("/agentchain approve", "carol", "NONE", installation={"id": 9})
    redelivered = await deliver(webhook, again, "d-2")
    assert redelivered["result"] == commands.DUPLICATE, redelivered
    assert approvals.APPROVAL not in annotations_of(api, "second")
    assert [w.name for w in api.writes] == ["first"]


async def test_a_replayed_stop_acts_once_whatever_runs_by_then(
    webhook: Client, api: FakeApi
) -> None:
    job(api, "first", "worker", "Running")
    stop = comment("/agentchain stop", "alice", "OWNER", comment_id=43)
    assert (await deliver(webhook, stop, "s-1"))["result"] == "applied"
    assert annotations_of(api, "first")[stoprules.STOP] == "true"

    job(api, "second", "worker", "Running")
    assert (await deliver(webhook, stop, "s-1"))["result"] == commands.DUPLICATE
    again = comment("/agentchain stop", "alice", "OWNER", comment_id=43, installation={"id": 9})
    assert (await deliver(webhook, again, "s-2"))["result"] == commands.DUPLICATE
    assert stoprules.STOP not in annotations_of(api, "second")
    # Another comment is another command: it acts.
    other = comment("/agentchain stop", "alice", "OWNER", comment_id=44)
    assert (await deliver(webhook, other, "s-3"))["result"] == "applied"
    assert annotations_of(api, "second")[stoprules.STOP] == "true"


@pytest.mark.parametrize(
    "body", ["/agentchain approve", "/agentchain stop", "/agentchain reject", "/agentchain retry"]
)
async def test_a_strangers_command_makes_no_api_call(
    webhook: Client, api: FakeApi, body: str
) -> None:
    job(api, "waits", "gated", "AwaitingApproval")
    job(api, "runs", "worker", "Running")
    answer = await deliver(webhook, comment(body, "mallory", "NONE"), "x-1")
    assert answer["result"] == "refused", answer
    assert [j["sender"] for j in answer["jobs"]] == [True], answer
    assert api.reads == [] and api.writes == []


async def test_the_issues_jobs_are_listed_by_label_page_by_page(
    webhook: Client, api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commands, "PAGE_SIZE", 2)
    for n in range(5):
        job(api, f"run-{n}", "worker", "Running")
    job(api, "elsewhere", "worker", "Running", number=8)
    answer = await deliver(webhook, comment("/agentchain stop", "alice", "OWNER"), "p-1")
    assert sorted(j["job"] for j in answer["jobs"]) == [f"run-{n}" for n in range(5)], answer
    assert stoprules.STOP not in annotations_of(api, "elsewhere")
    label = chains.issue_labels(JobEvent(source="github", repository=REPOSITORY, number=7))
    [(key, value)] = label.items()
    assert [q.get("labelSelector") for _, q in api.lists] == [f"{key}={value}"] * 3
    assert [q.get("limit") for _, q in api.lists] == ["2"] * 3
    assert [q.get("continue") for _, q in api.lists] == [None, "2", "4"]
