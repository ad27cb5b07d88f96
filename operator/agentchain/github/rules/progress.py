"""A chain as GitHub shows it: one comment and one Check Run, rendered from its jobs.

Pure: the write-back worker (``github/writeback.py``) lists the chain's AgentJobs and
hands them here; what comes back is the comment body and the Check Run fields, and
the worker only sends them.  The render is a function of recorded state only (no
clock): a step still running shows when it started, not for how long, so the same
chain renders the same text until something really changes, and a re-render after a
restart or a redelivery compares equal to what was written and costs no edit.

The comment opens with a hidden marker naming the chain (:func:`marker`), which is
how the operator finds its own comment again when the record of its id was lost
(a crash between creating it and recording it).

Every piece of text that did not come from the operator goes through
``github/rules/markdown.py``: agent output in a code block (or, when the agent allows
mentions, as Markdown with HTML escaped), everything else as escaped inline text.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from agentchain.github.rules import markdown
from agentchain.models.agentjob import AgentJob
from agentchain.models.aiagent import DEFAULT_HANDOFF_HEADING
from agentchain.prompts.rules.assembly import extract_handoff

ChainState = Literal["queued", "running", "succeeded", "failed", "stopped"]
OUTCOME_MAX_CHARS = 4000
NOTE_MAX_CHARS = 300
"""A progress note's limit: the API refuses longer ones, the render cuts any that are."""
MAX_ROWS = 50
SUMMARY_MAX_CHARS = 60_000
"""GitHub's limit for a Check Run summary is 65,535 characters."""
MARKER_PREFIX = "<!-- agentchain:chain="
CONCLUSIONS: dict[ChainState, str] = {
    "succeeded": "success",
    "failed": "failure",
    "stopped": "neutral",
}
_ICONS = {"Succeeded": "✅", "Failed": "❌", "Running": "⏳", "Skipped": "⏭️"}
_TITLES: dict[ChainState, str] = {
    "queued": "Queued",
    "running": "Running",
    "succeeded": "Succeeded",
    "failed": "Failed",
    "stopped": "Stopped",
}


@dataclass(frozen=True)
class JobRecord:
    """One AgentJob as listed: its name, creation time and parsed body."""

    name: str
    created: str
    job: AgentJob
    note: str | None = None
    """The last progress note its agent sent (the AgentJob's annotation), if any."""


@dataclass(frozen=True)
class Step:
    name: str
    agent: str
    depth: int
    phase: str
    started: dt.datetime | None
    ended: dt.datetime | None
    note: str | None = None
    reason: str | None = None
    """Why it ended, for an end that is not a plain success (``ModelRateLimited``, ...)."""


@dataclass(frozen=True)
class ChainView:
    namespace: str
    chain_id: str
    steps: tuple[Step, ...]
    state: ChainState
    outcome: str | None = None
    outcome_job: str | None = None
    outcome_truncated: bool = False
    outcome_agent: str | None = None

    @property
    def done(self) -> bool:
        return self.state in CONCLUSIONS


def marker(namespace: str, chain_id: str) -> str:
    """The hidden first line of a chain's comment (namespace and chain id are DNS-safe)."""
    return f"{MARKER_PREFIX}{namespace}/{chain_id} -->"


def external_id(namespace: str, chain_id: str) -> str:
    """The Check Run's ``external_id``: how the operator finds its run again."""
    return f"agentchain:{namespace}/{chain_id}"


def chain_view(
    namespace: str,
    chain_id: str,
    jobs: Sequence[JobRecord],
    handoff_heading: str = DEFAULT_HANDOFF_HEADING,
    headings: Mapping[str, str] | None = None,
) -> ChainView:
    """The chain as its comment and Check Run show it.  Its outcome is the last job's
    hand-off section under that job's own agent's heading (``headings``, by trigger name),
    else ``handoff_heading``: a reviewer after a triage may name its section differently."""
    ordered = sorted(
        jobs, key=lambda r: (_round(r), r.job.status.chain_depth or 0, r.created, r.name)
    )
    steps = tuple(_step(r) for r in ordered)
    # The chain as it is now is its latest round's (a follow-up on its pull request): a
    # round that has not ended makes it run again, whatever the chain ended as before.
    latest = [r for r in ordered if _round(r) == (_round(ordered[-1]) if ordered else 0)]
    last = next((r for r in reversed(latest) if r.job.status.chain_complete), None)
    if last is None:
        started = any(s.started is not None or s.phase not in ("Pending", "Waiting") for s in steps)
        return ChainView(namespace, chain_id, steps, "running" if started else "queued")
    agent = last.job.spec.agent_role
    outcome, cut = _outcome(last.job, (headings or {}).get(agent, handoff_heading))
    state = _final_state(last.job)
    return ChainView(namespace, chain_id, steps, state, outcome, last.name, cut, agent)


def _round(record: JobRecord) -> int:
    """The follow-up round a job belongs to (0: the chain's own jobs)."""
    event = record.job.spec.event
    return event.round or 0 if event is not None and event.continues else 0


def _step(record: JobRecord) -> Step:
    status = record.job.status
    number = _round(record)
    return Step(
        record.name,
        record.job.spec.agent_role + (f" (round {number})" if number else ""),
        status.chain_depth or 0,
        status.phase or "Pending",
        status.start_time,
        status.completion_time,
        record.note or None,
        status.reason if status.phase in _EXPLAINED and status.reason != status.phase else None,
    )


_EXPLAINED = frozenset({"Failed", "Cancelled", "Skipped"})
"""Phases whose row names its reason: a failure, a stop or a skip says which."""


