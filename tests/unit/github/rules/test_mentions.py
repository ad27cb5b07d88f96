"""Mentions of the App in untrusted text (``agentchain.github.rules.mentions``).

Aspects covered:
* what counts, as a table: start of text, punctuation around, any case, ``[bot]``
  suffix, end of a sentence; what does not: e-mail addresses, longer logins, teams,
  ``@@``, another slug;
* what GitHub shows as code or quotation does not count: inline code (matched runs of
  the same length only; an unmatched run is literal), fenced blocks of backticks and
  tildes (closed only by a fence of the same character and at least the same length),
  block quotes, one-line HTML comments;
* code spans across the lines of one paragraph, and indented code blocks (four
  columns, a tab is four; counted from a list item's text inside one; a paragraph's
  indented continuation is text);
* properties (hypothesis): a mention appended on its own line after any text that
  opens no fence counts; text with no ``@`` never does; the answer does not depend on
  the case of the slug; a mention inside a code span however many lines of a paragraph
  it spans never counts, nor one in an indented block after any paragraph;
* linear cost on hostile bodies: many backtick runs, many ``@``, many fences, each
  against a time bound that a quadratic scan of that size would blow by far.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.github.rules.mentions import mentions

SLUG = "agent-bot"

# fmt: off
CASES = [
    ("plain", "@agent-bot please fix", True),
    ("middle", "hey @agent-bot, look", True),
    ("any-case", "@Agent-Bot look", True),
    ("sentence-end", "Over to @agent-bot.", True),
    ("parenthesis", "(cc @agent-bot)", True),
    ("bot-login", "@agent-bot[bot] run", True),
    ("own-line", "first line\n@agent-bot\nlast", True),
    ("after-code", "`code` then @agent-bot", True),
    ("unmatched-backtick", "a ` b @agent-bot", True),
    ("email", "mail me@agent-bot.io", False),
    ("longer-login", "@agent-bot-2 is another", False),
    ("underscore", "@agent-bot_x", False),
    ("team", "@agent-bot/team", False),
    ("double-at", "@@agent-bot", False),
    ("domain", "@agent-bot.io", False),
    ("other-slug", "@agent please", False),
    ("prefix-only", "@agent-bo", False),
    ("no-at", "agent-bot please", False),
    ("inline-code", "use `@agent-bot fix` to ask", False),
    ("double-backtick-code", "``a ` @agent-bot``", False),
    ("fenced", "```\n@agent-bot\n```", False),
    ("fenced-info", "```python\n@agent-bot\n```\n", False),
    ("tilde-fence", "~~~\n@agent-bot\n~~~", False),
    ("fence-closed-by-longer", "```\nx\n`````\n@agent-bot", True),
    ("fence-not-closed-by-shorter", "````\n```\n@agent-bot\n````", False),
    ("fence-not-closed-by-other-char", "```\n~~~\n@agent-bot\n```", False),
    ("fence-unclosed", "```\n@agent-bot", False),
    ("fence-with-text-after-is-no-close", "```\n``` x\n@agent-bot", False),
    ("quote", "> @agent-bot said\n", False),
    ("indented-quote", "   > @agent-bot", False),
    ("quote-then-own", "> old\n@agent-bot new", True),
    ("html-comment", "x <!-- @agent-bot --> y", False),
    ("html-comment-unclosed", "x <!-- @agent-bot", True),
    ("html-comment-across-lines", "x <!--\n@agent-bot\n--> y", False),
    ("code-span-across-lines", "ask with `please\n@agent-bot fix` like that", False),
    ("code-span-ends-with-its-paragraph", "a ` b\n\n@agent-bot ` c", True),
    ("indented-code", "Ask like this:\n\n    @agent-bot fix it\n", False),
    ("indented-code-first", "    @agent-bot fix it", False),
    ("indented-code-by-tab", "\t@agent-bot fix it", False),
    ("indented-code-blank-inside", "    a\n\n    @agent-bot", False),
    ("indented-code-then-text", "    a\n\n@agent-bot go", True),
    ("indented-continuation", "Please\n    @agent-bot fix", True),
    ("list-item-paragraph", "- item\n\n  @agent-bot fix", True),
    ("list-item-indented-paragraph", "1. item\n\n    @agent-bot fix", True),
    ("list-item-code", "- item\n\n      @agent-bot fix", False),
    ("after-a-list-code", "- item\n\ntext\n\n    @agent-bot", False),
]
# fmt: on


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_mentions_table(text: str, expected: bool) -> None:
    assert mentions(text, SLUG) is expected


def test_a_blank_slug_is_never_mentioned() -> None:
    assert not mentions("@ hello @", "")
    assert not mentions("@agent-bot", "  ")


def test_the_slug_may_be_given_with_its_at() -> None:
    assert mentions("hi @agent-bot", "@agent-bot")


_PLAIN_CHARS = st.characters(blacklist_characters="`~>\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_PLAIN = st.text(alphabet=_PLAIN_CHARS)


@given(_PLAIN)
def test_a_mention_on_its_own_line_after_plain_text_counts(before: str) -> None:
    assert mentions(before + "\n@agent-bot go", SLUG)


@given(st.text(alphabet=st.characters(blacklist_characters="@")))
def test_text_without_an_at_sign_never_mentions(text: str) -> None:
    assert not mentions(text, SLUG)


@given(st.text(max_size=200))
def test_the_slug_case_does_not_matter(text: str) -> None:
    assert mentions(text, SLUG) == mentions(text, SLUG.upper())


_LINE = st.text(alphabet=_PLAIN_CHARS, min_size=1).filter(lambda line: bool(line.strip()))


@given(st.lists(_LINE, min_size=1, max_size=8))
def test_a_code_span_across_lines_hides_its_mention(lines: list[str]) -> None:
    assert not mentions("`" + "\n".join(lines) + " @agent-bot`", SLUG)


@given(_LINE, st.lists(_LINE, max_size=5))
def test_an_indented_block_after_a_paragraph_hides_its_mention(
    paragraph: str, code: list[str]
) -> None:
    block = "\n".join("    " + line for line in [*code, "@agent-bot go"])
    # "Text:" first: the paragraph is no list item, whose own text may be indented.
    assert not mentions(f"Text: {paragraph}\n\n{block}", SLUG)


HOSTILE = {
    "backtick-runs": "".join("`" * (i % 50 + 1) + " " for i in range(20_000)) + "@agent-bot",
    "ats": "@agent-bo" * 100_000,
    "fences": "```\n" * 50_000,
    "comments": "<!-- " * 100_000,
    "one-long-line": "a" * 1_000_000 + " @agent-bot",
    "one-long-paragraph": "`a\n" * 200_000 + "@agent-bot",
    "nested-list-items": "".join(" " * (i % 40) + "- x\n" for i in range(100_000)),
    "indented-blocks": "text\n\n    code\n" * 50_000 + "@agent-bot",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_bodies_cost_linear_time(name: str) -> None:
    text = HOSTILE[name]
    started = time.process_time()
    mentions(text, SLUG)
    # About 1 MB each: a linear scan takes well under a second even on a loaded
    # machine; a quadratic one would take hours.
    assert time.process_time() - started < 5.0
