"""How the chain-context recogniser reads one character (``prompts.rules.textfold``).

Aspects covered:
- every class of character issue 14 lists reads as the tag character it looks like:
  soft hyphen and other invisible characters, tag characters (dropped or decoded),
  combining marks, dashes and minus signs, fullwidth and other ``<`` lookalikes,
  Cyrillic, Greek and other homoglyphs, fullwidth and mathematical letters;
- what is deliberately not folded (ASCII digits, ``l``, U+2039 itself);
- the character classes the scanner skips in C agree with the folding over all of
  Unicode: OPENERS holds every character that can read as ``<`` (completeness), and
  GAPS, SLASHES and SEPARATORS hold nothing that reads otherwise (soundness).
"""

from __future__ import annotations

import re
import sys

import pytest

from agentchain.prompts.rules import textfold

# Folding without the cache: these sweeps read every code point once.
_fold = textfold.fold.__wrapped__
_decoded = textfold.decoded.__wrapped__


def _cover(text: str) -> str:
    return text.encode("unicode_escape").decode()


@pytest.mark.parametrize(
    ("chars", "reads_as"),
    [
        pytest.param("\u00ad", "", id="soft-hyphen"),
        pytest.param("\u200b\u200c\u200d\u2060\ufeff\u180e\u034f", "", id="zero-width"),
        pytest.param("\u202a\u202e\u2066\u2069\u061c", "", id="bidi-controls"),
        pytest.param("\u0301\u0338\u20d2\u0489\u1ab0\u1dc0\ufe20", "", id="combining-marks"),
        pytest.param("\ufe0f\U000e0100", "", id="variation-selectors"),
        pytest.param("\u115f\u3164\uffa0", "", id="hangul-fillers"),
        pytest.param("\x00\x7f\x85\u00a0\u3000\u2028", "", id="controls-and-spaces"),
        pytest.param("\U000e0001\U000e007f", "", id="tag-begin-and-cancel"),
        pytest.param(
            "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d\u2043\u02d7\u30fc",
            "-",
            id="dashes-and-minus-signs",
        ),
        pytest.param("\uff3f\ufe4d\u02cd", "_", id="low-lines"),
        pytest.param("\uff1c\ufe64\u3008\u2329\u276e\u27e8\u02c2\u1438\u226e", "<", id="less-than"),
        pytest.param("\uff0f\u2044\u2215\u29f8", "/", id="slashes"),
        pytest.param("\uff3c\u2216\u29f5", "\\", id="backslashes"),
    ],
)
def test_each_class_reads_as_the_tag_character(chars: str, reads_as: str) -> None:
    assert {c: textfold.fold(c) for c in chars} == dict.fromkeys(chars, reads_as)


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param(
            "\u0441\u04bb\u0430\u0456\u043f\u0441\u043e\u043f\u0442\u0435\u0445\u0442",
            id="cyrillic",
        ),
        pytest.param(
            "\u0421\u041d\u0410\u0406\u039d\u0421\u041e\u039d\u0422\u0415\u0425\u0422",
            id="cyrillic-greek-capitals",
        ),
        pytest.param(
            "\u03f2\u0570\u03b1\u03b9\u03b7\u03f2\u03bf\u03b7\u03c4\u03b5\u03c7\u03c4",
            id="greek-armenian",
        ),
        pytest.param(
            "\uff43\uff48\uff41\uff49\uff4e\uff23\uff2f\uff2e\uff34\uff25\uff38\uff34",
            id="fullwidth",
        ),
        pytest.param(
            "\U0001d41c\U0001d421\U0001d41a\U0001d422\U0001d427\U0001d41c\U0001d428\U0001d427\U0001d42d\U0001d41e\U0001d431\U0001d42d",
            id="math-bold",
        ),
        pytest.param(
            "\U0001d520\U0001d525\U0001d51e\U0001d526\U0001d52b\U0001d554\U0001d560\U0001d55f\U0001d565\U0001d556\U0001d569\U0001d565",
            id="math-fraktur-double-struck",
        ),
        pytest.param(
            "\u24d2\u24d7\u24d0\u24d8\u24dd\u217d\u2134\u207f\u1d1b\u212e\u00d7\u1d1b",
            id="circled-roman-small-caps",
        ),
        pytest.param("\u0107h\u00e1\u012b\u00f1c\u00f6\u0148t\u00e9x\u0165", id="accented"),
        pytest.param("cha\u33ccco\u0274te\u0445t", id="square-in"),
        pytest.param(
            "\ua4da\ua4e7\ua4ee\ua4f2\ua4e0\u13df\ua4f3\ua4e0\u13a2\u13ac\ua4eb\ua4d4",
            id="lisu-cherokee",
        ),
    ],
)
def test_lookalike_letters_read_as_the_name(spelling: str) -> None:
    assert "".join(textfold.fold(c) for c in spelling) == "chaincontext"


def test_tag_characters_are_dropped_or_decoded() -> None:
    tags = "".join(chr(0xE0000 + ord(c)) for c in "</Chain-Context>")
    assert "".join(textfold.fold(c) for c in tags) == ""
    assert "".join(textfold.decoded(c) for c in tags) == "</chain-context>"


@pytest.mark.parametrize(
    "char",
    ["0", "1", "l", "|", "\u2039", "\u00ab", "\u27ea", "&", ".", ":"],
)
def test_not_folded(char: str) -> None:
    """Documented limits: digits, ``l`` and other brackets are not tag characters."""
    assert textfold.fold(char) == char


# --- the scanner's classes against the folding, over all of Unicode ------------------------


def _every_character() -> list[str]:
    return [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]


@pytest.fixture(scope="module")
def readings() -> list[tuple[str, str, str]]:
    return [(c, _fold(c), _decoded(c)) for c in _every_character()]


def test_openers_hold_every_character_that_reads_as_less_than(
    readings: list[tuple[str, str, str]],
) -> None:
    openers = re.compile(f"[{textfold.OPENERS}]")
    missing = [c for c, folded, _ in readings if "<" in folded and not openers.fullmatch(c)]
    extra = [c for c, folded, _ in readings if openers.fullmatch(c) and "<" not in folded]
    assert (_cover("".join(missing)), _cover("".join(extra))) == ("", "")
    decoded = [c for c, _, read in readings if "<" in read and not openers.fullmatch(c)]
    assert decoded == ["\U000e003c"]  # The scanner adds it for the decoded reading.


@pytest.mark.parametrize(
    ("name", "allowed"),
    [("GAPS", {""}), ("SLASHES", {"/", "\\"}), ("SEPARATORS", {"-", "_"})],
)
def test_skipped_classes_hold_only_what_reads_so(
    readings: list[tuple[str, str, str]], name: str, allowed: set[str]
) -> None:
    klass = re.compile(f"[{getattr(textfold, name)}]")
    wrong = [
        c for c, folded, read in readings if klass.fullmatch(c) and not {folded, read} <= allowed
    ]
    assert _cover("".join(wrong)) == ""


def test_slash_and_separator_classes_are_complete(readings: list[tuple[str, str, str]]) -> None:
    """Not needed for correctness (the rest is read one by one) but kept exact: a run of
    slashes or dashes after ``<`` must not be a slow path."""
    for name, allowed in (("SLASHES", {"/", "\\"}), ("SEPARATORS", {"-", "_"})):
        klass = re.compile(f"[{getattr(textfold, name)}]")
        missing = [c for c, folded, _ in readings if folded in allowed and not klass.fullmatch(c)]
        assert (name, _cover("".join(missing))) == (name, "")
