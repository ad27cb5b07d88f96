"""Whether a text someone wrote on GitHub mentions the App (``@<slug>``): pure, linear.

The text is untrusted (an issue body, a comment, a review) and may be as long as a
delivery allows, so the scan is one pass over it with no regular expression that could
backtrack: each line is looked at once, each character of a line at most twice (once to
find its backtick runs, once to look for ``@``).

A mention counts as GitHub renders one, roughly: ``@`` not preceded by a character that
can be part of a login or an e-mail address (``a@slug`` is an address, not a mention),
then the slug in any case, then a character that cannot continue a login (``@slug-x``
names someone else; ``@slug/team`` is a team; ``@slug[bot]`` is the App's own login and
counts).  What GitHub shows as code or as a quotation does not count, so quoting a
previous comment that mentioned the App, or showing how to mention it, starts nothing:

* fenced code blocks (a line opening with three or more backticks or tildes, up to the
  line that closes it with at least as many of the same character, or the end);
* inline code spans (a run of backticks up to the next run of the same length on the
  same line; an unmatched run is literal text, as in CommonMark);
* block quotes (a line whose first non-blank character is ``>``);
* HTML comments on one line (``<!-- … -->``), which GitHub does not show.

Indented code blocks are not recognised: telling them from a list item's continuation
needs the whole Markdown block structure, and a mention there is rare and harmless
(the sender could as well have written it outside).  Code spans across lines are not
recognised either (a backtick run matches on its own line only).
"""

from __future__ import annotations

from collections.abc import Iterator

# Login characters: letters, digits and "-"; "_" and "." also continue an e-mail address
# or a word, so a mention must not follow them either.
_LOGIN_EXTRA = "-_."
_BOT_SUFFIX = "[bot]"
_FENCE_CHARS = "`~"
_FENCE_MIN = 3


def _word(c: str) -> bool:
    return c.isalnum() or c in _LOGIN_EXTRA


def mentions(text: str, slug: str) -> bool:
    """Whether ``text`` mentions ``@slug`` outside code and quotes (see the module)."""
    wanted = slug.strip().lstrip("@").casefold()
    if not wanted or "@" not in text:
        return False
    return any(_line_mentions(line, wanted) for line in _visible_lines(text))


def _visible_lines(text: str) -> Iterator[str]:
    """The lines of ``text`` outside fenced code blocks and block quotes."""
    fence: tuple[str, int] | None = None
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        opening = _fence_of(stripped) if indent <= 3 else None
        if fence is not None:
            if opening is not None and opening[0] == fence[0] and opening[1] >= fence[1]:
                if not stripped.lstrip(fence[0]).strip():
                    fence = None  # A closing fence has nothing after it.
            continue
        if opening is not None:
            fence = opening
            continue
        if indent <= 3 and stripped.startswith(">"):
            continue
        yield line


def _fence_of(stripped: str) -> tuple[str, int] | None:
    if not stripped or stripped[0] not in _FENCE_CHARS:
        return None
    char = stripped[0]
    run = len(stripped) - len(stripped.lstrip(char))
    if run < _FENCE_MIN:
        return None
    if char == "`" and "`" in stripped[run:]:
        return None  # CommonMark: a backtick fence's info string has no backtick.
    return char, run


def _line_mentions(line: str, wanted: str) -> bool:
    return any(_mentions_in(part, wanted) for part in _outside_code(_without_comments(line)))


def _without_comments(line: str) -> str:
    """``line`` without its complete ``<!-- … -->`` comments (each found once, left to right)."""
    out: list[str] = []
    at = 0
    while True:
        start = line.find("<!--", at)
        if start < 0:
            break
        end = line.find("-->", start + 4)
        if end < 0:
            break
        out.append(line[at:start])
        out.append(" ")
        at = end + 3
    out.append(line[at:])
    return "".join(out)


def _outside_code(line: str) -> Iterator[str]:
    """The parts of ``line`` outside inline code spans.

    The backtick runs are listed once; each run's next run of the same length is found
    by one backward pass (so the whole is linear, however many unmatched runs there are).
    """
    runs: list[tuple[int, int]] = []  # (start, length)
    i = 0
    while True:
        i = line.find("`", i)
        if i < 0:
            break
        j = i
        while j < len(line) and line[j] == "`":
            j += 1
        runs.append((i, j - i))
        i = j
    following: list[int | None] = [None] * len(runs)
    last_of_length: dict[int, int] = {}
    for k in range(len(runs) - 1, -1, -1):
        following[k] = last_of_length.get(runs[k][1])
        last_of_length[runs[k][1]] = k
    at = 0
    k = 0
    while k < len(runs):
        closing = following[k]
        if closing is None:
            k += 1  # An unmatched run is literal text.
            continue
        start, _ = runs[k]
        yield line[at:start]
        end, length = runs[closing]
        at = end + length
        k = closing + 1
    yield line[at:]


def _mentions_in(part: str, wanted: str) -> bool:
    size = len(wanted)
    at = part.find("@")
    while at >= 0:
        before = part[at - 1] if at > 0 else ""
        name = part[at + 1 : at + 1 + size]
        if not (before and (_word(before) or before == "@")) and name.casefold() == wanted:
            end = at + 1 + size
            if part[end : end + len(_BOT_SUFFIX)].casefold() == _BOT_SUFFIX:
                end += len(_BOT_SUFFIX)
            if _ends_login(part, end):
                return True
        at = part.find("@", at + 1)
    return False


def _ends_login(part: str, end: int) -> bool:
    """Whether a login that reaches ``end`` stops there (a "." that ends a sentence does)."""
    after = part[end : end + 1]
    if not after:
        return True
    if after == ".":
        return not _word(part[end + 1 : end + 2] or " ")
    return not (_word(after) or after == "/")
