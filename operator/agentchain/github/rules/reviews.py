"""A reviewer agent's verdict as a GitHub pull request review: pure, from its output.

An AiAgent with ``spec.github.review: true`` ends its output with a fenced block whose
info string is ``agentchain-review``, holding one JSON object::

    ```agentchain-review
    {"verdict": "request_changes",
     "body": "The fix is right; two details.",
     "comments": [{"path": "README.md", "line": 1, "side": "RIGHT", "body": "Typo."}]}
    ```

``verdict`` is ``approve``, ``comment`` or ``request_changes``; ``body`` and
``comments`` are optional; a comment's ``side`` is ``RIGHT`` (the new file, the
default) or ``LEFT`` (the old one); a comment on several lines names the first with
``start_line`` (before ``line``, on the same side).  The last such block outside other
code blocks counts, like the hand-off section, so an agent that quotes an example first
and gives its own verdict after is read right.  The same object can come through the
job API instead (``PUT /api/jobs/{ns}/{name}/review``, the ``review`` MCP tool):
:func:`parse_sent` reads it with the same rules.

The output is untrusted text, so :func:`parse` scans it once, line by line (linear in
its length), refuses a block over :data:`MAX_BLOCK_CHARS` before decoding it, and
keeps at most :data:`MAX_COMMENTS` comments of bounded size; whatever does not fit
the format is :class:`Malformed` with a reason, never an exception.

:func:`diff_lines` reads GitHub's patch hunks (``pulls/list-files``) into the lines a
review comment may be anchored to (added and context lines on the RIGHT, removed and
context lines on the LEFT).  :func:`place` then builds the review GitHub is sent: each
comment on such a line (a multi-line comment: every line of its range, so the range is
within one hunk, as GitHub requires) stays inline, every other one is folded into the
review body
(never dropped, never sent to be refused), and every piece of agent text goes through
``github/rules/markdown.py`` like the rest of the write-back.  The body opens with a
hidden marker naming the job (:func:`marker`), by which the operator finds its review
again after a crash between creating it and recording it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agentchain.github.rules import markdown

FENCE_INFO = "agentchain-review"
MAX_BLOCK_CHARS = 64_000
MAX_COMMENTS = 50
MAX_BODY_CHARS = 20_000
MAX_COMMENT_CHARS = 4_000
MAX_PATH_CHARS = 1_024
MAX_LINE = 10_000_000
MAX_REVIEW_CHARS = 60_000
"""GitHub refuses a review body over 65,536 characters; folded comments stop short of it."""
MARKER_PREFIX = "<!-- agentchain:review="
Side = Literal["LEFT", "RIGHT"]
EVENTS = {"approve": "APPROVE", "comment": "COMMENT", "request_changes": "REQUEST_CHANGES"}
_TITLES = {"approve": "Approve", "comment": "Comment", "request_changes": "Request changes"}
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HUNK = re.compile(r"^@@ -(\d{1,9})(?:,(\d{1,9}))? \+(\d{1,9})(?:,(\d{1,9}))? @@")


@dataclass(frozen=True)
class InlineComment:
    path: str
    line: int
    side: Side
    body: str
    start_line: int | None = None
    """A multi-line comment's first line (before ``line``, on the same side)."""

    def lines(self) -> range:
        return range(self.start_line or self.line, self.line + 1)


@dataclass(frozen=True)
class Review:
    verdict: str
    """approve, comment or request_changes."""
    body: str
    comments: tuple[InlineComment, ...]


@dataclass(frozen=True)
class Malformed:
    """An ``agentchain-review`` block that is not a review; ``reason`` says why."""

    reason: str


@dataclass(frozen=True)
class Placed:
    """What ``pulls/create-review`` is sent."""

    event: str
    body: str
    comments: tuple[dict[str, Any], ...]
    folded: int
    """Comments on lines outside the diff, now in the body."""


def marker(namespace: str, job: str) -> str:
    """The hidden first line of a job's review (namespace and job are DNS-safe)."""
    return f"{MARKER_PREFIX}{namespace}/{job} -->"


