"""GitHub event matching (``agentchain.github.rules.matching``).

Aspects covered:
* selectors: ``event.action`` and bare ``event`` parsing, malformed selectors;
* selection: action matched, bare ``push``/``issues`` match every action, other
  events and ``manual`` triggers never match, the first matching trigger wins
  (index and next step), disabled agents, several agents at once; a triggerName
  two AiAgents share starts nothing and is reported once, naming both;
* seed 003: its triage agent matches ``issues.opened`` and not ``issues.closed``,
  its ``help-wanted`` agent only when that label is added;
* filters, as a matrix: label (issue, PR, just added/removed, case), repository,
  sender, and combinations; filters are reported before the sender policy;
* sender policy, as a matrix: where the association is read and in which order,
  default allow-list, widened and narrowed lists, bots by type and by login,
  ``allowBots``, write-access events without an association;
  (``event_from_payload`` is covered in ``test_matching_events.py``.)
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from agentchain.github.rules import matching
from agentchain.github.rules.matching import AgentCandidate, Ignored, Match
from agentchain.models.aiagent import AiAgentSpec

SEED_003 = """
apiVersion: labrats.work/v1alpha1
kind: AiAgent
metadata: {name: triage, namespace: ai-agents}
spec:
  name: Issue Triage
  triggerName: ai-triage
  defaultModel: haiku
  defaultEffort: low
  enabled: true
  eventTriggers:
    - source: github
      events: ["issues.opened"]
      next: {agentTriggerName: ai-developer, condition: on-success, failurePolicy: stop}
---
apiVersion: labrats.work/v1alpha1
kind: AiAgent
metadata: {name: developer}
spec:
  name: Developer
  triggerName: ai-developer
  defaultModel: sonnet
  eventTriggers:
    - source: manual
      next: {agentTriggerName: ai-reviewer, condition: on-success}
---
apiVersion: labrats.work/v1alpha1
kind: AiAgent
metadata: {name: primary-agent}
spec:
  name: Primary Agent
  triggerName: ai-primary
  eventTriggers:
    - source: github
      events: ["issues.labeled"]
      filters: {label: "help-wanted"}
      next: {agentTriggerName: ai-escalate, condition: on-failure, failurePolicy: stop}
