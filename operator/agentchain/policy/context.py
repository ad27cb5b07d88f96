"""The ``<chain-context>`` block that carries a parent's output into its child's prompt.

SPEC §2 fixes the shape exactly::

    <chain-context>\\nPrevious agent output:\\n<body>\\n</chain-context>\\n\\n<prompt>

and this module is the only place that builds it, as three small pure steps so
each can be tested on its own:

* :func:`neutralise` makes any text that reads as a ``chain-context`` tag inert
  by replacing its ``<`` with U+2039 (single left-pointing angle quotation
  mark).  The swap is one character for one, so lengths and cut counts are the
  same before and after, and it is visible to a human reading the prompt.  It
  matches every letter case, whitespace and
  invisible format characters (zero-width space, joiner, BOM...) around ``<``,
  ``/`` and between ``chain`` and ``context``, ``_`` or ``-`` or nothing as the
  separator, and does not need a ``>``: ``</chain-context`` alone could already
  persuade a model that the block ended.  It runs on the whole output before
  cutting, so a tag that straddles the cut is inert too.
* :func:`cut_output` keeps at most ``limit`` characters, the last ones (``tail``,
  the default: agents print their conclusion last) or the first ones (``head``).
  Python strings are sequences of code points, so slicing can never split a
  UTF-8 sequence: the result always encodes to valid UTF-8.  It can separate a
  combining mark or an emoji ZWJ sequence from its neighbours at the cut edge;
  that costs at most one visible glyph and is not worth a grapheme library.
  Output must reach here already decoded (``errors="replace"``).
* :func:`chain_context_block` assembles the block.  The "cut" marker line and
  the "could not be captured" line are outside the ``limit`` characters, so the
  child always gets the full budget of real output.
"""

from __future__ import annotations

import re

from agentchain.models.aiagent import ContextWindow

CONTEXT_LIMIT = 4000
DEFAULT_HEADING = "Previous agent output:"
OPEN_TAG = "<chain-context>"
CLOSE_TAG = "</chain-context>"
INERT_BRACKET = "\u2039"  # Replaces the < of any tag-like text in the output.
DEFAULT_LOST_REASON = "no output was captured"

_GAP = r"[\s\u200b-\u200f\u2060-\u2064\ufeff]*"
_TAG_LIKE = re.compile(
    rf"<(?={_GAP}[/\\]*{_GAP}chain{_GAP}[-_]?{_GAP}context)",
    re.IGNORECASE,
)


def neutralise(text: str) -> str:
    """``text`` with every ``chain-context``-like tag opener turned into U+2039."""
    return _TAG_LIKE.sub(INERT_BRACKET, text)


def cut_output(text: str, window: ContextWindow, limit: int = CONTEXT_LIMIT) -> tuple[str, int]:
    """Keep at most ``limit`` characters of ``text``; return them and how many were cut."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, not {limit}")
    cut = max(len(text) - limit, 0)
    if window == "tail":
        return text[cut:], cut
    if window == "head":
        return text[: len(text) - cut], cut
    raise ValueError(f"unknown context window {window!r}")


def cut_marker(cut: int, window: ContextWindow) -> str:
    """The visible line saying how much was cut and from which end."""
    unit = "character" if cut == 1 else "characters"
    end = "start" if window == "tail" else "end"
    return f"[… {cut} {unit} cut from the {end} of the output …]"


def chain_context_block(
    output: str | None,
    *,
    window: ContextWindow,
    lost_reason: str | None = None,
    limit: int = CONTEXT_LIMIT,
    heading: str = DEFAULT_HEADING,
) -> str:
    """The whole block, ending in a blank line, ready to go in front of a prompt.

    ``output=None`` or a ``lost_reason`` puts a line saying the output could not
    be captured and why: a child must never mistake lost output for silence.  An
    empty ``output`` (the parent printed nothing) gives an empty body.  When both
    some output and a reason are given (a partial capture), both appear.
    """
    lines: list[str] = []
    if output is None or lost_reason is not None:
        reason = lost_reason or DEFAULT_LOST_REASON
        lines.append(f"[output could not be captured: {neutralise(reason)}]")
    # The output's own final newline(s) would leave a blank line before the
    # closing tag; seed 003's example block has none.
    output = output.rstrip("\n") if output else output
    if output:
        lines.append(_body(output, window, limit))
    body = "\n".join(lines)
    return f"{OPEN_TAG}\n{neutralise(heading)}\n{body}\n{CLOSE_TAG}\n\n"


def _body(output: str, window: ContextWindow, limit: int) -> str:
    kept, cut = cut_output(neutralise(output), window, limit)
    if not cut:
        return kept
    marker = cut_marker(cut, window)
    return f"{marker}\n{kept}" if window == "tail" else f"{kept}\n{marker}"


def with_chain_context(block: str, prompt: str) -> str:
    """The child's prompt: the block, then its original prompt."""
    return block + prompt