def heading(namespace: str, job: str, agent: str) -> str:
    """The marker and the review's first line: which agent's job reviews."""
    who = f"{markdown.inline(agent, 63)} ({markdown.inline(job, 253)})"
    return f"{marker(namespace, job)}\n**agentchain** review by {who}"


def find_block(output: str) -> str | None:
    """The text of the last top-level ``agentchain-review`` block of ``output``."""
    found: str | None = None
    fence: str | None = None
    ours = False
    start = 0
    lines = output.split("\n")
    for index, line in enumerate(lines):
        opened = _FENCE.match(line)
        if fence is None:
            if opened:
                fence, start = opened.group(1), index + 1
                ours = opened.group(2).strip() == FENCE_INFO
            continue
        closes = opened and opened.group(1).startswith(fence) and not opened.group(2).strip()
        if closes:
            if ours:
                found = "\n".join(lines[start:index])
            fence, ours = None, False
    return found


def parse(output: str) -> Review | Malformed | None:
    """The review in ``output``; None when it has no ``agentchain-review`` block."""
    block = find_block(output)
    if block is None:
        return None
    if len(block) > MAX_BLOCK_CHARS:
        return Malformed(f"the review block is over {MAX_BLOCK_CHARS} characters")
    try:
        data = json.loads(block)
    except (ValueError, RecursionError):
        return Malformed("the review block is not one JSON object")
    if not isinstance(data, dict):
        return Malformed("the review block is not one JSON object")
    return _review(data)


def parse_sent(text: str) -> Review | Malformed:
    """A review sent through the job API, as kept (its JSON text): the block's rules."""
    if len(text) > MAX_BLOCK_CHARS:
        return Malformed(f"the review is over {MAX_BLOCK_CHARS} characters")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return Malformed("the review is not one JSON object")
    if not isinstance(data, dict):
        return Malformed("the review is not one JSON object")
    return _review(data)


def _review(data: Mapping[str, Any]) -> Review | Malformed:
    verdict = data.get("verdict")
    if verdict not in EVENTS:
        return Malformed("verdict must be approve, comment or request_changes")
    body = data.get("body", "")
    raw = data.get("comments", [])
    if not isinstance(body, str) or not isinstance(raw, list):
        return Malformed("body must be text and comments a list")
    if len(raw) > MAX_COMMENTS:
        return Malformed(f"more than {MAX_COMMENTS} comments")
    comments = []
    for number, item in enumerate(raw, 1):
        comment = _comment(item)
        if isinstance(comment, str):
            return Malformed(f"comment {number}: {comment}")
        comments.append(comment)
    return Review(str(verdict), body[:MAX_BODY_CHARS], tuple(comments))


def _comment(item: object) -> InlineComment | str:
    """One comment, or why it is not one."""
    if not isinstance(item, dict):
        return "not an object"
    path, line = item.get("path"), item.get("line")
    side, body = item.get("side", "RIGHT"), item.get("body")
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS:
        return f"path must be a file's path of at most {MAX_PATH_CHARS} characters"
    if isinstance(line, bool) or not isinstance(line, int) or not 0 < line <= MAX_LINE:
        return "line must be a positive line number"
    if side not in ("LEFT", "RIGHT"):
        return "side must be LEFT or RIGHT"
    if not isinstance(body, str) or not body.strip():
        return "body must be non-empty text"
    start = _start_line(item, line, side)
    if isinstance(start, str):
        return start
    return InlineComment(path, line, side, body[:MAX_COMMENT_CHARS], start)


def _start_line(item: Mapping[str, Any], line: int, side: str) -> int | str | None:
    """A multi-line comment's first line (None: one line), or why it is not one."""
    start = item.get("start_line")
    if start is None:
        return None
    if isinstance(start, bool) or not isinstance(start, int) or not 0 < start < line:
        return "start_line must be a line number before line"
    if item.get("start_side", side) != side:
        return "start_side must be the side of line"
    return start


