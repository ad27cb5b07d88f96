"""The ``<chain-context>`` block that carries a parent's output into its child's prompt.

SPEC §2 fixes the shape exactly::

    <chain-context>\\nPrevious agent output:\\n<body>\\n</chain-context>\\n\\n<prompt>

and this module is the only place that builds it, as three small pure steps so
each can be tested on its own:

* :func:`neutralise` makes any text that reads as a ``chain-context`` tag inert
  by replacing its opening character (``<`` or a lookalike) with U+2039 (single
  left-pointing angle quotation mark).  The swap is one character for one, so
  lengths and cut counts are the same before and after, and it is visible to a
  human reading the prompt.  *Reads as a tag* is defined on characters folded by
  :mod:`agentchain.prompts.rules.textfold` (NFKD, case folding, a table of lookalikes;
  whitespace, invisible characters and combining marks read as nothing; tag
  characters read once as nothing and once as the ASCII they encode): ``<``, any
  number of ``/`` or ``\\``, ``chain``, any number of ``-`` or ``_``, ``context``.
  No ``>`` is needed: ``</chain-context`` alone could already persuade a model
  that the block ended, and attributes do not hide a tag.  Opening and closing
  tags are both neutralised.  Each reading is one left-to-right pass that looks at
  each character a bounded number of times and skips runs of gaps in C: linear in
  the text (the regular expression it replaces was quadratic).
* The block neutralises only the characters it keeps (:func:`neutralise_part`),
  which gives the same characters as neutralising the whole output first; the
  last tag may straddle the cut and is still found, so it is inert too.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agentchain.models.aiagent import ContextWindow
from agentchain.prompts.rules import assembly, textfold

CONTEXT_LIMIT = 4000
DEFAULT_HEADING = "Previous agent output:"
OPEN_TAG = "<chain-context>"
CLOSE_TAG = "</chain-context>"
INERT_BRACKET = textfold.INERT  # Replaces the < of any tag-like text in the output.
DEFAULT_LOST_REASON = "no output was captured"
WORKSPACE_HEADING = "Workspace changes (git, against the chain's base commit):"

# The tag, as read after folding (see prompts/rules/textfold.py): ``<``, any slashes, "chain",
# any separators, "context".  Gaps (whitespace, invisible characters) are skipped
# everywhere.  States count what has been read after ``<``; _ACCEPT is the whole name.
_STEP: dict[tuple[int, str], int] = {(0, "/"): 0, (0, "\\"): 0, (5, "-"): 5, (5, "_"): 5}
_STEP.update({(i, ch): i + 1 for i, ch in enumerate("chain")})
_STEP.update({(5 + i, ch): 6 + i for i, ch in enumerate("context")})
_ACCEPT = 12
_TAG_CHARS = re.compile(f"[{textfold.TAG_CHAR_CLASS}]")


@dataclass(frozen=True)
class _Reading:
    """One way of reading the whole text: what each character reads as, and the runs
    of characters that leave a state unchanged, skipped in C (slashes after ``<``,
    separators after "chain", gaps everywhere)."""

    read: Callable[[str], str]
    openers: re.Pattern[str]
    skip: dict[int, re.Pattern[str]]

    @classmethod
    def of(cls, read: Callable[[str], str], tags: dict[str, str]) -> _Reading:
        gaps = textfold.GAPS + tags["gaps"]
        loops = {0: textfold.SLASHES + tags["slashes"], 5: textfold.SEPARATORS + tags["seps"]}
        skip = {state: re.compile(f"[{gaps}{loops.get(state, '')}]*") for state in range(12)}
        return cls(read, re.compile(f"[{textfold.OPENERS}{tags['openers']}]"), skip)


# Tag characters dropped (they are gaps), or decoded to the ASCII they encode.
_DROPPED = _Reading.of(
    textfold.fold, {"gaps": textfold.TAG_CHAR_CLASS, "slashes": "", "seps": "", "openers": ""}
)
_DECODED = _Reading.of(
    textfold.decoded,
    {
        "gaps": "\U000e0020",
        "slashes": "\U000e002f\U000e005c",
        "seps": "\U000e002d\U000e005f",
        "openers": "\U000e003c",
    },
)


def neutralise(text: str) -> str:
    """``text`` with the ``<`` of everything that reads as a ``chain-context`` tag made
    U+2039, one character for one (see the module doc)."""
    return neutralise_part(text, 0, len(text))


def neutralise_part(text: str, start: int, end: int) -> str:
    """``neutralise(text)[start:end]``, in time linear in ``end - start`` plus one tag.

    Only openers inside the part are looked at; the tag of the last one may run on
    past ``end`` (a tag straddling a cut is still found).
    """
    found = set(_tags(text, start, end, _DROPPED))
    if _TAG_CHARS.search(text, start):
        found.update(_tags(text, start, end, _DECODED))
    pieces: list[str] = []
    for pos in sorted(found):
        pieces += [text[start:pos], INERT_BRACKET]
        start = pos + 1
    pieces.append(text[start:end])
    return "".join(pieces)


def _tags(text: str, start: int, end: int, reading: _Reading) -> Iterator[int]:
    """Where each tag read in ``reading`` starts, for openers in ``[start, end)``.

    A path ends at the first character it cannot read; an opener cannot be read after
    ``<``, so a new opener always ends the path before it.  Each character is thus read
    at most once (openers twice), and runs of skippable ones in C: linear.
    """
    pos = start
    while (opener := reading.openers.search(text, pos, end)) is not None:
        pos = opener.start()
        first = reading.read(text[pos])
        state = _run(0, first[first.rindex("<") + 1 :])
        pos += 1
        while state is not None and state != _ACCEPT:
            skipped = reading.skip[state].match(text, pos)  # ``*``: always a match.
            pos = skipped.end() if skipped else pos
            if pos == len(text):
                return
            state = _run(state, reading.read(text[pos]))
            if state is not None:
                pos += 1  # Read; a character that ends the path may open the next.
        if state == _ACCEPT:
            yield opener.start()


def _run(state: int, reading: str) -> int | None:
    """The state after ``reading`` from ``state``: _ACCEPT as soon as reached, None if dead."""
    if len(reading) == 1:  # The common case, kept fast.
        return _STEP.get((state, reading))
    for char in reading:
        if state == _ACCEPT:
            break
        next_state = _STEP.get((state, char))
        if next_state is None:
            return None
        state = next_state
    return state


def cut_output(text: str, window: ContextWindow, limit: int = CONTEXT_LIMIT) -> tuple[str, int]:
    """Keep at most ``limit`` characters of ``text``; return them and how many were cut."""
    start, end = _kept(len(text), window, limit)
    return text[start:end], len(text) - (end - start)


def _kept(length: int, window: ContextWindow, limit: int) -> tuple[int, int]:
    """Where the kept characters of a text of ``length`` start and end."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, not {limit}")
    cut = max(length - limit, 0)
    if window == "tail":
        return cut, length
    if window == "head":
        return 0, length - cut
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
    workspace: str | None = None,
) -> str:
    """The whole block, ending in a blank line, ready to go in front of a prompt.

    ``workspace``: what the parent changed in the chain's workspace
    (``workspaces/rules/stepchanges.changes_section``, bounded), under its own heading after the
    output, so the child never reads it as the parent's words; neutralised the same way.

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
    if workspace is not None:
        lines += ["", neutralise(WORKSPACE_HEADING), neutralise(workspace.rstrip("\n"))]
    body = "\n".join(lines)
    return f"{OPEN_TAG}\n{neutralise(heading)}\n{body}\n{CLOSE_TAG}\n\n"


def child_block(
    output: str,
    *,
    window: ContextWindow,
    handoff_heading: str | None,
    workspace: str | None = None,
) -> str:
    """The block of a child whose parent printed ``output``: its hand-off section
    under ``handoff_heading`` when there is one (seed 002), else the output itself.

    Up to a megabyte of text is read here, so the engine runs it off the event loop.
    """
    if handoff_heading is not None:
        handoff = assembly.extract_handoff(output, handoff_heading)
        output = handoff if handoff is not None else output
    return chain_context_block(output, window=window, workspace=workspace)


def _body(output: str, window: ContextWindow, limit: int) -> str:
    # Neutralising only what is kept gives the same characters as neutralising all of
    # it first, in time bounded by the limit rather than the output.
    start, end = _kept(len(output), window, limit)
    kept, cut = neutralise_part(output, start, end), len(output) - (end - start)
    if not cut:
        return kept
    marker = cut_marker(cut, window)
    return f"{marker}\n{kept}" if window == "tail" else f"{kept}\n{marker}"


def assemble(
    *,
    original: str,
    chain_context: str | None = None,
    learnings: str = "",
    store: str = "",
    dependencies: str = "",
    anchor: str = "",
) -> str:
    """The whole prompt: the operator's own block, then every other section made inert.

    Only the ``<chain-context>`` block is the operator's voice.  Everything after it
    (the original prompt with its event text, store entries, dependency results and
    anchors, all written by people or agents) is neutralised as a whole, so none of it
    can open a block of its own and pose as a parent's output.  Linear, like
    :func:`neutralise`; callers with large sections run it off the event loop.
    """
    body = assembly.assemble_prompt(
        original=original, learnings=learnings, store=store, dependencies=dependencies,
        anchor=anchor,
    )  # fmt: skip
    return (chain_context or "") + neutralise(body)
