"""A chain as GitHub shows it (``agentchain.github.rules.progress``, issue 17).

Aspects covered:
* the chain's state from its jobs: queued (nothing started), running, and once a job
  has ``chainComplete`` succeeded / failed / stopped, with the Check Run's status and
  conclusion for each;
* the comment: the hidden marker first, one row per job in chain order (agent, phase,
  duration, dashboard link when configured), the outcome from the last job (its
  hand-off section when it has one, else its result; the end of it when long);
* a render depends on recorded state only: running steps show their start, not an
  elapsed time, so re-rendering an unchanged chain gives identical text;
* untrusted text: agent output in a code block by default (mentions, closing keywords
  and HTML inert), as Markdown with HTML escaped when the agent allows mentions;
* progress notes: one escaped line per job that sent one, below the table, cut at
  ``NOTE_MAX_CHARS``, inert even when the agent allows mentions; none, no section.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.github.rules import progress
from agentchain.models.agentjob import AgentJob

T0 = dt.datetime(2026, 11, 25, 1, 2, 3, tzinfo=dt.UTC)


def job(name: str, agent: str, depth: int, phase: str | None, **status: Any) -> progress.JobRecord:
    body: dict[str, Any] = {"chainDepth": depth, **status}
    if phase:
        body["phase"] = phase
    parsed = AgentJob.model_validate({"spec": {"agentRole": agent}, "status": body})
    return progress.JobRecord(name, f"2026-11-25T01:0{depth}:00Z", parsed)


def ended(
    name: str, agent: str, depth: int, phase: str, seconds: int, **more: Any
) -> progress.JobRecord:
    return job(
        name, agent, depth, phase,
        startTime=T0.isoformat(), completionTime=(T0 + dt.timedelta(seconds=seconds)).isoformat(),
        **more,
    )  # fmt: skip


def view(*jobs: progress.JobRecord) -> progress.ChainView:
    return progress.chain_view("team-a", "c-123", list(jobs))


class TestState:
    def test_queued_then_running(self) -> None:
        assert view(job("t", "triage", 0, "Pending")).state == "queued"
        running = job("t", "triage", 0, "Running", startTime=T0.isoformat())
        assert view(running).state == "running"
        fields = progress.check_run(view(running))
        assert (fields.status, fields.conclusion) == ("in_progress", None)
        assert progress.check_run(view(job("t", "triage", 0, None))).status == "queued"

    @pytest.mark.parametrize(
        ("phase", "action", "state", "conclusion"),
        [
            ("Succeeded", "none", "succeeded", "success"),
            ("Failed", "stopped", "failed", "failure"),
            ("Succeeded", "stopped", "stopped", "neutral"),
            ("Skipped", "none", "succeeded", "success"),
        ],
    )
    def test_done(self, phase: str, action: str, state: str, conclusion: str) -> None:
        last = ended("r", "reviewer", 1, phase, 5, chainComplete=True, next=[{"action": action}])
        v = view(ended("t", "triage", 0, "Succeeded", 3), last)
        assert v.state == state and v.done
        fields = progress.check_run(v)
        assert (fields.status, fields.conclusion) == ("completed", conclusion)
        assert fields.body()["conclusion"] == conclusion


class TestComment:
    def test_rows_marker_and_links(self) -> None:
        v = view(
            job("dev", "developer", 1, "Running", startTime=T0.isoformat()),
            ended("tri", "triage", 0, "Succeeded", 75),
        )
        body = progress.render_comment(v, dashboard_url="https://dash.example/")
        assert body.startswith("<!-- agentchain:chain=team-a/c-123 -->\n")
        rows = [line for line in body.splitlines() if line.startswith("| ")][1:]
        assert rows[0].startswith(
            "| 1 | triage | ✅ Succeeded | 1m 15s | [tri](https://dash.example/ui/jobs/team-a/tri)"
        )
        assert rows[1].startswith("| 2 | developer | ⏳ Running | since 01:02:03 UTC |")
        assert "https://dash.example/ui/chains/team-a/c-123" in body
        assert "The result appears here when the chain ends" in body

    def test_a_failed_or_stopped_row_names_its_reason(self) -> None:
        v = view(
            ended("tri", "triage", 0, "Succeeded", 5, reason="Succeeded"),
            ended("dev", "developer", 1, "Failed", 5, reason="ModelRateLimited"),
            ended("rev", "reviewer", 2, "Cancelled", 5, reason="Stopped"),
        )
        rows = [line for line in progress.render_comment(v).splitlines() if line.startswith("| ")]
        assert "✅ Succeeded |" in rows[1]  # A success says nothing more.
        assert "Failed (ModelRateLimited) |" in rows[2]
        assert "Cancelled (Stopped) |" in rows[3]

    def test_a_traced_chain_names_its_trace(self) -> None:
        v = view(ended("tri", "triage", 0, "Succeeded", 5))
        assert "trace" not in progress.render_comment(v).split("\n")[2]
        trace = "ab" * 16
        plain = progress.render_comment(v, trace=trace)
        assert f"· trace `{trace}`" in plain
        linked = progress.render_comment(
            v, trace=trace, trace_url=f"https://jaeger.example/trace/{trace}?a=(b)"
        )
        assert f"· trace [`{trace}`](https://jaeger.example/trace/{trace}?a=(b%29)" in linked

    def test_same_state_same_text(self) -> None:
        v = view(job("dev", "developer", 0, "Running", startTime=T0.isoformat()))
        assert progress.render_comment(v) == progress.render_comment(view(*[
            job("dev", "developer", 0, "Running", startTime=T0.isoformat())
        ]))  # fmt: skip

    def test_outcome_is_the_handoff_section_in_a_code_block(self) -> None:
        result = "noise\n## Downstream Directives\n@octocat fixes #1 <b>merge</b>\n"
        last = ended("r", "reviewer", 0, "Succeeded", 1, chainComplete=True, result=result)
        body = progress.render_comment(view(last))
        assert "**Result** of reviewer (r):\n\n```text\n@octocat fixes #1 <b>merge</b>\n```" in body
        assert "noise" not in body

    def test_outcome_is_the_last_agents_own_section_not_the_first_agents(self) -> None:
        first = ended("t", "triage", 0, "Succeeded", 1, result="## Downstream Directives\nx")
        result = "## Downstream Directives\nnot this\n## Verdict\nLooks right.\n"
        last = ended("r", "reviewer", 1, "Succeeded", 1, chainComplete=True, result=result)
        headings = {"triage": "## Downstream Directives", "reviewer": "## Verdict"}
        v = progress.chain_view("team-a", "c-123", [first, last], headings["triage"], headings)
        assert v.outcome == "Looks right."
        unknown = progress.chain_view("team-a", "c-123", [first, last], "## Verdict", {})
        assert unknown.outcome == "Looks right."  # An agent not listed: the default heading.

    def test_outcome_as_markdown_when_allowed(self) -> None:
        last = ended("r", "reviewer", 0, "Succeeded", 1, chainComplete=True, result="@octocat <b>")
        body = progress.render_comment(view(last), allow_mentions=True)
        assert "@octocat &lt;b&gt;" in body and "```" not in body

    def test_long_outcome_keeps_its_end(self) -> None:
        text = "x" * 10 + "y" * progress.OUTCOME_MAX_CHARS
        last = ended("r", "r", 0, "Succeeded", 1, chainComplete=True, result=text)
        v = view(last)
        assert v.outcome == "y" * progress.OUTCOME_MAX_CHARS and v.outcome_truncated
        assert "(the last 4000 characters)" in progress.render_comment(v)

    def test_agent_names_and_phases_are_inert(self) -> None:
        v = view(job("n", "@evil", 0, "Pending"))
        assert "@\u200bevil" in progress.render_comment(v)

    def test_many_jobs_are_bounded(self) -> None:
        v = view(*[job(f"j{i:03}", "a", i, "Pending") for i in range(progress.MAX_ROWS + 5)])
        assert "… and 5 more jobs." in progress.render_comment(v)

    def test_no_output(self) -> None:
        body = progress.render_comment(view(ended("r", "r", 0, "Failed", 1, chainComplete=True)))
        assert "The last job left no output" in body


class TestProgressNotes:
    def noted(self, note: str) -> progress.JobRecord:
        record = job("dev", "developer", 1, "Running", startTime=T0.isoformat())
        return progress.JobRecord(record.name, record.created, record.job, note)

    def test_a_note_is_one_inert_line_below_the_table(self) -> None:
        note = "tests pass\n## now @octocat <b>fixes #1</b> [x](http://e.vil)"
        v = view(ended("tri", "triage", 0, "Succeeded", 3), self.noted(note))
        for allow_mentions in (False, True):
            body = progress.render_comment(v, allow_mentions=allow_mentions)
            section = body.split("**Progress notes**\n\n", 1)[1].split("\n\n", 1)[0]
            assert section == (
                "- developer (dev): tests pass #\u200b#\u200b now @\u200boctocat "
                "&lt;b&gt;fixes #\u200b1&lt;/b&gt; \\[x\\](http\\://e.vil)"
            )
            assert body.index("| 2 | developer") < body.index("**Progress notes**")

    def test_a_long_note_is_cut(self) -> None:
        body = progress.render_comment(view(self.noted("n" * (progress.NOTE_MAX_CHARS + 50))))
        assert "n" * progress.NOTE_MAX_CHARS + "…\n" in body
        assert "n" * (progress.NOTE_MAX_CHARS + 1) not in body

    def test_without_notes_there_is_no_section(self) -> None:
        body = progress.render_comment(view(self.noted("")))
        assert "Progress notes" not in body and "\n\n\n" not in body


def test_duration_formats() -> None:
    step = progress.Step("n", "a", 0, "Succeeded", T0, T0 + dt.timedelta(hours=2, minutes=5))
    assert progress.duration(step) == "2h 5m"
    assert progress.duration(progress.Step("n", "a", 0, "Pending", None, None)) == "—"


@given(st.text(min_size=1), st.text())
def test_no_agent_text_is_live_outside_its_code_block(result: str, reason: str) -> None:
    """Whatever a job printed (and whatever its message says), the comment's Markdown
    outside the code block holds no live mention, reference or HTML of its making."""
    last = ended("r", "reviewer", 0, "Succeeded", 1, chainComplete=True, result=result)
    last.job.status.message = reason
    body = progress.render_comment(view(last))
    head, _, rest = body.partition("```")
    fence_len = 3 + len(rest) - len(rest.lstrip("`"))
    fence = "`" * fence_len
    _, _, tail = rest[fence_len - 3 :].partition("\n" + fence)
    outside = head + tail
    ours = outside.replace(progress.marker("team-a", "c-123"), "")
    ours = ours.replace("<sub>", "").replace("</sub>", "")
    assert "<" not in ours and not re.search("@[^\u200b]", ours)
    assert not re.search("#[^\u200b]", ours.replace("#\u200b", ""))


def round_job(name: str, agent: str, number: int, phase: str, **status: Any) -> progress.JobRecord:
    event = {"source": "github", "continues": "c-123", "round": number, "number": 7}
    parsed = AgentJob.model_validate(
        {
            "spec": {"agentRole": agent, "event": event},
            "status": {"chainDepth": 0, **status, "phase": phase},
        }
    )
    return progress.JobRecord(name, "2026-11-25T02:00:00Z", parsed)


class TestRounds:
    """A follow-up round's jobs show in the chain they continue: after its own jobs, named
    by round, and the chain's state is the latest round's."""

    def test_a_running_round_makes_the_chain_run_again(self) -> None:
        done = ended("d", "dev", 0, "Succeeded", 5, chainComplete=True)
        running = round_job("r1", "dev", 1, "Running", startTime=T0.isoformat())
        shown = view(running, done)
        assert shown.state == "running"
        assert [(s.name, s.agent) for s in shown.steps] == [("d", "dev"), ("r1", "dev (round 1)")]
        assert "| 2 | dev (round 1) | ⏳ Running |" in progress.render_comment(shown)

    def test_the_latest_round_decides_the_end(self) -> None:
        done = ended("d", "dev", 0, "Succeeded", 5, chainComplete=True)
        failed_round = round_job("r1", "dev", 1, "Failed", chainComplete=True)
        assert view(done, failed_round).state == "failed"
        fixed = round_job("r2", "dev", 2, "Succeeded", chainComplete=True, result="Fixed it.")
        final = view(fixed, done, failed_round)
        assert final.state == "succeeded" and final.outcome == "Fixed it."
        assert [s.name for s in final.steps] == ["d", "r1", "r2"]
