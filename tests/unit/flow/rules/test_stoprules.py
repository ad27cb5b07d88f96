"""Stop requests and stopped endings (flow/rules/stoprules.py).

Aspects covered:
- the annotations ask for a stop only with ``stop`` true (case and spaces aside);
  who and why default to ``annotation`` and nothing;
- the API's annotations read back as the same request (round trip, property-based);
- a stop's text is one short printable line, whatever it was (property-based), in
  linear time;
- the ending: Cancelled, Stopped with who and why, or Superseded naming the successor;
- a recorded stop (``to_record``) gives the same ending back; anything else gives none.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.flow.rules import stoprules
from agentchain.flow.rules.stoprules import StopRequest
from agentchain.models.conditions import Reason


@pytest.mark.parametrize("value", ["true", "True", " TRUE ", "yes", "1"])
def test_a_true_stop_annotation_asks_for_a_stop(value: str) -> None:
    request = stoprules.requested({stoprules.STOP: value})
    assert request == StopRequest(by="annotation", reason="")


@pytest.mark.parametrize("value", ["false", "", "no", "0", "stop", "truee"])
def test_anything_else_asks_for_nothing(value: str) -> None:
    assert stoprules.requested({stoprules.STOP: value, stoprules.STOP_REASON: "x"}) is None


def test_no_annotations_ask_for_nothing() -> None:
    assert stoprules.requested(None) is None
    assert stoprules.requested({}) is None


texts = st.text(max_size=300)


@given(by=texts, reason=texts, successor=st.none() | texts)
def test_the_apis_annotations_read_back_as_the_request(
    by: str, reason: str, successor: str | None
) -> None:
    request = StopRequest(
        by=stoprules.clean(by) or "api", reason=stoprules.clean(reason), successor=successor
    )
    back = stoprules.requested(stoprules.annotations_for(request))
    assert back is not None
    assert back.by == request.by and back.reason == request.reason
    assert back.successor == (stoprules.clean(successor) or None if successor else None)


@given(texts)
def test_stop_text_is_one_short_printable_line(text: str) -> None:
    cleaned = stoprules.clean(text)
    assert len(cleaned) <= stoprules.TEXT_MAX_CHARS
    assert cleaned.isprintable() and "\n" not in cleaned
    assert cleaned == cleaned.strip()


def test_cleaning_a_huge_text_is_fast() -> None:
    started = time.perf_counter()
    assert len(stoprules.clean("a\n" * 5_000_000)) == stoprules.TEXT_MAX_CHARS
    assert time.perf_counter() - started < 1.0


def test_a_stopped_job_is_cancelled_saying_by_whom_and_why() -> None:
    ending = stoprules.ending(StopRequest(by="api", reason="wrong issue"))
    assert (ending.phase, ending.reason) == ("Cancelled", Reason.STOPPED)
    assert ending.message == "Stopped by api: wrong issue"
    assert stoprules.ending(StopRequest(by="annotation")).message == "Stopped by annotation."


def test_a_superseded_job_names_its_successor() -> None:
    ending = stoprules.ending(StopRequest(by="concurrency", successor="fix-42-b"))
    assert (ending.phase, ending.reason) == ("Cancelled", Reason.SUPERSEDED)
    assert "fix-42-b" in ending.message


def test_a_job_superseded_by_something_that_is_no_chain_says_what() -> None:
    request = StopRequest(by="concurrency", reason="@octocat pushed", successor="push--0a1b")
    ending = stoprules.ending(request)
    assert (ending.phase, ending.reason) == ("Cancelled", Reason.SUPERSEDED)
    assert ending.message == "Superseded by push--0a1b: @octocat pushed."


@given(by=texts.filter(lambda t: stoprules.clean(t)), reason=texts, successor=st.none() | texts)
def test_a_recorded_stop_gives_its_ending_back(by: str, reason: str, successor: str | None) -> None:
    request = StopRequest(
        by=stoprules.clean(by), reason=stoprules.clean(reason), successor=successor
    )
    again = StopRequest.from_record(request.to_record())
    assert again is not None
    assert stoprules.ending_of(request.to_record()) == stoprules.ending(again)


@pytest.mark.parametrize("record", [None, {}, {"by": 3}, "api", ["by"]])
def test_a_record_that_is_no_stop_gives_no_ending(record: object) -> None:
    assert stoprules.ending_of(record) is None
