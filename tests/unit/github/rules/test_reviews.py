"""A reviewer's output as a pull request review (``agentchain.github.rules.reviews``).

Aspects covered:
* ``parse``: the last top-level ``agentchain-review`` block counts (one inside another
  code block does not); verdicts, sides and defaults; every malformed shape is a
  ``Malformed`` with a reason, never an exception (property over arbitrary JSON);
  bounded: an oversized block is refused before decoding, a deep nest is malformed;
* ``diff_lines``: added and context lines on the RIGHT, removed and context lines on
  the LEFT, several hunks, "no newline" markers and text outside a hunk ignored;
  property: every line a generated hunk shows is commentable, none past it;
* ``place``: comments on diff lines stay inline, the others are folded into the body
  (never dropped); agent text escaped (no mention, no HTML) unless mentions are
  allowed; on the App's own pull request approve / request changes become a comment
  that says so; the body is bounded however many long comments are folded;
* multi-line comments (``start_line`` before ``line``, one side): inline when every
  line of the range is a diff line on that side (so within one hunk), folded with its
  range otherwise; a bad range is malformed; a range far longer than the diff costs
  nothing;
* ``parse_sent``: a review sent through the job API is read by the block's rules;
* linear cost: a megabyte of hostile output parses in well under a second.
"""

from __future__ import annotations

import json
import time

from hypothesis import given
from hypothesis import strategies as st

from agentchain.github.rules import reviews
from agentchain.github.rules.reviews import InlineComment, Malformed, Review


def _output(review: object, before: str = "Done.\n") -> str:
    return f"{before}```agentchain-review\n{json.dumps(review)}\n```\n"


def test_a_review_block_is_parsed_with_defaults() -> None:
    found = reviews.parse(
        _output(
            {
                "verdict": "request_changes",
                "body": "Two details.",
                "comments": [
                    {"path": "README.md", "line": 1, "body": "Typo."},
                    {"path": "a.py", "line": 3, "side": "LEFT", "body": "Why removed?"},
                ],
            }
        )
    )
    assert found == Review(
        "request_changes",
        "Two details.",
        (
            InlineComment("README.md", 1, "RIGHT", "Typo."),
            InlineComment("a.py", 3, "LEFT", "Why removed?"),
        ),
    )
    assert reviews.parse(_output({"verdict": "approve"})) == Review("approve", "", ())


def test_no_block_is_no_review_and_the_last_top_level_block_counts() -> None:
    assert reviews.parse("All good.\n```json\n{}\n```\n") is None
    quoted = '````markdown\n```agentchain-review\n{"verdict": "approve"}\n```\n````\n'
    assert reviews.parse(quoted) is None  # An example inside another block is no verdict.
    two = _output({"verdict": "approve"}) + _output({"verdict": "comment", "body": "x"})
    found = reviews.parse(two)
    assert isinstance(found, Review) and found.verdict == "comment"
    unclosed = '```agentchain-review\n{"verdict": "approve"}\n'
    assert reviews.parse(unclosed) is None


def test_malformed_blocks_say_why() -> None:
    cases = {
        "not json": "not one JSON object",
        "[1, 2]": "not one JSON object",
        '{"verdict": "merge"}': "verdict must be",
        '{"verdict": "approve", "body": 3}': "body must be text",
        '{"verdict": "approve", "comments": [{"path": "a", "line": 0, "body": "x"}]}': "line",
        '{"verdict": "approve", "comments": [{"path": "a", "line": true, "body": "x"}]}': "line",
        '{"verdict": "approve", "comments": [{"path": "", "line": 1, "body": "x"}]}': "path",
        '{"verdict": "approve", "comments": [{"path": "a", "line": 1, "body": " "}]}': "body",
        '{"verdict": "approve", "comments": [{"path": "a", "line": 1, "side": "UP", '
        '"body": "x"}]}': "side",
        '{"verdict": "approve", "comments": ["x"]}': "not an object",
    }
    for block, reason in cases.items():
        found = reviews.parse(f"```agentchain-review\n{block}\n```")
        assert isinstance(found, Malformed) and reason in found.reason, (block, found)
    many = {"verdict": "comment", "comments": [{"path": "a", "line": 1, "body": "x"}] * 51}
    assert isinstance(reviews.parse(_output(many)), Malformed)
    deep = "[" * 100_000 + "]" * 100_000
    assert isinstance(reviews.parse(f"```agentchain-review\n{deep[:60_000]}\n```"), Malformed)
    big = {"verdict": "comment", "body": "x" * reviews.MAX_BLOCK_CHARS}
    found = reviews.parse(_output(big))
    assert isinstance(found, Malformed) and "over" in found.reason


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    )
)
def test_any_json_is_a_review_or_malformed(value: object) -> None:
    found = reviews.parse(_output(value))
    assert isinstance(found, Review | Malformed)
    if isinstance(found, Review):
        assert found.verdict in reviews.EVENTS and len(found.comments) <= reviews.MAX_COMMENTS


