"""A job created before its AiAgent (``agentchain.hop.rules.agentwaits``).

Aspects covered:
- no wait configured (0): the job ends at once, with the message it always had;
- within the wait: it waits, until creation + wait, and the message names the
  triggerName, the deadline and what happens then;
- at and after the deadline: it ends ``AgentNotFound``, saying how long it waited;
- an unknown creation time counts as now (it waits the whole period), a creation time
  ahead of the operator's clock waits longer, never ends early;
- property: over any times and waits, it waits exactly while now < created + wait;
- ``created_at`` reads the API server's timestamps, and nothing else.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.hop.rules import agentwaits
from agentchain.hop.rules.agentwaits import AwaitAgent, NoAgent
from agentchain.models.conditions import Reason

CREATED = dt.datetime(2026, 11, 27, 18, 0, 0, tzinfo=dt.UTC).timestamp()


def test_no_wait_ends_at_once_as_before() -> None:
    verdict = agentwaits.missing_agent("coder", CREATED, CREATED, 0)
    assert verdict == NoAgent("No AiAgent in this namespace has triggerName 'coder'.")
    assert verdict.reason == Reason.AGENT_NOT_FOUND


@pytest.mark.parametrize("elapsed", [0.0, 0.5, 30.0, 59.999])
def test_within_the_wait_it_waits_until_the_deadline(elapsed: float) -> None:
    verdict = agentwaits.missing_agent("coder", CREATED, CREATED + elapsed, 60)
    assert isinstance(verdict, AwaitAgent)
    assert verdict.deadline == CREATED + 60
    assert "'coder'" in verdict.message
    assert "2026-11-27T18:01:00+00:00" in verdict.message
    assert "AgentNotFound" in verdict.message


def test_the_message_while_waiting_is_the_same_on_every_look() -> None:
    # Written once: a message that moved with the clock would be rewritten on every look.
    first = agentwaits.missing_agent("coder", CREATED, CREATED + 1, 60)
    later = agentwaits.missing_agent("coder", CREATED, CREATED + 42, 60)
    assert first == later


@pytest.mark.parametrize("elapsed", [60.0, 60.001, 61.0, 3600.0, 86400.0 * 3])
def test_at_and_after_the_deadline_it_ends(elapsed: float) -> None:
    verdict = agentwaits.missing_agent("coder", CREATED, CREATED + elapsed, 60)
    assert isinstance(verdict, NoAgent)
    assert verdict.reason == Reason.AGENT_NOT_FOUND
    assert "'coder'" in verdict.message
    assert "within 60 s" in verdict.message
    assert f"waited {int(elapsed)} s" in verdict.message


def test_an_unknown_creation_time_waits_the_whole_period() -> None:
    verdict = agentwaits.missing_agent("coder", None, CREATED, 60)
    assert isinstance(verdict, AwaitAgent)
    assert verdict.deadline == CREATED + 60


def test_a_creation_time_ahead_of_the_clock_never_ends_early() -> None:
    verdict = agentwaits.missing_agent("coder", CREATED + 30, CREATED, 60)
    assert isinstance(verdict, AwaitAgent)
    assert verdict.deadline == CREATED + 90


@given(
    created=st.floats(min_value=0, max_value=4e9),
    elapsed=st.floats(min_value=-1e6, max_value=1e6),
    wait=st.integers(min_value=-5, max_value=10**6),
)
def test_it_waits_exactly_while_the_deadline_is_ahead(
    created: float, elapsed: float, wait: int
) -> None:
    now = created + elapsed
    verdict = agentwaits.missing_agent("r", created, now, wait)
    if wait > 0 and now < created + wait:
        assert isinstance(verdict, AwaitAgent)
        assert verdict.deadline == created + wait
    else:
        assert isinstance(verdict, NoAgent)
        assert verdict.reason == Reason.AGENT_NOT_FOUND


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-11-27T18:00:00Z", CREATED),
        ("2026-11-27T18:00:00+00:00", CREATED),
        ("2026-11-27T19:00:00+01:00", CREATED),
        ("2026-11-27T18:00:00", CREATED),
        ("", None),
        (None, None),
        (12345, None),
        ("yesterday", None),
    ],
)
def test_created_at_reads_the_api_servers_timestamp(raw: object, expected: float | None) -> None:
    assert agentwaits.created_at(raw) == expected
