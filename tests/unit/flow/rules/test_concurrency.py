"""Concurrency groups' pure side (flow/rules/concurrency.py).

Aspects covered:
- the group template renders over the event with the documented variables
  (``{{ repository }}#{{ issue.number }}``, ``event``, ``sender``, ``agent``);
- event text is data: template syntax in an issue title is never evaluated;
- a template the sandbox refuses, one that fails, or one that renders empty is a
  GroupRenderError with a reason; the group is one printable line of at most 200
  characters whatever the event holds (property-based);
- the ticket comes from its annotation when that is a plain number, else the fallback;
- every answer of the admission script reads as its verdict; anything else is refused.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.flow.rules import concurrency
from agentchain.flow.rules.concurrency import Admitted, Queued, Refused, Superseded
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import Concurrency

EVENT = JobEvent(
    source="github",
    name="issues",
    action="opened",
    repository="acme/webapp",
    number=42,
    title="{{ 7*7 }} breaks {% raw %}",
    sender="alice",
)


def _group(template: str, event: JobEvent | None = EVENT) -> str:
    return concurrency.render_group(Concurrency(group=template), event, "triage")


def test_the_documented_template_renders_repository_and_issue() -> None:
    assert _group("{{ repository }}#{{ issue.number }}") == "acme/webapp#42"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ event.repository }}/{{ number }}", "acme/webapp/42"),
        ("{{ sender }} via {{ agent }}", "alice via triage"),
        ("{{ issue.title }}", "{{ 7*7 }} breaks {% raw %}"),
        ("fixed", "fixed"),
    ],
)
def test_variables_render_and_event_text_stays_data(template: str, expected: str) -> None:
    assert _group(template) == expected


def test_a_manual_run_without_an_event_renders_too() -> None:
    assert _group("{{ agent }}:{{ repository }}", None) == "triage:"


@pytest.mark.parametrize(
    "template", ["{{ ''.__class__ }}", "{{ 1 / 0 }}", "{% for %}", "{{ missing }}", "  "]
)
def test_a_template_that_fails_or_renders_empty_is_an_error(template: str) -> None:
    with pytest.raises(concurrency.GroupRenderError):
        _group(template)


@given(st.text(max_size=500))
def test_a_group_is_one_short_printable_line(title: str) -> None:
    event = EVENT.model_copy(update={"title": title or "x"})
    try:
        group = _group("g-{{ issue.title }}", event)
    except concurrency.GroupRenderError:
        return
    assert 0 < len(group) <= concurrency.GROUP_MAX_CHARS
    assert group.isprintable() and group == group.strip()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1700000000123456", 1700000000123456), ("", 7), ("12a", 7), ("9" * 21, 7)],
)
def test_a_ticket_comes_from_its_annotation_or_the_fallback(raw: str, expected: int) -> None:
    assert concurrency.ticket_of({concurrency.TICKET: raw}, 7) == expected
    assert concurrency.ticket_of(None, 7) == 7


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (["admitted", "|"], Admitted()),
        (["admitted", "c1", "j1", "|"], Admitted(victims=(("c1", "j1"),))),
        (["admitted", "|", "c2", "j2"], Admitted(promoted=(("c2", "j2"),))),
        (["queued", "3", "|"], Queued(position=3)),
        (["queued", "2", "|", "c0", "j0"], Queued(position=2, promoted=(("c0", "j0"),))),
        (["superseded", "j9"], Superseded(by_job="j9")),
        (["refused"], Refused(limit=4)),
    ],
)
def test_each_admission_answer_reads_as_its_verdict(
    answer: list[str], expected: concurrency.Verdict
) -> None:
    assert concurrency.verdict(answer, 4) == expected


@pytest.mark.parametrize("answer", [[], ["maybe"], ["unknown", "x"]])
def test_an_unknown_answer_is_refused(answer: list[str]) -> None:
    with pytest.raises(ValueError, match="unknown admission answer"):
        concurrency.verdict(answer, 1)


class TestRoundGroup:
    """A follow-up round's root joins its pull request's own group, cancel-in-progress."""

    def test_a_round_has_its_pull_requests_group(self) -> None:
        event = JobEvent(repository="octo/app", number=7, continues="c1", round=2)
        group = concurrency.round_group(event, "dev")
        assert group == "\x00follow-up rounds on octo/app#7 by dev"
        assert group == concurrency.round_group(event.model_copy(update={"round": 3}), "dev")
        assert group != concurrency.round_group(event, "other")
        assert group != concurrency.round_group(event.model_copy(update={"number": 8}), "dev")
        assert not group.isprintable()  # No rendered template can name it.
        limits = concurrency.ROUND_CONCURRENCY
        assert (limits.limit, limits.policy) == (1, "cancel-in-progress")

    @pytest.mark.parametrize(
        "event",
        [
            None,
            JobEvent(repository="octo/app", number=7),
            JobEvent(repository="octo/app", continues="c1"),
            JobEvent(number=7, continues="c1"),
        ],
    )
    def test_any_other_job_has_none(self, event: JobEvent | None) -> None:
        assert concurrency.round_group(event, "dev") is None
