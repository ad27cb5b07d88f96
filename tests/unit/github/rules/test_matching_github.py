"""Where a delivery's chain is written back (``matching.event_from_payload``, issue 17).

Aspects covered:
* the App installation id is kept from ``installation.id`` (only a positive integer);
* ``subject`` says whether ``number`` is an issue or a pull request: ``pull_request``
  payloads and issue payloads carrying a ``pull_request`` key (comments on a PR) are
  pull requests; push events are neither;
* a pull request's head commit is kept for its Check Run, only as 40 hex digits.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentchain.github.rules import matching


def _event(name: str, payload: dict[str, Any]) -> Any:
    return matching.event_from_payload(name, payload, delivery_id="d", hook_id="h")


def test_issue_with_installation() -> None:
    event = _event("issues", {"issue": {"number": 3}, "installation": {"id": 42}})
    assert (event.installation_id, event.subject, event.head_sha) == (42, "issue", None)


def test_pull_request_head_sha() -> None:
    payload = {"number": 5, "pull_request": {"number": 5, "head": {"sha": "ab" * 20}}}
    event = _event("pull_request", payload)
    assert (event.subject, event.head_sha, event.number) == ("pull_request", "ab" * 20, 5)


def test_comment_on_pull_request_is_a_pull_request() -> None:
    payload = {"issue": {"number": 9, "pull_request": {"url": "x"}}, "comment": {"body": "hi"}}
    event = _event("issue_comment", payload)
    assert (event.subject, event.head_sha) == ("pull_request", None)


def test_push_has_no_subject() -> None:
    assert _event("push", {"head_commit": {"message": "m"}}).subject is None


@pytest.mark.parametrize("value", ["42", -1, 0, True, None, 1.5])
def test_bad_installation_ids_are_dropped(value: object) -> None:
    assert _event("issues", {"installation": {"id": value}}).installation_id is None


@pytest.mark.parametrize("sha", ["ABC", "g" * 40, "a" * 39, 7, "A" * 40])
def test_bad_head_shas_are_dropped(sha: object) -> None:
    payload = {"pull_request": {"number": 1, "head": {"sha": sha}}}
    assert _event("pull_request", payload).head_sha is None