def _final_state(job: AgentJob) -> ChainState:
    status = job.status
    if status.phase == "Failed":
        return "failed"
    if status.next and status.next[-1].action == "stopped":
        return "stopped"
    return "succeeded"


def _outcome(job: AgentJob, heading: str) -> tuple[str | None, bool]:
    """The last job's hand-off section, else its result; at most OUTCOME_MAX_CHARS (the end)."""
    result = job.status.result
    if not result:
        return None, False
    text = extract_handoff(result, heading) or result
    cut = bool(job.status.result_truncated) or len(text) > OUTCOME_MAX_CHARS
    return text[-OUTCOME_MAX_CHARS:], cut


def duration(step: Step) -> str:
    if step.started is None:
        return "—"
    if step.ended is None:
        return f"since {step.started.astimezone(dt.UTC):%H:%M:%S} UTC"
    seconds = max(0, int((step.ended - step.started).total_seconds()))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def _row(index: int, step: Step, view: ChainView, dashboard_url: str) -> str:
    name = markdown.inline(step.name, 253)
    if dashboard_url:
        name = f"[{name}]({dashboard_url.rstrip('/')}/ui/jobs/{view.namespace}/{step.name})"
    phase = f"{_ICONS.get(step.phase, '•')} {markdown.inline(step.phase, 20)}"
    if step.reason:
        phase += f" ({markdown.inline(step.reason, 60)})"
    agent = markdown.inline(step.agent, 80)
    return f"| {index} | {agent} | {phase} | {duration(step)} | {name} |"


def table(view: ChainView, dashboard_url: str = "") -> str:
    lines = ["| Step | Agent | Phase | Duration | Job |", "|---:|---|---|---|---|"]
    shown = view.steps[:MAX_ROWS]
    lines += [_row(i + 1, s, view, dashboard_url) for i, s in enumerate(shown)]
    if len(view.steps) > MAX_ROWS:
        lines.append(f"\n… and {len(view.steps) - MAX_ROWS} more jobs.")
    return "\n".join(lines)


def notes_section(view: ChainView) -> str:
    """The agents' progress notes, one line per job that sent one (empty without any).

    A note is the agent's text, so it is data here as everywhere: one escaped line,
    no Markdown, no HTML, no mention or link, whatever ``allowMentions`` says (that
    opt-in covers the chain's result, not running commentary).
    """
    lines = [
        f"- {markdown.inline(s.agent, 63)} ({markdown.inline(s.name, 253)}): "
        f"{markdown.inline(s.note, NOTE_MAX_CHARS)}"
        for s in view.steps[:MAX_ROWS]
        if s.note
    ]
    return "**Progress notes**\n\n" + "\n".join(lines) if lines else ""


def outcome_section(view: ChainView, *, allow_mentions: bool) -> str:
    if not view.done:
        return "_The result appears here when the chain ends._"
    if view.outcome is None:
        return "_The last job left no output._"
    source = markdown.inline(view.outcome_agent or "", 63)
    source += f" ({markdown.inline(view.outcome_job or '', 253)})"
    cut = f" (the last {OUTCOME_MAX_CHARS} characters)" if view.outcome_truncated else ""
    text = markdown.markdown(view.outcome) if allow_mentions else markdown.code_block(view.outcome)
    return f"**Result** of {source}{cut}:\n\n{text}"


def render_comment(
    view: ChainView,
    *,
    dashboard_url: str = "",
    allow_mentions: bool = False,
    trace: str = "",
    trace_url: str | None = None,
) -> str:
    """The chain's comment: marker, state, one row per job, and the outcome; with
    ``trace`` (the chain's trace id, when the operator traces) a line naming it, linked
    to ``trace_url`` when a viewer is configured."""
    title = (
        f"**agentchain** · chain {markdown.inline(view.chain_id, 80)} · **{_TITLES[view.state]}**"
    )
    if dashboard_url:
        base = dashboard_url.rstrip("/")
        title += f" · [dashboard]({base}/ui/chains/{view.namespace}/{view.chain_id})"
    if trace:
        shown = f"`{markdown.inline(trace, 32)}`"
        link = (trace_url or "").replace(" ", "%20").replace(")", "%29")
        title += f" · trace [{shown}]({link})" if link else f" · trace {shown}"
    parts = [
        marker(view.namespace, view.chain_id),
        title,
        table(view, dashboard_url),
        notes_section(view),
        outcome_section(view, allow_mentions=allow_mentions),
        "<sub>This comment is kept up to date by agentchain while the chain runs.</sub>",
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


@dataclass(frozen=True)
class CheckRunFields:
    status: Literal["queued", "in_progress", "completed"]
    conclusion: str | None
    title: str
    summary: str

    def body(self) -> dict[str, object]:
        """The fields of ``checks/create`` and ``checks/update`` this run sets."""
        fields: dict[str, object] = {
            "status": self.status,
            "output": {"title": self.title, "summary": self.summary},
        }
        if self.conclusion is not None:
            fields["conclusion"] = self.conclusion
        return fields


def check_run(
    view: ChainView, *, dashboard_url: str = "", allow_mentions: bool = False
) -> CheckRunFields:
    """The Check Run of a chain: queued → in_progress → completed with a conclusion."""
    summary = "\n\n".join(
        [table(view, dashboard_url), outcome_section(view, allow_mentions=allow_mentions)]
    )
    title = f"Chain {view.chain_id}: {_TITLES[view.state]}"
    if view.done:
        return CheckRunFields(
            "completed", CONCLUSIONS[view.state], title, summary[:SUMMARY_MAX_CHARS]
        )
    status: Literal["queued", "in_progress"] = "queued" if view.state == "queued" else "in_progress"
    return CheckRunFields(status, None, title, summary[:SUMMARY_MAX_CHARS])
