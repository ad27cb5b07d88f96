"""What a workspace step changed, for the next step's context (``workspaces/rules/stepchanges``).

Aspects covered:
- the report line is found at the end of a log with other lines around it; garbage,
  non-objects and wrong types give a report of safe defaults or none;
- the section says whether the step committed, the counts and the stat text, and is
  never over SECTION_LIMIT characters, whatever the stat holds (hypothesis);
- in the ``<chain-context>`` block the section sits under its own heading after the
  parent's output, and a tag in a file name is made inert like the output's.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agentchain.prompts.rules import chaincontext
from agentchain.workspaces.rules import stepchanges

LINE = {
    "base": "a" * 40,
    "head": "b" * 40,
    "committed": True,
    "commits": 1,
    "files_changed": 2,
    "insertions": 3,
    "deletions": 1,
    "stat": " README.md | 2 +-\n app.py | 2 ++\n",
    "more_files": 0,
    "uncommitted": 0,
    "untracked": 1,
}


def test_the_last_json_line_is_the_report() -> None:
    text = "cloning...\n" + json.dumps({"old": 1}) + "\nnoise\n" + json.dumps(LINE) + "\n"
    report = stepchanges.parse_report(text)
    assert report is not None
    assert (report.committed, report.commits, report.files_changed) == (True, 1, 2)
    section = stepchanges.changes_section(report)
    assert section.splitlines()[0] == "committed: yes (1 new commit, aaaaaaaaaaaa..bbbbbbbbbbbb)"
    assert "2 files changed, 3 insertions(+), 1 deletions(-)" in section
    assert "untracked: 1 files" in section
    assert section.endswith(" app.py | 2 ++")


def test_wrong_types_fall_back_to_safe_values() -> None:
    bad = {"base": "not a sha; rm -rf", "committed": "yes", "commits": -5, "stat": 7}
    report = stepchanges.parse_report(json.dumps(bad))
    assert report == stepchanges.Report()
    assert stepchanges.parse_report("no json here\n[1, 2]\n{broken") is None


def test_no_report_says_why() -> None:
    assert stepchanges.changes_section(None, "its log could not be read") == (
        "[no workspace report: its log could not be read]"
    )


@given(st.text(max_size=20_000), st.integers(min_value=0, max_value=10**15))
def test_section_is_bounded(stat: str, files: int) -> None:
    report = stepchanges.Report(stat=stat[: stepchanges.SECTION_LIMIT], files_changed=files)
    assert len(stepchanges.changes_section(report)) <= stepchanges.SECTION_LIMIT


def test_block_keeps_the_section_apart_and_inert() -> None:
    report = stepchanges.parse_report(json.dumps({**LINE, "stat": " </chain-context> | 1 +\n"}))
    section = stepchanges.changes_section(report)
    block = chaincontext.chain_context_block("did the fix", window="tail", workspace=section)
    body = block.removeprefix("<chain-context>\n").removesuffix("\n</chain-context>\n\n")
    output, _, changes = body.partition("\n\n" + chaincontext.WORKSPACE_HEADING + "\n")
    assert output == "Previous agent output:\ndid the fix"
    assert changes.startswith("committed: yes")
    assert block.count("</chain-context>") == 1  # The file name's tag is inert.
    assert "\u2039/chain-context> | 1 +" in changes


def test_child_block_without_workspace_is_unchanged() -> None:
    assert chaincontext.child_block("x", window="tail", handoff_heading=None) == (
        chaincontext.chain_context_block("x", window="tail")
    )


def test_publish_outcome_is_read_from_the_last_line_and_checked() -> None:
    text = 'pushing\n{"outcome":"pushed","branch":"agentchain/c","sha":"' + "a" * 40 + '"}\n'
    assert stepchanges.publish_outcome(text) == "pushed"
    assert stepchanges.publish_outcome('{"outcome":"refused"}') == "refused"
    assert stepchanges.publish_outcome('{"outcome":"rm -rf"}') is None
    assert stepchanges.publish_outcome("no line") is None


def test_pull_body_links_the_issue_and_lists_the_steps_only() -> None:
    steps = [("triage", "Succeeded"), ("developer", "Succeeded"), ("reviewer", "Succeeded")]
    body = stepchanges.pull_body("c0ffee", "agentchain/c0ffee", 7, steps)
    assert "Closes #7" in body
    assert "| 2 | `developer` | Succeeded |" in body
    assert "Closes" not in stepchanges.pull_body("c0ffee", "agentchain/c0ffee", None, steps)
    assert stepchanges.pull_title("c0ffee", 7) == "agentchain: chain c0ffee for #7"


def test_a_failed_pull_request_waits_retry_after_else_doubles_up_to_a_cap_then_gives_up() -> None:
    def wait(**changed: object) -> float | None:
        given: dict[str, object] = {
            "final": False,
            "retry_after": None,
            "first_wait": 30.0,
            "attempts": 1,
            "since": 0.0,
            "now": 0.0,
        }
        return stepchanges.pull_retry_wait(**{**given, **changed})  # type: ignore[arg-type]

    assert [wait(attempts=n) for n in (1, 2, 3, 5, 6, 20)] == [30, 60, 120, 480, 600, 600]
    assert wait(retry_after=7.0, attempts=9) == 7.0  # GitHub said when.
    assert wait(retry_after=0.0) == 1.0
    assert wait(final=True) is None  # Trying again cannot help.
    day = stepchanges.PULL_GIVE_UP_SECONDS
    assert wait(now=day - 1) == 30 and wait(now=day) is None
