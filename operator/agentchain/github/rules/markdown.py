"""Untrusted text made safe to put in a GitHub comment or Check Run summary.

What an agent printed (and anything else a person could have steered: a job's status
message, an issue title) reaches GitHub only through these functions.  GitHub renders
comments as Markdown with HTML allowed, turns ``@login`` and ``@org/team`` into
notifications, ``#12`` and URLs into links, and in some places acts on closing
keywords (``fixes #1``).  So:

- :func:`code_block` puts text in a fenced code block whose fence is longer than any
  run of backticks in the text: nothing inside is Markdown or HTML, no mention pings,
  no reference links, no keyword closes anything.  This is the default for agent output.
- :func:`inline` is for short text in a table cell or after other text: one line,
  Markdown's inline syntax (emphasis, code, links, pipes) backslash-escaped, HTML's
  ``<``, ``>`` and ``&`` replaced by entities, and ``@``/``#`` followed by a zero-width
  space so they neither mention nor link.
- :func:`markdown` is the opt-in (``writeBack.allowMentions``): the agent's Markdown is
  kept, mentions and keywords included, but never raw HTML (``<`` and ``&`` become
  entities).

All three are single passes over the text (``str.translate``, one regex over backtick
runs), so their cost is linear in the text whatever it holds.  NUL and other control
characters (except newline and tab) are dropped: GitHub refuses or mangles them.
"""

from __future__ import annotations

import re

ZWSP = "\u200b"
_BACKTICKS = re.compile(r"`+")
# C0 controls but tab and newline, DEL, and the bidirectional overrides that can make
# text read differently from what it is (Trojan Source).
_DROPPED = (
    [c for c in range(0x20) if c not in (0x09, 0x0A)]
    + [0x7F]
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A))
)
_CLEAN = dict.fromkeys(_DROPPED)
_CLEAN[0x0D] = None  # \r\n becomes \n.
_INLINE = {
    **_CLEAN,
    ord("\n"): " ",
    ord("\t"): " ",
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
    ord("@"): "@" + ZWSP,
    ord("#"): "#" + ZWSP,
    ord("|"): "\\|",
    # Inline text never starts a line (it follows a table pipe or other text), so only
    # what is syntax anywhere in a line needs escaping: emphasis, code, links, pipes.
    **{ord(c): "\\" + c for c in "\\`*_{}[]~:"},
}
_HTML_ONLY = {**_CLEAN, ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;"}


def clean(text: str) -> str:
    """``text`` without the control characters GitHub refuses or shows misleadingly."""
    return text.translate(_CLEAN)


def inline(text: str, max_chars: int = 200) -> str:
    """One line of literal text for a table cell or a heading, at most ``max_chars``
    of the original (then an ellipsis)."""
    cut = text[:max_chars]
    suffix = "…" if len(text) > max_chars else ""
    return cut.translate(_INLINE) + suffix


def longest_backtick_run(text: str) -> int:
    return max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)


def code_block(text: str) -> str:
    """``text`` as a fenced code block no content can close early."""
    body = clean(text)
    fence = "`" * max(3, longest_backtick_run(body) + 1)
    if not body.endswith("\n"):
        body += "\n"
    return f"{fence}text\n{body}{fence}"


def markdown(text: str) -> str:
    """The agent's own Markdown (mentions and keywords live), with HTML escaped."""
    return text.translate(_HTML_ONLY)
