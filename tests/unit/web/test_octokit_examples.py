"""Every example payload GitHub documents is answered 2xx, as JSON and form-encoded (issue 15).

``@octokit/webhooks-examples`` (npm, pinned by version and digest) holds the example
payload of every webhook event and action GitHub documents, under the event name
GitHub sends in ``X-GitHub-Event``.  ``e2e/setup.sh`` fetches the package into the
cache outside the clone; without it the test skips on a developer's machine and
fails in CI (``CI=true``, set by ``.ci/run``).

Each payload is signed as GitHub signs it and posted to the real app over a real
socket, with the queue on real Redis, the headers GitHub sends, and one AiAgent
(in the in-memory listing) subscribed to every event with the sender policy wide
open, so matching, the event's parsing and the queued AgentJob body run for every
payload rather than stopping at "nothing matched".

Aspects covered:
* every event name GitHub sends passes the header check (``projects_v2_item`` has
  digits: it was refused as a missing header);
* every example, JSON or ``payload=`` form, is answered 200 or 202 (never 4xx/5xx),
  and a good share of them queue a job.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from agentchain.github.rules.matching import AgentCandidate
from agentchain.models.aiagent import AiAgentSpec
from agentchain.web import listing
from agentchain.web.hooks import jobqueue
from agentchain.web.hooks.signatures import sign
from tests.unit.web.conftest import WEBHOOK_SECRET, Client
from tests.unit.web.hooks.test_webhook_http import NAMESPACE, PATH, FakeKube, kube

__all__ = ["kube"]  # The fixture is used by name.

VERSION = "7.6.1"
SHA256 = "89e6cb1c6345d32e3dd775617fa54effbdc26c859e514898d7728e95e9738280"
CACHE = Path(os.environ.get("AGENTCHAIN_CACHE", Path.home() / ".cache/agentchain"))
TARBALL = CACHE / "npm" / VERSION / f"octokit-webhooks-examples-{VERSION}.tgz"
INDEX = "package/api.github.com/index.json"
JSON = "application/json"
ASSOCIATIONS = [
    "OWNER",
    "MEMBER",
    "COLLABORATOR",
    "CONTRIBUTOR",
    "FIRST_TIME_CONTRIBUTOR",
    "FIRST_TIMER",
    "MANNEQUIN",
    "NONE",
]


def examples() -> list[dict[str, Any]]:
    """The package's events (name, examples), from the pinned tarball; skip or fail without."""
    if not TARBALL.is_file():
        reason = f"{TARBALL} is missing: run e2e/setup.sh to fetch @octokit/webhooks-examples"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    data = TARBALL.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA256, f"{TARBALL} is not the pinned package"
    with tarfile.open(TARBALL) as tar:
        member = tar.extractfile(INDEX)
        assert member is not None
        events: list[dict[str, Any]] = json.load(member)
    return events


@pytest.fixture
def every_event(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeKube, list[dict[str, Any]]]:
    """The listing holds one agent that every event and every sender may start."""
    events = examples()
    spec = AiAgentSpec.model_validate(
        {
            "triggerName": "ai-all",
            "eventTriggers": [{"source": "github", "events": [e["name"] for e in events]}],
            "senderPolicy": {"allowedAssociations": ASSOCIATIONS, "allowBots": True},
        }
    )
    fake = FakeKube()

    async def agents(namespaces: object) -> dict[str, list[AgentCandidate]]:
        return {NAMESPACE: [AgentCandidate("all-events", spec)]}

    monkeypatch.setattr(listing, "agents_by_namespace", agents)
    monkeypatch.setattr(jobqueue, "_create", fake.create)
    return fake, events


def github_headers(event: str, body: bytes, content_type: str) -> dict[str, str]:
    """What GitHub sends with a delivery (sha1 signature included, which is ignored)."""
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "292430182",
        "X-GitHub-Hook-Installation-Target-ID": "79929171",
        "X-GitHub-Hook-Installation-Target-Type": "repository",
        # GitHub's legacy SHA-1 signature: sent, never trusted.
        "X-Hub-Signature": "sha1=" + hashlib.sha1(body).hexdigest(),
        "X-Hub-Signature-256": sign(body, WEBHOOK_SECRET),
        "User-Agent": "GitHub-Hookshot/044aadd",
        "Content-Type": content_type,
    }


@pytest.mark.parametrize("encoding", ["json", "form"])
async def test_every_github_example_is_answered_2xx(
    client: Client,
    redis: Redis,
    every_event: tuple[FakeKube, list[dict[str, Any]]],
    encoding: str,
) -> None:
    _, events = every_event
    answers: dict[int, int] = {}
    refused: list[str] = []
    for event in events:
        for number, example in enumerate(event["examples"]):
            text = json.dumps(example)
            if encoding == "json":
                body, content_type = text.encode(), JSON
            else:
                form = urllib.parse.urlencode({"payload": text})
                body, content_type = form.encode(), "application/x-www-form-urlencoded"
            headers = github_headers(event["name"], body, content_type)
            response = await client.post(PATH, data=body, headers=headers)
            answers[response.status] = answers.get(response.status, 0) + 1
            if not 200 <= response.status < 300:
                said = await response.text()
                refused.append(f"{event['name']}[{number}] → {response.status} {said}")
    assert not refused, "\n".join(refused[:20])
    assert sum(answers.values()) >= 300, answers  # The package documents 329 examples.
    assert answers.get(202, 0) >= sum(answers.values()) // 2, answers  # Most queue a job.


@pytest.mark.parametrize(
    "event", ["projects_v2_item", "projects_v2_status_update", "sub_issues", "x2"]
)
async def test_event_names_with_digits_pass_the_header_check(
    client: Client, kube: FakeKube, event: str
) -> None:
    """Without the package too: names GitHub sends may hold digits after the first letter."""
    body = json.dumps({"action": "edited", "sender": {"login": "a", "type": "User"}}).encode()
    response = await client.post(PATH, data=body, headers=github_headers(event, body, JSON))
    assert response.status == 200, await response.text()
    assert (await response.json())["jobs"] == []


@pytest.mark.parametrize("event", ["2fa", "Issues", "issues.opened", "a" * 65, "_x"])
async def test_other_event_names_are_still_refused(client: Client, event: str) -> None:
    body = b"{}"
    response = await client.post(PATH, data=body, headers=github_headers(event, body, JSON))
    assert response.status == 400