"""


def seed_agents() -> list[AgentCandidate]:
    docs = list(yaml.safe_load_all(SEED_003))
    return [
        AgentCandidate(d["metadata"]["name"], AiAgentSpec.model_validate(d["spec"])) for d in docs
    ]


def agent(name: str = "bot", **spec: Any) -> AgentCandidate:
    spec.setdefault("triggerName", f"ai-{name}")
    spec.setdefault("eventTriggers", [{"source": "github", "events": ["issues.opened"]}])
    return AgentCandidate(name, AiAgentSpec.model_validate(spec))


def payload(
    *,
    action: str | None = "opened",
    association: str | None = "MEMBER",
    labels: tuple[str, ...] = (),
    login: str = "alice",
    sender_type: str = "User",
    repo: str = "octo/app",
) -> dict[str, Any]:
    issue: dict[str, Any] = {
        "number": 12,
        "title": "Login broken",
        "body": "Steps",
        "html_url": "https://github.com/octo/app/issues/12",
        "labels": [{"name": n} for n in labels],
    }
    if association is not None:
        issue["author_association"] = association
    body: dict[str, Any] = {
        "issue": issue,
        "repository": {"full_name": repo, "html_url": "https://github.com/octo/app"},
        "sender": {"login": login, "type": sender_type},
    }
    if action is not None:
        body["action"] = action
    return body


def one(
    event: str, action: str | None, body: dict[str, Any], candidate: AgentCandidate
) -> Match | Ignored | None:
    matches, ignored = matching.match_event(event, action, body, [candidate])
    assert len(matches) + len(ignored) <= 1
    return (matches or ignored or [None])[0]


def reason_of(outcome: Match | Ignored | None) -> str | None:
    assert outcome is not None
    return outcome.reason if isinstance(outcome, Ignored) else None


# --------------------------------------------------------------------------- selectors


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("issues.opened", ("issues", "opened")),
        ("push", ("push", None)),
        (" pull_request.synchronize ", ("pull_request", "synchronize")),
        ("a.b.c", ("a", "b.c")),
    ],
)
def test_parse_event_selector(selector: str, expected: tuple[str, str | None]) -> None:
    assert matching.parse_event_selector(selector) == expected


@pytest.mark.parametrize("selector", ["", " ", ".opened", "issues."])
def test_parse_event_selector_rejects(selector: str) -> None:
    with pytest.raises(ValueError, match="event selector"):
        matching.parse_event_selector(selector)


# --------------------------------------------------------------------------- selection


class TestSelection:
    @pytest.mark.parametrize(
        ("events", "event", "action", "selected"),
        [
            (["issues.opened"], "issues", "opened", True),
            (["issues.opened"], "issues", "closed", False),
            (["issues.opened"], "issues", None, False),
            (["issues.opened"], "issue_comment", "opened", False),
            (["issues"], "issues", "reopened", True),
            (["push"], "push", None, True),
            (["push"], "push", "anything", True),
            (["issues.closed", "issues.opened"], "issues", "opened", True),
            (["bad.", "issues.opened"], "issues", "opened", True),
            ([], "issues", "opened", False),
        ],
        ids=[
            "action-matches",
            "other-action",
            "no-action",
            "other-event",
            "bare-issues",
            "bare-push",
            "bare-push-with-action",
            "second-selector",
            "malformed-skipped",
            "no-selectors",
        ],
    )
    def test_event_and_action(
        self, events: list[str], event: str, action: str | None, selected: bool
    ) -> None:
        candidate = agent(eventTriggers=[{"source": "github", "events": events}])
        outcome = one(event, action, payload(action=action), candidate)
        assert isinstance(outcome, Match) is selected
        assert outcome is None or selected

    def test_manual_trigger_never_matches(self) -> None:
        candidate = agent(eventTriggers=[{"source": "manual", "events": ["issues.opened"]}])
        assert one("issues", "opened", payload(), candidate) is None

    def test_disabled_agent_is_reported(self) -> None:
        assert one("issues", "opened", payload(), agent(enabled=False)) == Ignored(
            "ai-bot", "agent disabled"
        )

    def test_disabled_agent_without_trigger_for_event_is_silent(self) -> None:
        assert one("push", None, payload(), agent(enabled=False)) is None

    def test_first_matching_trigger_wins(self) -> None:
        candidate = agent(
            eventTriggers=[
                {"source": "manual", "next": {"agentTriggerName": "ai-manual"}},
                {"source": "github", "events": ["issues.opened"], "filters": {"label": "x"}},
                {"source": "github", "events": ["issues"], "next": {"agentTriggerName": "ai-b"}},
                {"source": "github", "events": ["issues.opened"]},
            ]
        )
        outcome = one("issues", "opened", payload(), candidate)
        assert isinstance(outcome, Match)
        assert (outcome.agent, outcome.agent_object, outcome.trigger_index) == ("ai-bot", "bot", 2)
        assert outcome.step is not None and outcome.step.agent_trigger_name == "ai-b"

    def test_first_filter_refusal_is_reported(self) -> None:
        candidate = agent(
            eventTriggers=[
                {"source": "github", "events": ["issues.opened"], "filters": {"label": "x"}},
                {"source": "github", "events": ["issues.opened"], "filters": {"sender": "bob"}},
            ]
        )
        assert reason_of(one("issues", "opened", payload(), candidate)) == (
            "filter label x not present"
        )

    def test_several_agents(self) -> None:
        agents = [agent("a"), agent("b", enabled=False), agent("c"), agent("d", eventTriggers=[])]
        matches, ignored = matching.match_event("issues", "opened", payload(), agents)
        assert [m.agent for m in matches] == ["ai-a", "ai-c"]
        assert ignored == [Ignored("ai-b", "agent disabled")]

    @pytest.mark.parametrize("both_match", [True, False], ids=["both-match", "one-matches"])
    def test_a_shared_trigger_name_starts_nothing_and_says_why_once(self, both_match: bool) -> None:
        other = {} if both_match else {"eventTriggers": [{"source": "manual"}]}
        agents = [
            agent("zeta", triggerName="ai-dup"),
            agent("alpha", triggerName="ai-dup", **other),
            agent("c"),
        ]
        matches, ignored = matching.match_event("issues", "opened", payload(), agents)
        assert [m.agent for m in matches] == ["ai-c"]
        assert len(ignored) == 1
        assert ignored[0].agent == "ai-dup"
        assert "used by 2 AiAgents (alpha, zeta)" in ignored[0].reason


class TestSeed003:
    def test_triage_matches_issues_opened(self) -> None:
        matches, ignored = matching.match_event("issues", "opened", payload(), seed_agents())
        assert ignored == []
        assert len(matches) == 1
        assert (matches[0].agent, matches[0].agent_object) == ("ai-triage", "triage")
        assert matches[0].step is not None
        assert matches[0].step.agent_trigger_name == "ai-developer"

    def test_triage_ignores_issues_closed(self) -> None:
        assert matching.match_event("issues", "closed", payload(), seed_agents()) == ([], [])

    def test_primary_matches_help_wanted_label(self) -> None:
        body = payload(action="labeled", labels=("help-wanted",)) | {
            "label": {"name": "help-wanted"}
        }
        matches, _ = matching.match_event("issues", "labeled", body, seed_agents())
        assert [m.agent for m in matches] == ["ai-primary"]


# --------------------------------------------------------------------------- filters


def labeled(name: str, *labels: str, action: str = "labeled") -> dict[str, Any]:
    return payload(action=action, labels=labels) | {"label": {"name": name}}


def on_pr(*labels: str) -> dict[str, Any]:
    body = payload()
    pr = body.pop("issue") | {"labels": [{"name": n} for n in labels]}
    return body | {"pull_request": pr}


def without(key: str) -> dict[str, Any]:
    return {k: v for k, v in payload().items() if k != key}


HW = {"label": "help-wanted"}
NO_HW = "filter label help-wanted not present"
REPO = {"repository": "octo/app"}
ALL = {"label": "x", "repository": "octo/app", "sender": "alice"}

FILTER_CASES: list[tuple[str, dict[str, str], str, dict[str, Any], str | None]] = [
    ("label-on-issue", HW, "opened", payload(labels=("bug", "help-wanted")), None),
    ("label-case", {"label": "Help-Wanted"}, "opened", payload(labels=("help-wanted",)), None),
    ("label-on-pr", {"label": "ready"}, "opened", on_pr("ready"), None),
    ("label-absent", HW, "opened", payload(labels=("bug",)), NO_HW),
    ("label-no-labels", HW, "opened", payload(), NO_HW),
    ("label-just-added", HW, "labeled", labeled("help-wanted"), None),
    ("label-other-added", HW, "labeled", labeled("bug", "help-wanted"),
     "filter label help-wanted: the label labeled is bug"),
    ("label-just-removed", HW, "unlabeled", labeled("help-wanted", action="unlabeled"), None),
    ("repo", REPO, "opened", payload(), None),
    ("repo-case", {"repository": "Octo/App"}, "opened", payload(), None),
    ("repo-other", {"repository": "octo/other"}, "opened", payload(),
     "filter repository octo/other: event is from octo/app"),
    ("repo-missing", REPO, "opened", without("repository"),
     "filter repository octo/app: event is from no repository"),
    ("sender", {"sender": "alice"}, "opened", payload(), None),
    ("sender-case", {"sender": "ALICE"}, "opened", payload(), None),
    ("sender-other", {"sender": "bob"}, "opened", payload(), "filter sender bob: sent by alice"),
    ("sender-missing", {"sender": "bob"}, "opened", without("sender"),
     "filter sender bob: sent by nobody"),
    ("all-pass", ALL, "opened", payload(labels=("x",)), None),
    ("all-but-label", ALL, "opened", payload(), "filter label x not present"),
    ("filter-before-policy", {"sender": "bob"}, "opened", payload(association="NONE"),
     "filter sender bob: sent by alice"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "action", "body", "expected"),
    [case[1:] for case in FILTER_CASES],
    ids=[case[0] for case in FILTER_CASES],
)
def test_filters(
    filters: dict[str, str], action: str, body: dict[str, Any], expected: str | None
) -> None:
    events = [f"issues.{action}", f"pull_request.{action}"]
    candidate = agent(eventTriggers=[{"source": "github", "events": events, "filters": filters}])
    event = "pull_request" if "pull_request" in body else "issues"
    assert reason_of(one(event, action, body, candidate)) == expected


# --------------------------------------------------------------------------- sender policy


def by(association: str | None, **kwargs: Any) -> dict[str, Any]:
    return payload(association=association, **kwargs)


def also(source: str, value: str, base: str | None = "OWNER") -> dict[str, Any]:
    """A payload whose ``source`` object (or the top level) carries ``value``."""
    body = by(base)
    if source == "top":
        return body | {"author_association": value}
    return body | {source: {"author_association": value, "body": "text"}}


def refused(association: str) -> str:
    return f"sender policy: author_association {association} not allowed"


def bot(login: str) -> str:
    return f"sender policy: bot sender {login} not allowed"


OWNER_ONLY = {"allowedAssociations": ["OWNER"]}
BOTS = {"allowBots": True}

POLICY_CASES: list[tuple[str, dict[str, Any] | None, str, dict[str, Any], str | None]] = [
    ("owner", None, "issues", by("OWNER"), None),
    ("member", None, "issues", by("MEMBER"), None),
    ("collaborator", None, "issues", by("COLLABORATOR"), None),
    ("lowercase", None, "issues", by("member"), None),
    ("contributor", None, "issues", by("CONTRIBUTOR"), refused("CONTRIBUTOR")),
    ("first-timer", None, "issues", by("FIRST_TIME_CONTRIBUTOR"),
     refused("FIRST_TIME_CONTRIBUTOR")),
    ("none", None, "issues", by("NONE"), refused("NONE")),
    ("missing", None, "issues", by(None), refused("NONE")),
    ("comment-over-issue", None, "issues", also("comment", "NONE"), refused("NONE")),
    ("comment-member", None, "issues", also("comment", "MEMBER", base="NONE"), None),
    ("review-over-pr", None, "issues",
     also("review", "NONE") | {"pull_request": {"author_association": "OWNER"}}, refused("NONE")),
    ("pr-over-issue", None, "issues", also("pull_request", "CONTRIBUTOR"), refused("CONTRIBUTOR")),
    ("top-level", None, "issues", also("top", "OWNER", base=None), None),
    ("issue-over-top", None, "issues", also("top", "OWNER", base="NONE"), refused("NONE")),
    ("widened", {"allowedAssociations": ["NONE", "CONTRIBUTOR"]}, "issues", by("NONE"), None),
    ("narrowed", OWNER_ONLY, "issues", by("MEMBER"), refused("MEMBER")),
    ("nobody", {"allowedAssociations": []}, "issues", by("OWNER"), refused("OWNER")),
    ("bot-by-type", None, "issues", by("OWNER", login="ci", sender_type="Bot"), bot("ci")),
    ("bot-by-login", None, "issues", by("OWNER", login="dependabot[bot]"), bot("dependabot[bot]")),
    ("bot-allowed", BOTS, "issues", by("NONE", login="renovate[bot]", sender_type="Bot"), None),
    ("allow-bots-still-checks-people", BOTS, "issues", by("NONE"), refused("NONE")),
    ("push-write-access", None, "push", by(None), None),
    ("push-narrowed", OWNER_ONLY, "push", by(None), refused("COLLABORATOR")),
    ("push-by-bot", None, "push", by(None, login="x[bot]"), bot("x[bot]")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "event", "body", "expected"),
    [case[1:] for case in POLICY_CASES],
    ids=[case[0] for case in POLICY_CASES],
)
def test_sender_policy(
    policy: dict[str, Any] | None, event: str, body: dict[str, Any], expected: str | None
) -> None:
    candidate = agent(senderPolicy=policy, eventTriggers=[{"source": "github", "events": [event]}])
    assert reason_of(one(event, body.get("action"), body, candidate)) == expected
