"""Pull requests from forks are not published by default (``workspaces.rules.jobmounts``).

Aspects covered:
- the decision, exhaustively over (publish, publishFromForks) by (issue, pull request
  from this repository, from a fork, with no head named): only a pull request whose
  head is the base repository (any case) publishes by default; publishFromForks
  restores publishing; an issue's chain publishes as before; the refusal names the fork;
- the head repository comes from the signed delivery: GitHub's own pull_request
  example (head in the base repository), the same with a fork's head, and a comment on
  a pull request (no head named).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from e2e.githubloop import example

from agentchain.github.rules.matching import event_from_payload
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import Workspace
from agentchain.workspaces.rules import jobmounts

BASE = "Codertocat/Hello-World"
PULL: dict[str, Any] = {
    "source": "github",
    "repository": BASE,
    "number": 2,
    "subject": "pull_request",
}
EVENTS: dict[str, JobEvent] = {
    "issue": JobEvent(source="github", repository=BASE, number=1, subject="issue"),
    "own": JobEvent(**PULL, head_repository="codertocat/hello-world"),
    "fork": JobEvent(**PULL, head_repository="mallory/Hello-World"),
    "unnamed": JobEvent(**PULL),
}


@pytest.mark.parametrize(
    ("publish", "forks", "kind"),
    list(itertools.product([False, True], [False, True], EVENTS)),
)
def test_a_forks_pull_request_is_not_published_by_default(
    publish: bool, forks: bool, kind: str
) -> None:
    declared = Workspace(publish=publish, publish_from_forks=forks)
    event = EVENTS[kind]
    refusal = jobmounts.fork_refusal(declared, event)
    withheld = publish and not forks and kind in ("fork", "unnamed")
    assert (refusal is not None) == withheld
    if kind == "fork" and refusal is not None:
        assert "a fork (mallory/Hello-World)" in refusal and "publishFromForks" in refusal
    resolved = jobmounts.resolve(declared, event, "c0ffee", "https://gh.example")
    assert isinstance(resolved, jobmounts.ChainWorkspace)
    assert resolved.publish == (publish and not withheld)


def _event(payload: dict[str, Any], name: str) -> JobEvent:
    return event_from_payload(name, payload, delivery_id="d", hook_id="h")


def test_the_head_repository_comes_from_the_delivery() -> None:
    own = example("pull_request", "opened")
    event = _event(own, "pull_request")
    assert event.subject == "pull_request"
    assert event.head_repository == own["pull_request"]["head"]["repo"]["full_name"]
    assert jobmounts.fork_refusal(Workspace(publish=True), event) is None

    fork = copy.deepcopy(own)
    fork["pull_request"]["head"]["repo"]["full_name"] = "mallory/Hello-World"
    forked = _event(fork, "pull_request")
    assert forked.head_repository == "mallory/Hello-World"
    assert jobmounts.fork_refusal(Workspace(publish=True), forked) is not None

    gone = copy.deepcopy(own)
    gone["pull_request"]["head"]["repo"] = None  # A deleted fork.
    assert jobmounts.fork_refusal(Workspace(publish=True), _event(gone, "pull_request")) is not None

    comment = example("issue_comment", "created")
    comment["issue"]["pull_request"] = {"url": "https://api.github.com/repos/x/y/pulls/1"}
    on_pull = _event(comment, "issue_comment")
    assert on_pull.subject == "pull_request" and on_pull.head_repository is None
    assert jobmounts.fork_refusal(Workspace(publish=True), on_pull) is not None
