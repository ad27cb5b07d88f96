"""Triggers that name the App: ``mention`` and ``assignedToApp`` filters, and labels added.

Aspects covered (``agentchain.github.rules.matching``):
* mention, as a matrix over the events that carry text: an issue or pull request opened
  by its sender, a comment, a review; the text is the sender's own (an issue edited or
  labelled by someone else than its author carries none; an empty comment is not its
  issue's body); a mention in code or a quote does not count; no slug known refuses
  with the reason saying how to give one;
* a stranger's mention is refused by the sender policy (the filter passes first), and
  the App's own comment (a bot) by the bot rule, so the App never starts itself;
* assignedToApp: the assignee is ``<slug>[bot]`` in any case; another assignee, an
  unassignment or an event that assigns nobody is refused;
* labels on pull requests: ``pull_request.labeled`` starts the agent only for the label
  just added, not for one the pull request already had;
* ``mention_text``: which text of a payload counts as the sender's;
* ``needs_app_slug``: only agents with those filters make the webhook ask for the slug.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentchain.github.rules import matching
from agentchain.github.rules.matching import AgentCandidate, Ignored, Match
from agentchain.models.aiagent import AiAgentSpec

SLUG = "chain-app"
NO_SLUG = (
    "the GitHub App's slug is not known (set AGENTCHAIN_GITHUB_APP_SLUG, or configure "
    "the App): mention and assignedToApp filters cannot pass"
)
NOT_MENTIONED = f"filter mention: the text does not mention @{SLUG}"
NO_TEXT = "filter mention: the event carries no text its sender wrote"


def agent(events: list[str], filters: dict[str, Any]) -> AgentCandidate:
    trigger = {"source": "github", "events": events, "filters": filters}
    spec = {"triggerName": "ai-helper", "eventTriggers": [trigger]}
    return AgentCandidate("helper", AiAgentSpec.model_validate(spec))


def subject(
    author: str = "alice", body: str = "text", association: str = "MEMBER"
) -> dict[str, Any]:
    return {
        "number": 7,
        "title": "T",
        "body": body,
        "user": {"login": author, "type": "User"},
        "author_association": association,
        "labels": [],
    }


def base(sender: str = "alice", sender_type: str = "User", **more: Any) -> dict[str, Any]:
    return {
        "repository": {"full_name": "octo/app", "private": False},
        "sender": {"login": sender, "type": sender_type},
        **more,
    }


def opened(body: str, *, author: str = "alice", sender: str = "alice") -> dict[str, Any]:
    return base(sender, action="opened", issue=subject(author, body))


def commented(
    body: str, *, association: str = "MEMBER", sender: str = "alice", sender_type: str = "User"
) -> dict[str, Any]:
    comment = {
        "id": 5,
        "body": body,
        "author_association": association,
        "user": {"login": sender, "type": sender_type},
    }
    return base(
        sender,
        sender_type,
        action="created",
        issue=subject("bob", "@chain-app do"),
        comment=comment,
    )


def reviewed(body: str | None) -> dict[str, Any]:
    review = {"id": 9, "body": body, "state": "commented", "author_association": "MEMBER"}
    return base(action="submitted", pull_request=subject("bob"), review=review)


def outcome(
    event: str,
    action: str,
    payload: dict[str, Any],
    filters: dict[str, Any],
    slug: str | None = SLUG,
) -> str | None:
    candidate = agent([f"{event}.{action}"], filters)
    matches, ignored = matching.match_event(event, action, payload, [candidate], app_slug=slug)
    found: list[Match | Ignored] = [*matches, *ignored]
    assert len(found) == 1
    return found[0].reason if isinstance(found[0], Ignored) else None


MENTION = {"mention": True}

MENTION_CASES = [
    ("issue-opened", "issues", "opened", opened("@chain-app triage this"), None),
    ("issue-opened-no-mention", "issues", "opened", opened("please triage"), NOT_MENTIONED),
    ("issue-opened-by-other", "issues", "opened", opened("@chain-app", author="bob"), NO_TEXT),
    ("issue-edited-by-other", "issues", "edited",
     base("carol", action="edited", issue=subject("bob", "@chain-app")), NO_TEXT),
    ("pr-opened", "pull_request", "opened",
     base(action="opened", pull_request=subject(body="cc @chain-app")), None),
    ("comment", "issue_comment", "created", commented("@chain-app fix it"), None),
    ("comment-no-mention", "issue_comment", "created", commented("thanks"), NOT_MENTIONED),
    ("comment-empty-not-issue-body", "issue_comment", "created", commented(""), NOT_MENTIONED),
    ("comment-in-code", "issue_comment", "created", commented("`@chain-app`"), NOT_MENTIONED),
    ("comment-in-quote", "issue_comment", "created", commented("> @chain-app\nok"),
     NOT_MENTIONED),
    ("comment-stranger", "issue_comment", "created",
     commented("@chain-app run", association="NONE"),
     "sender policy: author_association NONE not allowed"),
    ("review", "pull_request_review", "submitted", reviewed("@Chain-App please fix"), None),
    ("review-no-body", "pull_request_review", "submitted", reviewed(None), NOT_MENTIONED),
    ("no-slug", "issue_comment", "created", commented("@chain-app"), NO_SLUG),
]  # fmt: skip


@pytest.mark.parametrize(
    ("event", "action", "payload", "expected"),
    [c[1:] for c in MENTION_CASES],
    ids=[c[0] for c in MENTION_CASES],
)
def test_mention(event: str, action: str, payload: dict[str, Any], expected: str | None) -> None:
    slug = None if expected == NO_SLUG else SLUG
    assert outcome(event, action, payload, MENTION, slug) == expected


def test_the_apps_own_comment_never_starts_an_agent() -> None:
    payload = commented("@chain-app again", sender=f"{SLUG}[bot]", sender_type="Bot")
    reason = outcome("issue_comment", "created", payload, MENTION)
    assert reason is not None and "bot" in reason.lower()


def test_mention_filter_false_is_no_filter() -> None:
    assert outcome("issue_comment", "created", commented("hello"), {"mention": False}) is None


def assigned(login: str | None, action: str = "assigned") -> dict[str, Any]:
    payload = base(action=action, issue=subject())
    if login is not None:
        payload["assignee"] = {"login": login, "type": "Bot"}
    return payload


ASSIGNED = {"assignedToApp": True}
ASSIGN_CASES = [
    ("to-app", "assigned", assigned("chain-app[bot]"), None),
    ("to-app-any-case", "assigned", assigned("Chain-App[bot]"), None),
    ("to-someone-else", "assigned", assigned("alice"),
     "filter assignedToApp: assigned to alice, not chain-app[bot]"),
    ("to-a-lookalike", "assigned", assigned("chain-app"),
     "filter assignedToApp: assigned to chain-app, not chain-app[bot]"),
    ("unassigned", "unassigned", assigned("chain-app[bot]", "unassigned"),
     "filter assignedToApp: the event assigns nobody (unassigned)"),
    ("no-assignee", "assigned", assigned(None),
     "filter assignedToApp: the event assigns nobody (assigned)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("action", "payload", "expected"),
    [c[1:] for c in ASSIGN_CASES],
    ids=[c[0] for c in ASSIGN_CASES],
)
def test_assigned_to_app(action: str, payload: dict[str, Any], expected: str | None) -> None:
    assert outcome("issues", action, payload, ASSIGNED) == expected


def test_assigned_to_app_without_a_slug_refuses() -> None:
    assert outcome("issues", "assigned", assigned("chain-app[bot]"), ASSIGNED, None) == NO_SLUG


def pr_labeled(added: str, *present: str) -> dict[str, Any]:
    pr = subject() | {"labels": [{"name": n} for n in (*present, added)]}
    return base(action="labeled", pull_request=pr, label={"name": added})


def test_pull_request_labeled_fires_for_the_label_just_added() -> None:
    assert outcome("pull_request", "labeled", pr_labeled("agent"), {"label": "agent"}) is None


def test_pull_request_labeled_ignores_a_label_it_already_had() -> None:
    reason = outcome("pull_request", "labeled", pr_labeled("bug", "agent"), {"label": "agent"})
    assert reason == "filter label agent: the label labeled is bug"


MENTION_TEXT_CASES = [
    ("comment", commented("c"), "c"),
    ("review", reviewed("r"), "r"),
    ("review-null-body", reviewed(None), ""),
    ("own-issue", opened("mine"), "mine"),
    ("others-issue", opened("theirs", author="bob"), None),
    ("nothing", base(action="created"), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("payload", "expected"),
    [c[1:] for c in MENTION_TEXT_CASES],
    ids=[c[0] for c in MENTION_TEXT_CASES],
)
def test_mention_text(payload: dict[str, Any], expected: str | None) -> None:
    assert matching.mention_text(payload) == expected


def test_the_slug_is_needed_only_for_filters_that_name_the_app() -> None:
    assert matching.needs_app_slug([agent(["issues.assigned"], ASSIGNED)])
    assert matching.needs_app_slug([agent(["issue_comment.created"], MENTION)])
    plain = agent(["issues.labeled"], {"label": "x", "mention": False})
    assert not matching.needs_app_slug([plain])
    assert not matching.needs_app_slug([])