PATCH = "\n".join(
    [
        "@@ -1,3 +1,4 @@",
        " keep",
        "-old",
        "+new",
        "+added",
        " tail",
        "\\ No newline at end of file",
        "@@ -10,2 +11,1 @@ def f():",
        "-gone",
        " stays",
    ]
)


def test_diff_lines_of_added_removed_and_context_lines() -> None:
    assert reviews.diff_lines(PATCH) == {
        ("LEFT", 1), ("RIGHT", 1),  # keep
        ("LEFT", 2),  # old
        ("RIGHT", 2), ("RIGHT", 3),  # new, added
        ("LEFT", 3), ("RIGHT", 4),  # tail
        ("LEFT", 10),  # gone
        ("LEFT", 11), ("RIGHT", 11),  # stays
    }  # fmt: skip
    assert reviews.diff_lines("garbage\n+not in a hunk") == frozenset()
    assert reviews.diff_lines("@@ -0,0 +1 @@\n+only") == {("RIGHT", 1)}


@given(st.integers(1, 10_000), st.lists(st.sampled_from(" +-"), min_size=1, max_size=40))
def test_every_line_a_hunk_shows_is_commentable(start: int, kinds: list[str]) -> None:
    olds = sum(1 for k in kinds if k != "+")
    news = sum(1 for k in kinds if k != "-")
    patch = f"@@ -{start},{olds} +{start},{news} @@\n" + "\n".join(f"{k}line" for k in kinds)
    lines = reviews.diff_lines(patch + "\n+past the hunk")
    assert {line for side, line in lines if side == "RIGHT"} == set(range(start, start + news))
    assert {line for side, line in lines if side == "LEFT"} == set(range(start, start + olds))


def _review(verdict: str = "request_changes", *comments: InlineComment) -> Review:
    return Review(verdict, "Please fix @octocat <b>now</b>", comments)


LINES = reviews.commentable(
    [("README.md", "@@ -1 +1 @@\n-Hello Wrold\n+Hello World"), ("bin", None)]
)


def test_comments_off_the_diff_are_folded_into_the_body() -> None:
    on = InlineComment("README.md", 1, "RIGHT", "Good @octocat")
    left = InlineComment("README.md", 1, "LEFT", "Was wrong")
    off = InlineComment("README.md", 7, "RIGHT", "Not in the diff <script>")
    binary = InlineComment("bin", 1, "RIGHT", "Binary")
    head = reviews.heading("agents", "reviewer-x", "ai-reviewer")
    placed = reviews.place(
        _review("request_changes", on, left, off, binary), LINES, title=head, own_pull=False
    )
    assert placed.event == "REQUEST_CHANGES" and placed.folded == 2
    assert [(c["path"], c["line"], c["side"]) for c in placed.comments] == [
        ("README.md", 1, "RIGHT"),
        ("README.md", 1, "LEFT"),
    ]
    assert placed.comments[0]["body"] == "```text\nGood @octocat\n```"
    assert placed.body.startswith(reviews.marker("agents", "reviewer-x") + "\n")
    assert "**Comments on lines outside the diff**" in placed.body
    assert "README.md, line 7 (right side):" in placed.body and "bin, line 1" in placed.body
    assert "```text\nNot in the diff <script>\n```" in placed.body  # Inert in a code block.
    assert "```text\nPlease fix @octocat <b>now</b>\n```" in placed.body


TWO_HUNKS = reviews.commentable(
    [("a.py", "@@ -1,2 +1,3 @@\n x\n+y\n z\n@@ -10 +11 @@\n-old\n+new")]
)


