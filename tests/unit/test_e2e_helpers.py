"""The e2e suite's shared builder and its guard for "nothing happens within X".

Aspects covered:
- ``operating.stays`` watches the whole window when the check holds, fails at the first
  false answer (long before the window ends), passes on the check's own AssertionError,
  and fails a check that returns nothing (a forgotten ``return True`` cannot pass);
- ``chaining.ai_agent`` declares exactly what it is given: triggers only when given,
  spec fields given as None left out, the object named apart from its trigger when asked;
- ``chaining.agent`` still builds the demo agent's manifest the tests were written against;
- ``tracetree.render`` draws each trace as a tree, children under their parent by start
  time, and shows a span whose parent never arrived at the top, marked ``(orphan)``.
"""

from __future__ import annotations

import itertools
import time

import pytest
from e2e import chaining, operating, tracetree


def test_a_check_that_holds_is_watched_for_the_whole_window() -> None:
    calls = itertools.count()
    started = time.monotonic()
    operating.stays(lambda: next(calls) >= 0, seconds=0.3, interval=0.05, what="holding")
    assert time.monotonic() - started >= 0.3
    assert next(calls) >= 4


def test_the_first_false_answer_fails_at_once() -> None:
    answers = iter([True, True, False])
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"the phase stopped holding after .*: False"):
        operating.stays(lambda: next(answers), seconds=30, interval=0.01, what="the phase")
    assert time.monotonic() - started < 5


def test_a_checks_own_assertion_fails_the_watch() -> None:
    def check() -> bool:
        assert 1 + 1 == 3, "arithmetic"
        return True

    with pytest.raises(AssertionError, match="arithmetic"):
        operating.stays(check, seconds=30, what="sums")


def test_a_check_that_returns_nothing_fails() -> None:
    def forgetful() -> None:
        assert True

    with pytest.raises(AssertionError, match=r"forgetful stopped holding after .*: None"):
        operating.stays(forgetful, seconds=30, what="forgetful")


def test_ai_agent_declares_only_what_it_is_given() -> None:
    bare = chaining.ai_agent("reader")
    assert bare == {
        "apiVersion": chaining.API_VERSION,
        "kind": "AiAgent",
        "metadata": {"name": "reader"},
        "spec": {"triggerName": "reader"},
    }
    named = chaining.ai_agent(
        "ai-reader",
        ["sh", "-c", "true"],
        object_name="reader",
        triggers=chaining.MANUAL,
        backoffLimit=2,
        approval=None,
    )
    assert named["metadata"] == {"name": "reader"}
    assert named["spec"] == {
        "triggerName": "ai-reader",
        "command": ["sh", "-c", "true"],
        "eventTriggers": [{"source": "manual"}],
        "backoffLimit": 2,
    }
    # The shared trigger tuple is copied, never handed out to be changed.
    assert named["spec"]["eventTriggers"][0] is not chaining.MANUAL[0]
    assert chaining.python_command("print(1)", "x") == ["python3", "-c", "print(1)", "x"]


def test_agent_builds_the_demo_agents_manifest() -> None:
    built = chaining.agent(
        "triage",
        "--no-context",
        next_=chaining.step("dev"),
        github="issues.labeled",
        github_settings={"permissions": {"issues": "write"}},
        approval={},
    )
    assert built == {
        "apiVersion": chaining.API_VERSION,
        "kind": "AiAgent",
        "metadata": {"name": "triage"},
        "spec": {
            "name": "triage",
            "triggerName": "triage",
            "enabled": True,
            "command": ["agentchain", "demo-agent", "--no-context"],
            "eventTriggers": [
                {
                    "source": "github",
                    "events": ["issues.labeled"],
                    "next": {
                        "agentTriggerName": "dev",
                        "condition": "on-success",
                        "failurePolicy": "stop",
                    },
                }
            ],
            "github": {"permissions": {"issues": "write"}},
            "approval": {},
        },
    }
    assert "github" not in chaining.agent("plain")["spec"]


def _span(span: str, parent: str | None, start: int, name: str, **attrs: str) -> dict[str, object]:
    return {
        "traceId": "t1",
        "spanId": span,
        "parentSpanId": parent or "",
        "name": name,
        "startTimeUnixNano": str(start * 10**9),
        "endTimeUnixNano": str((start + 1) * 10**9),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }


def test_a_trace_renders_as_a_tree_with_its_orphans_marked() -> None:
    spans = [
        _span("b", "a", 2, "agentjob reviewer", **{"gen_ai.agent.name": "reviewer"}),
        _span("a", None, 0, "webhook issues.opened"),
        _span("c", "a", 1, "agentjob triage"),
        _span("d", "gone", 3, "agentjob lost"),
    ]
    assert tracetree.render(spans).splitlines() == [
        "trace t1",
        "  webhook issues.opened  +0.00s 1.00s",
        "    agentjob triage  +1.00s 1.00s",
        "    agentjob reviewer  +2.00s 1.00s  name=reviewer",
        "  agentjob lost  +3.00s 1.00s (orphan)",
    ]
