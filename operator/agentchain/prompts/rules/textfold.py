"""How the ``<chain-context>`` recogniser reads one character: its *readings*.

A model does not read code points, it reads what they look like and what they
normalise to.  So before :mod:`agentchain.prompts.rules.chaincontext` looks for a tag, every
character is folded, on its own, to what it can be read as:

1. **Gaps read as nothing** (``""``): whitespace (``str.isspace``), control and
   format characters (categories Cc, Cf: zero-width space and joiners, BOM, soft
   hyphen, bidi controls...), combining marks (Mn, Mc, Me) and every other
   *default-ignorable* code point (Hangul fillers, variation selectors...).
2. **Tag characters** U+E0020 to U+E007E read as nothing (:func:`fold`, they are
   default-ignorable) *or*, in a second reading of the whole text, as the ASCII
   character each encodes (:func:`decoded`): a model may drop them or decode them
   ("ASCII smuggling"), so the recogniser tries both.
3. **Everything else** is decomposed with NFKD (fullwidth and small less-than
   signs, mathematical and circled letters, ligatures, the square ``in`` U+33CC...),
   the gaps it decomposes into are dropped (accents), the rest is case-folded, and
   each resulting
   character goes through :data:`LOOKALIKES`, a table of cross-script homoglyphs of
   the characters the tag is made of: ``<``, ``/``, ``\\``, ``-``, ``_`` and the
   letters of ``chain`` and ``context`` (Cyrillic, Greek, Armenian, Coptic, Lisu and
   Cherokee letters, small capitals, dashes and minus signs, angle brackets...).

The table is deliberately small and listed here in full; it is not Unicode's whole
``confusables.txt``.  No ASCII character is in it (ASCII letters only fold case:
``1`` and ``l`` do not read as ``i``, ``0`` not as ``o``), and U+2039 (single
left-pointing angle quotation mark) reads only as itself: the neutraliser writes it.

Folding is per character, cached, and constant-time.  The character classes the
scanner uses to skip ahead in C (:data:`GAPS`, :data:`OPENERS`...) are written out
below and checked against this function over all of Unicode by the tests.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

TAG_CHARS = (0xE0020, 0xE007E)
INERT = "\u2039"

# Default_Ignorable_Code_Point (DerivedCoreProperties.txt) outside the categories
# that are gaps anyway.
_IGNORABLE_RANGES = (
    (0x115F, 0x1160),
    (0x2065, 0x2065),
    (0x3164, 0x3164),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_GAP_CATEGORIES = frozenset({"Cc", "Cf", "Mn", "Mc", "Me"})


def _table(groups: dict[str, str]) -> dict[str, str]:
    return {char: target for target, chars in groups.items() for char in chars}


LOOKALIKES: dict[str, str] = _table(
    {
        # Angle brackets and other less-than signs (not U+2039, the neutraliser's own).
        "<": "\u02c2\u1438\u16b2\u2329\u276c\u276e\u2770\u27e8\u29fc\u3008\U0001d236",
        "/": "\u1735\u2044\u2215\u2571\u27cb\u29f8\u3033",
        "\\": "\u2216\u2572\u27cd\u29f5\u29f9",
        "-": "\u02d7\u058a\u05be\u1400\u1806\u2010\u2011\u2012\u2013\u2014\u2015\u2043"
        "\u2212\u2500\u2501\u2796\u2e3a\u2e3b\u30fc\ufe58",
        "_": "\u02cd",
        # Letters: lowercase forms (case folding runs first), plus capitals whose own
        # lowercase looks different (Greek Eta is H, its lowercase looks like n).
        "a": "\u0251\u0430\u03b1\u1d00\u237a\ua4ee\u13aa",
        "c": "\u0441\u03f2\u03f9\u2ca5\u1d04\ua4da\u13df",
        "e": "\u0435\u03b5\u212e\u1d07\ua4f0\u13ac",
        "h": "\u04bb\u0570\u029c\u0397\u041d\u043d\u2c8e\u2c8f\ua4e7\u13bb\u13c2",
        "i": "\u0131\u0269\u026a\u0456\u03b9\u04c0\u04cf\u2373\ua4f2\u13a5",
        "n": "\u03b7\u043f\u0578\u057c\u0274\u039d\u2c9a\u2c9b\ua4e0",
        "o": "\u043e\u03bf\u03c3\u0585\u2c9f\u1d0f\ua4f3",
        "t": "\u0442\u0422\u03c4\u2ca6\u2ca7\u1d1b\ua4d4\u13a2",
        "x": "\u0445\u03c7\u2cad\u00d7\u2a2f\ua4eb",
    }
)


def _is_gap(char: str) -> bool:
    if char.isspace() or unicodedata.category(char) in _GAP_CATEGORIES:
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _IGNORABLE_RANGES)


@lru_cache(maxsize=4096)
def fold(char: str) -> str:
    """What ``char`` reads as, outside tag characters: ``""`` for a gap (see module doc)."""
    if _is_gap(char):
        return ""
    if char in LOOKALIKES:  # Before NFKD: Greek lunate sigma looks like c, not like sigma.
        return LOOKALIKES[char]
    out: list[str] = []
    for part in unicodedata.normalize("NFKD", char):
        if _is_gap(part):
            continue
        for folded in LOOKALIKES.get(part, part).casefold():
            if not _is_gap(folded):
                out.append(LOOKALIKES.get(folded, folded))
    return "".join(out)


@lru_cache(maxsize=256)
def decoded(char: str) -> str:
    """What ``char`` reads as when tag characters are decoded to the ASCII they encode."""
    code = ord(char)
    if TAG_CHARS[0] <= code <= TAG_CHARS[1]:
        return fold(chr(code - 0xE0000))
    return fold(char)


# --- character classes ---------------------------------------------------------------
# The scanner skips runs of these in C.  They are what ``readings`` gives, written out
# so that importing costs nothing; tests/unit/prompts/rules/test_textfold.py derives them
# again from ``readings`` over all of Unicode.  OPENERS must hold *every* character
# with a ``<`` in a reading (a missing one would be a tag the scanner never starts
# at); the other classes need only never hold a character that reads otherwise.

OPENERS = (
    "<\u02c2\u1438\u16b2\u226e\u2329\u276c\u276e\u2770\u27e8\u29fc\u3008\ufe3f"
    "\ufe64\uff1c\U0001d236"
)
"""Every character whose :func:`fold` contains ``<`` (:func:`decoded`: and U+E003C)."""
SLASHES = (
    "/\\\\\u1735\u2044\u2215-\u2216\u2571-\u2572\u27cb\u27cd\u29f5\u29f8-\u29f9\u3033"
    "\ufe68\uff0f\uff3c"
)
SEPARATORS = (
    "\\-_\u02cd\u02d7\u058a\u05be\u1400\u1806\u2010-\u2015\u2043\u207b\u208b\u2212"
    "\u2500-\u2501\u2796\u2e3a-\u2e3b\u30fc\ufe31-\ufe34\ufe4d-\ufe4f\ufe58\ufe63"
    "\uff0d\uff3f\uff70"
)
GAPS = (
    "\\s\x00-\x1f\x7f-\x9f\xad\u0300-\u036f\u0483-\u0489\u061c\u115f-\u1160"
    "\u17b4-\u17b5\u180b-\u180f\u1ab0-\u1ace\u1dc0-\u1dff\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u20d0-\u20f0\u3164\ufe00-\ufe0f\ufe20-\ufe2f\ufeff\uffa0"
    "\ufff0-\ufff8\U0001d173-\U0001d17a\U000e0000-\U000e001f\U000e007f-\U000e0fff"
)
"""Characters that :func:`fold` and :func:`decoded` both read as nothing: the common
ones, not all (the rest are read one by one)."""
TAG_CHAR_CLASS = "\U000e0020-\U000e007e"