def test_a_multi_line_comment_is_inline_within_one_hunk_else_folded() -> None:
    within = InlineComment("a.py", 3, "RIGHT", "These three.", start_line=1)
    across = InlineComment("a.py", 11, "RIGHT", "Both hunks.", start_line=2)
    huge = InlineComment("a.py", 9_000_000, "RIGHT", "Everything.", start_line=1)
    placed = reviews.place(
        _review("comment", within, across, huge), TWO_HUNKS, title="t", own_pull=False
    )
    assert [dict(c, body="") for c in placed.comments] == [
        {"path": "a.py", "line": 3, "side": "RIGHT", "start_line": 1, "start_side": "RIGHT",
         "body": ""},
    ]  # fmt: skip
    assert placed.folded == 2 and "a.py, lines 2 to 11 (right side):" in placed.body


def test_multi_line_comments_are_parsed_and_bad_ranges_refused() -> None:
    ok = {"path": "a.py", "start_line": 1, "line": 3, "body": "Range."}
    found = reviews.parse(_output({"verdict": "comment", "comments": [ok]}))
    assert found == Review("comment", "", (InlineComment("a.py", 3, "RIGHT", "Range.", 1),))
    for bad in ({"start_line": 3}, {"start_line": 0}, {"start_line": True},
                {"start_line": 1, "start_side": "LEFT"}):  # fmt: skip
        malformed = reviews.parse(_output({"verdict": "comment", "comments": [{**ok, **bad}]}))
        assert isinstance(malformed, Malformed), bad
        assert "start_" in malformed.reason


def test_a_review_sent_through_the_api_follows_the_blocks_rules() -> None:
    sent = json.dumps({"verdict": "approve", "comments": [{"path": "a", "line": 2, "body": "x"}]})
    assert reviews.parse_sent(sent) == Review("approve", "", (InlineComment("a", 2, "RIGHT", "x"),))
    assert isinstance(reviews.parse_sent("[1]"), Malformed)
    assert isinstance(reviews.parse_sent("{"), Malformed)
    assert isinstance(reviews.parse_sent(" " * (reviews.MAX_BLOCK_CHARS + 1)), Malformed)


def test_mentions_allowed_keep_markdown_but_never_html() -> None:
    on = InlineComment("README.md", 1, "RIGHT", "Good @octocat <img>")
    placed = reviews.place(
        _review("comment", on), LINES, title="h", own_pull=False, allow_mentions=True
    )
    assert placed.comments[0]["body"] == "Good @octocat &lt;img&gt;"
    assert "Please fix @octocat &lt;b&gt;now&lt;/b&gt;" in placed.body and "```" not in placed.body


def test_on_its_own_pull_request_a_verdict_is_a_comment_that_says_so() -> None:
    for verdict, title in (("approve", "**Approve**"), ("request_changes", "**Request changes**")):
        placed = reviews.place(_review(verdict), LINES, title="h", own_pull=True)
        assert placed.event == "COMMENT" and title in placed.body
        assert "own pull request" in placed.body
    placed = reviews.place(_review("approve"), LINES, title="h", own_pull=False)
    assert placed.event == "APPROVE" and "own pull request" not in placed.body


def test_the_body_is_bounded_however_much_is_folded() -> None:
    long = [InlineComment(f"f{i}.py", 1, "RIGHT", "x" * 4000) for i in range(50)]
    placed = reviews.place(
        Review("comment", "y" * 20_000, tuple(long)), LINES, title="h", own_pull=False
    )
    assert len(placed.body) < 65_536 and placed.folded == 50
    assert "more, too long to show." in placed.body


def test_parsing_is_linear_in_hostile_output() -> None:
    hostile = [
        "```agentchain-review\n" * 100_000,
        "`" * 1_000_000,
        "@@ -1,1 +1,1 @@\n" * 60_000,
        ("```\n" + "x\n" * 10) * 50_000,
    ]
    for text in hostile:
        began = time.monotonic()
        reviews.parse(text)
        reviews.diff_lines(text)
        # About 0.7 s idle for the largest; quadratic work on a megabyte would take hours,
        # so the bound leaves room for a loaded machine and still catches it.
        assert time.monotonic() - began < 10.0
