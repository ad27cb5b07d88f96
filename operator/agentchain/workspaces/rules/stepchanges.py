"""What a workspace step changed, as the next step's ``<chain-context>`` shows it.

The ``workspace-report`` container (``agentchain workspace report``, run after the agent
in the same pod, see ``workspaces/rules/jobmounts.py``) prints one JSON line: the base commit, the
head, whether there are new commits, ``git diff --stat``-like text and counts.  The
operator reads the end of that container's log; everything in it comes from a
repository an agent wrote to (file names, commit ids), so it is untrusted data:

* :func:`parse_report` takes the last line that is a JSON object, from at most
  :data:`REPORT_READ_BYTES`, and keeps only the known fields of the expected types
  (numbers bounded, text cut);
* :func:`changes_section` renders them as a few plain lines, at most
  :data:`SECTION_LIMIT` characters; the ``<chain-context>`` block neutralises it like
  the parent's output (``prompts/rules/chaincontext.py``) and keeps it apart from that output,
  under its own heading.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

REPORT_READ_BYTES = 16 * 1024
"""The end of the report container's log that is read (its line is at most 4 KiB)."""
SECTION_LIMIT = 3000
"""Characters of the rendered section (the stat text is cut to fit, visibly)."""
_MAX_COUNT = 10**12
_SHA_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Report:
    """The known fields of a report line, checked."""

    base: str = ""
    head: str = ""
    committed: bool = False
    commits: int = 0
    files_changed: int = 0
    insertions: int = 0
    deletions: int = 0
    stat: str = ""
    uncommitted: int = 0
    untracked: int = 0


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(0, min(value, _MAX_COUNT))


def _sha(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 64 or not set(value) <= _SHA_CHARS:
        return ""
    return value


def _last_object(text: str) -> dict[str, Any] | None:
    for line in reversed(text[-REPORT_READ_BYTES:].splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return None


def parse_report(text: str) -> Report | None:
    """The report in the end of the container's log ``text``; None when there is none."""
    found = _last_object(text)
    if found is None:
        return None
    stat = found.get("stat")
    return Report(
        base=_sha(found.get("base")),
        head=_sha(found.get("head")),
        committed=found.get("committed") is True,
        commits=_count(found.get("commits")),
        files_changed=_count(found.get("files_changed")),
        insertions=_count(found.get("insertions")),
        deletions=_count(found.get("deletions")),
        stat=stat[:SECTION_LIMIT] if isinstance(stat, str) else "",
        uncommitted=_count(found.get("uncommitted")),
        untracked=_count(found.get("untracked")),
    )


def _summary(report: Report) -> str:
    base = report.base[:12] or "unknown"
    if report.committed:
        head = report.head[:12] or "unknown"
        commits = f"{report.commits} new commit{'s' if report.commits != 1 else ''}"
        committed = f"committed: yes ({commits}, {base}..{head})"
    else:
        committed = f"committed: no (still at {base})"
    files = (
        f"{report.files_changed} file{'s' if report.files_changed != 1 else ''} changed, "
        f"{report.insertions} insertions(+), {report.deletions} deletions(-)"
    )
    pending = f"uncommitted: {report.uncommitted} files, untracked: {report.untracked} files"
    return f"{committed}\n{files}\n{pending}"


def changes_section(report: Report | None, lost: str | None = None) -> str:
    """The section's body (without its heading), at most :data:`SECTION_LIMIT` characters."""
    if report is None:
        return f"[no workspace report: {lost or 'the report container printed none'}]"
    summary = _summary(report)
    stat = report.stat.rstrip("\n")
    room = SECTION_LIMIT - len(summary) - 1
    if not stat:
        return summary
    if len(stat) > room:
        marker = "\n[… file list cut …]"
        stat = stat[: max(room - len(marker), 0)] + marker
    return f"{summary}\n{stat}"


# --- publishing: the publish container's line and the pull request ---------------------------
PUBLISH_OUTCOMES = frozenset(
    {"pushed", "already", "unchanged", "refused", "denied", "transient", "rejected"}
)


def publish_outcome(text: str) -> str | None:
    """The ``outcome`` of ``agentchain workspace publish``'s line (None: none readable)."""
    found = _last_object(text)
    outcome = found.get("outcome") if found is not None else None
    return outcome if isinstance(outcome, str) and outcome in PUBLISH_OUTCOMES else None


def pull_title(chain_id: str, issue: int | None) -> str:
    return f"agentchain: chain {chain_id}" + (f" for #{issue}" if issue else "")


PULL_BACKOFF_CAP_SECONDS = 600.0
PULL_GIVE_UP_SECONDS = 24 * 3600.0
"""A pull request GitHub kept failing to open for a day is given up, and reported."""


def pull_retry_wait(
    *,
    final: bool,
    retry_after: float | None,
    first_wait: float,
    attempts: int,
    since: float,
    now: float,
) -> float | None:
    """Seconds until a pull request GitHub failed to open is tried again, or None to give
    it up: the failure is ``final`` (trying again cannot help), or GitHub has failed for
    :data:`PULL_GIVE_UP_SECONDS` since the first try.  GitHub's ``retry_after`` when it
    gave one, else a back-off doubling from ``first_wait`` (after ``attempts`` tries) up
    to :data:`PULL_BACKOFF_CAP_SECONDS`."""
    if final or now - since >= PULL_GIVE_UP_SECONDS:
        return None
    if retry_after is not None:
        return max(1.0, retry_after)
    return min(PULL_BACKOFF_CAP_SECONDS, first_wait * 2.0 ** (attempts - 1))


def pull_body(chain_id: str, branch: str, issue: int | None, steps: list[tuple[str, str]]) -> str:
    """The pull request's body: the issue it closes and the chain's steps (agent, phase).

    Only names the operator checked (triggerNames, phases) and numbers go in: no agent
    output, so nothing in it can mention people or close other issues.
    """
    lines = [f"Chain `{chain_id}` published its workspace to `{branch}`."]
    if issue:
        lines += ["", f"Closes #{issue}"]
    if steps:
        lines += ["", "| Step | Agent | Phase |", "|---|---|---|"]
        lines += [f"| {i} | `{agent}` | {phase} |" for i, (agent, phase) in enumerate(steps, 1)]
    return "\n".join(lines) + "\n"
