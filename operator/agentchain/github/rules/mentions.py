"""Whether a text someone wrote on GitHub mentions the App (``@<slug>``): pure, linear.

The text is untrusted (an issue body, a comment, a review) and may be as long as a
delivery allows, so the scan is one pass over it with no regular expression that could
backtrack: each line is looked at once to place it in its block, then each paragraph's
characters a bounded number of times (for its comments, its backtick runs, its ``@``).

A mention counts as GitHub renders one, roughly: ``@`` not preceded by a character that
can be part of a login or an e-mail address (``a@slug`` is an address, not a mention),
then the slug in any case, then a character that cannot continue a login (``@slug-x``
names someone else; ``@slug/team`` is a team; ``@slug[bot]`` is the App's own login and
counts).  What GitHub shows as code or as a quotation does not count, so quoting a
previous comment that mentioned the App, or showing how to mention it, starts nothing:

* fenced code blocks (a line opening with three or more backticks or tildes, up to the
  line that closes it with at least as many of the same character, or the end);
* indented code blocks: lines indented by four columns or more (a tab is four) that do
  not continue a paragraph, up to the next line indented less that is not blank.  Inside
  a list item (a line opening with ``-``, ``*``, ``+`` or ``1.`` / ``1)`` and a space)
  the four columns count from where the item's text starts, so an item's own paragraphs
  after a blank line are text, not code;
* inline code spans (a run of backticks up to the next run of the same length in the
  same paragraph, across its lines; an unmatched run is literal text, as in CommonMark);
* block quotes (a line whose first non-blank character is ``>``);
* HTML comments within a paragraph (``<!-- … -->``), which GitHub does not show.

A paragraph here is a run of lines that are neither blank nor any of the above.  The
approximation stays on the side of "no mention" only where GitHub shows code: lazy
continuation lines of a quote and setext headings are read as text.
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
    return any(_line_mentions(part, wanted) for part in _paragraphs(text))


def _paragraphs(text: str) -> Iterator[str]:
    """The paragraphs of ``text`` (their lines joined by line breaks), outside code blocks
    and block quotes."""
    blocks = _Blocks()
    lines: list[str] = []
    for line in text.splitlines():
        if blocks.is_text(line):
            lines.append(line)
        elif lines:
            yield "\n".join(lines)
            lines = []
    if lines:
        yield "\n".join(lines)


def _columns(line: str) -> tuple[int, str]:
    """The indentation of ``line`` in columns (a tab to the next multiple of four), and
    the line without it."""
    width = 0
    for at, c in enumerate(line):
        if c == " ":
            width += 1
        elif c == "\t":
            width += 4 - width % 4
        else:
            return width, line[at:]
    return width, ""


def _list_item(stripped: str) -> int | None:
    """The width of a list item's marker and the spaces after it (None: no list item)."""
    digits = len(stripped) - len(stripped.lstrip("0123456789"))
    if stripped[:1] in "-*+" and stripped:
        marker = 1
    elif 0 < digits <= 9 and stripped[digits : digits + 1] in (".", ")"):
        marker = digits + 1
    else:
        return None
    rest = stripped[marker:]
    if rest and rest[0] not in " \t":
        return None
    spaces = len(rest) - len(rest.lstrip(" "))
    return marker + (spaces if 1 <= spaces <= 4 else 1)


class _Blocks:
    """Which lines are paragraph text, line by line: the block state of one text."""

    def __init__(self) -> None:
        self.fence: tuple[str, int] | None = None
        self.code = False
        self.paragraph = False
        self.item: int | None = None
        """Where the text of the list item the lines are in starts (None: no list)."""

    def is_text(self, line: str) -> bool:
        indent, stripped = _columns(line)
        base = self.item or 0
        if self.fence is not None:
            self._close_fence(indent - base, stripped)
            return False
        if not stripped:
            self.paragraph = False  # A blank line neither ends code nor is text.
            return False
        if self.code and indent >= base + 4:
            return False
        self.code = False
        if self.item is not None and indent < self.item and not self.paragraph:
            self.item, base = None, 0  # Not indented as the item's text: the list ended.
        if not self.paragraph and indent >= base + 4:
            self.code = True
            return False
        return self._text(indent - base, stripped)

    def _close_fence(self, indent: int, stripped: str) -> None:
        fence, closing = self.fence, _fence_of(stripped) if indent <= 3 else None
        assert fence is not None
        if closing is not None and closing[0] == fence[0] and closing[1] >= fence[1]:
            if not stripped.lstrip(fence[0]).strip():
                self.fence = None  # A closing fence has nothing after it.

    def _text(self, indent: int, stripped: str) -> bool:
        """``stripped`` is indented ``indent`` columns past the list item's text, fewer than
        four: a fence opens, a quote, a list item, or paragraph text."""
        self.fence = _fence_of(stripped)
        if self.fence is not None or stripped.startswith(">"):
            self.paragraph = False
            return False
        item = _list_item(stripped)
        if item is not None:
            self.item = (self.item or 0) + indent + item
        self.paragraph = True
        return True


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


def _line_mentions(paragraph: str, wanted: str) -> bool:
    return any(_mentions_in(part, wanted) for part in _outside_code(_without_comments(paragraph)))


def _without_comments(line: str) -> str:
    """``line`` (a paragraph) without its complete ``<!-- … -->`` comments (each found once,
    left to right)."""
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
