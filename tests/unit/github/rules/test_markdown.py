"""Untrusted text in GitHub comments (``agentchain.github.rules.markdown``, issue 17).

Aspects covered:
* ``code_block``: the fence is longer than any backtick run of the text, so no content
  closes the block early (property); control and bidi characters are dropped; the text
  is kept otherwise;
* ``inline``: one line, no raw HTML, no live ``@mention`` or ``#ref`` (a zero-width space
  follows each ``@``/``#``), every Markdown metacharacter escaped, length bounded
  (property: nothing the renderer reads as syntax survives);
* ``markdown`` (the agent's opt-in): HTML escaped, mentions kept;
* all three are linear: a megabyte of adversarial text takes well under a second each.
"""

from __future__ import annotations

import re
import time

from hypothesis import given
from hypothesis import strategies as st

from agentchain.github.rules import markdown

HOSTILE = [
    "@octocat please look",
    "fixes #1, closes acme/widgets#2",
    "<img src=x onerror=alert(1)>",
    "```\nbreak out\n```",
    "<!-- agentchain:chain=ns/c1 -->",
    "| a | b |",
    "[click](javascript:alert(1))",
]


def _block_body(block: str) -> tuple[str, str]:
    first, _, rest = block.partition("\n")
    fence = first.removesuffix("text")
    assert rest.endswith(fence)
    return fence, rest[: -len(fence)]


@given(st.text())
def test_code_block_cannot_be_closed_early(text: str) -> None:
    block = markdown.code_block(text)
    fence, body = _block_body(block)
    assert set(fence) == {"`"} and len(fence) >= 3
    assert markdown.longest_backtick_run(body) < len(fence)
    # No line of the body is a closing fence of that length or longer.
    assert not any(line.strip().startswith(fence) for line in body.splitlines())


def test_code_block_keeps_the_text() -> None:
    text = "\n".join(HOSTILE)
    _, body = _block_body(markdown.code_block(text))
    assert body == text + "\n"
    assert len(_block_body(markdown.code_block("````"))[0]) == 5


def test_code_block_drops_control_and_bidi_characters() -> None:
    _, body = _block_body(markdown.code_block("a\x00b\x1b[31mc\u202ed\r\n"))
    assert body == "ab[31mcd\n"


@given(st.text())
def test_inline_is_one_inert_line(text: str) -> None:
    out = markdown.inline(text, 50)
    assert "\n" not in out and "<" not in out and ">" not in out
    assert not re.search("@[^\u200b]", out) and not re.search("#[^\u200b]", out)
    assert not out.endswith("@") and not out.endswith("#")
    assert not re.search(r"(?<!\\)[`*_\[\]|]", out)


def test_inline_examples() -> None:
    assert markdown.inline("@octocat") == "@\u200boctocat"
    assert markdown.inline("fixes #1") == "fixes #\u200b1"
    assert markdown.inline("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert markdown.inline("a|b") == "a\\|b"
    assert markdown.inline("x" * 300, 10) == "x" * 10 + "…"


def test_markdown_keeps_mentions_but_not_html() -> None:
    assert markdown.markdown("@octocat <script>x</script> fixes #1") == (
        "@octocat &lt;script&gt;x&lt;/script&gt; fixes #1"
    )


def test_linear_on_a_megabyte() -> None:
    hostile = ("`" * 1000 + "@" * 1000 + "<" * 1000 + " " * 5000) * 150
    for render in (markdown.code_block, markdown.inline, markdown.markdown):
        started = time.monotonic()
        render(hostile) if render is not markdown.inline else render(hostile, len(hostile))
        assert time.monotonic() - started < 2.0, render.__name__