def diff_lines(patch: str) -> frozenset[tuple[Side, int]]:
    """The (side, line) pairs of a file's patch a review comment may be anchored to."""
    found: set[tuple[Side, int]] = set()
    old = new = old_left = new_left = 0
    for line in patch.split("\n"):
        hunk = _HUNK.match(line)
        if hunk:
            old, new = int(hunk.group(1)), int(hunk.group(3))
            old_left = int(hunk.group(2) or 1)
            new_left = int(hunk.group(4) or 1)
            continue
        if line.startswith("\\") or (old_left <= 0 and new_left <= 0):
            continue  # "\ No newline at end of file", or outside any hunk.
        if line.startswith("+") and new_left > 0:
            found.add(("RIGHT", new))
            new, new_left = new + 1, new_left - 1
        elif line.startswith("-") and old_left > 0:
            found.add(("LEFT", old))
            old, old_left = old + 1, old_left - 1
        elif old_left > 0 and new_left > 0:  # Context (" ", or an empty line).
            found.update({("LEFT", old), ("RIGHT", new)})
            old, new, old_left, new_left = old + 1, new + 1, old_left - 1, new_left - 1
    return frozenset(found)


def commentable(files: Iterable[tuple[str, str | None]]) -> dict[str, frozenset[tuple[Side, int]]]:
    """Per file name, its commentable lines (``files``: name and patch, None when
    GitHub shows none, as for a binary or very large file)."""
    return {name: diff_lines(patch) if patch else frozenset() for name, patch in files}


def _text(text: str, allow_mentions: bool) -> str:
    return markdown.markdown(text) if allow_mentions else markdown.code_block(text)


def place(
    review: Review,
    lines: Mapping[str, frozenset[tuple[Side, int]]],
    *,
    title: str,
    own_pull: bool,
    allow_mentions: bool = False,
) -> Placed:
    """The review to send: inline comments on diff lines, the others folded into the
    body.  ``title`` opens the body (the marker and who reviews: :func:`heading`);
    ``own_pull``: the App opened this pull request, and GitHub lets nobody approve or
    request changes on their own, so the verdict is then said in a plain comment's body."""
    inline, folded = [], []
    for c in review.comments:
        if _in_diff(c, lines.get(c.path, frozenset())):
            anchor: dict[str, Any] = {"path": c.path, "line": c.line, "side": c.side}
            if c.start_line is not None:
                anchor.update(start_line=c.start_line, start_side=c.side)
            inline.append({**anchor, "body": _text(c.body, allow_mentions)})
        else:
            folded.append(c)
    event = EVENTS[review.verdict]
    parts = [f"{title} · **{_TITLES[review.verdict]}**"]
    if own_pull and event != "COMMENT":
        parts.append(
            "_GitHub lets no one approve or request changes on their own pull request: "
            "this verdict is given as a comment._"
        )
        event = "COMMENT"
    if review.body.strip():
        parts.append(_text(review.body, allow_mentions))
    parts.append(_folded(folded, allow_mentions, MAX_REVIEW_CHARS - sum(map(len, parts))))
    body = "\n\n".join(p for p in parts if p) + "\n"
    return Placed(event, body, tuple(inline), len(folded))


def _in_diff(comment: InlineComment, lines: frozenset[tuple[Side, int]]) -> bool:
    """Whether every line the comment is on is a line of the diff, on its side: for a
    range, that keeps it within one hunk.  A range longer than the file's diff lines is
    not looked at line by line (it cannot fit), so the cost stays the diff's size."""
    span = comment.lines()
    if len(span) > len(lines):
        return False
    return all((comment.side, n) in lines for n in span)


def _folded(comments: list[InlineComment], allow_mentions: bool, room: int) -> str:
    """The comments on lines outside the diff, as much of them as ``room`` holds."""
    if not comments:
        return ""
    parts = ["**Comments on lines outside the diff**"]
    used = len(parts[0])
    for index, c in enumerate(comments):
        at = f"lines {c.start_line} to {c.line}" if c.start_line else f"line {c.line}"
        where = f"{markdown.inline(c.path, 200)}, {at} ({c.side.lower()} side):"
        text = f"{where}\n\n{_text(c.body, allow_mentions)}"
        if used + len(text) + 2 > room:
            parts.append(f"… and {len(comments) - index} more, too long to show.")
            break
        parts.append(text)
        used += len(text) + 2
    return "\n\n".join(parts)
