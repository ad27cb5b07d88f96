"""Every text routine that sees untrusted text runs in linear time (issue 14).

Agent output (up to a megabyte), issue bodies, store entries and anchor strings reach
these functions; a quadratic one stalls the operator for hours on one hostile output
(the old neutraliser took 15 s on 64 KiB of blanks, about an hour on a megabyte).
Each case feeds one function a megabyte-sized adversarial input: long runs of blanks
between the pieces a pattern looks for, runs of zero-width and combining characters,
tag characters, many openers, many near-misses.  It must finish within
``SECONDS`` (a few seconds at most today, on a loaded machine), orders of magnitude
below the quadratic code it replaced.  Each case runs in a forked child, so a
regression fails cleanly at the bound instead of hanging the run (a regular
expression cannot be interrupted).

Aspects covered: ``chaincontext.neutralise``/``neutralise_part``/``chain_context_block``/
``child_block``, ``assembly.extract_handoff`` (ATX headings, closing hashes, thematic
breaks, fences), the prompt sections built from store entries and dependency results,
``teamanchor`` updates with huge strings and fitting a damaged anchor of thousands of
entries, and ``naming.label_value``.
"""

from __future__ import annotations

import multiprocessing
import time
import warnings
from collections.abc import Callable

import pytest

from agentchain.core.rules import naming
from agentchain.models.aiagent import ContextWindow
from agentchain.prompts.rules import assembly, chaincontext, teamanchor
from agentchain.prompts.rules.assembly import DependencyResult

MIB = 1 << 20
SECONDS = 30.0
HEADING = "## Downstream Directives"


def _finishes(work: Callable[[], object]) -> float:
    """Run ``work`` in a child process; fail unless it returns within SECONDS."""
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=work)
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads, 3.12+
        child.start()
    child.join(SECONDS)
    elapsed = time.monotonic() - started
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail(f"did not finish within {SECONDS:.0f} s: not linear")
    assert child.exitcode == 0, "the child failed its own check (see its traceback above)"
    return elapsed


def _neutralise_keeps_length(text: str) -> Callable[[], None]:
    def work() -> None:
        assert len(chaincontext.neutralise(text)) == len(text)

    return work


NEUTRALISE_INPUTS = {
    "blanks-between-less-than-and-x": "<" + " " * MIB + "x",
    "blanks-before-a-real-tag": "<" + " " * MIB + "/chain-context>",
    "zero-width-alternation": "<" + "\u200b\u200c\u2060\ufeff" * (MIB // 4) + "x",
    "soft-hyphens-and-marks": "<" + "\u00ad\u0301" * (MIB // 2) + "x",
    "rare-invisible-run": "<" + "\U0001d173" * MIB + "x",
    "spacing-accent-run": "<" + "\u00b4" * MIB + "x",
    "slashes": "<" + "/\\" * (MIB // 2) + "x",
    "separators": "<chain" + "-_\u2014" * (MIB // 3) + "x",
    "openers": "<" * MIB,
    "lookalike-openers": "\uff1c\u3008\u2329" * (MIB // 3),
    "tag-character-openers": "<" + "\U000e003c" * MIB,
    "tag-character-spaces": "<" + "\U000e0020" * MIB + "x",
    "near-misses": "<chai" * (MIB // 5),
    "whole-tags": "</chain-context>" * (MIB // 16),
    "prose": "if a < b and c > d then <div>chain</div>\n" * (MIB // 40),
}


@pytest.mark.parametrize("text", NEUTRALISE_INPUTS.values(), ids=NEUTRALISE_INPUTS.keys())
def test_neutralise(text: str) -> None:
    _finishes(_neutralise_keeps_length(text))


@pytest.mark.parametrize("window", ["head", "tail"])
def test_block_with_a_megabyte_limit(window: ContextWindow) -> None:
    text = ("<" + " " * 1000 + "/chain-context ") * (MIB // 1016)

    def work() -> None:
        block = chaincontext.chain_context_block(text, window=window, limit=MIB)
        assert "<" not in block[len(chaincontext.OPEN_TAG) : -len(chaincontext.CLOSE_TAG) - 2]

    _finishes(work)


def test_block_part_scans_one_tag_past_the_cut() -> None:
    text = "x" * 10 + "<" + " " * MIB + "/chain-context>"

    def work() -> None:
        assert chaincontext.neutralise_part(text, 0, 11) == "x" * 10 + "\u2039"

    _finishes(work)


HANDOFF_INPUTS = {
    "heading-text-then-blanks": "# a" + " " * MIB + "b",
    "heading-blanks-then-hashes": "## a" + " \t" * (MIB // 2) + "#" * 7 + "x",
    "hashes-then-blanks": "#" * 6 + " " * MIB,
    "spaced-closing-hashes": "# a" + " #" * (MIB // 2),
    "thematic-break-near-miss": "- " * (MIB // 2) + "x",
    "blank-lines": "\n" * MIB,
    "many-headings": "## Downstream Directives\nx\n" * (MIB // 27),
    "long-fence": "`" * MIB + "\n" + "~" * MIB,
    "fence-then-blanks": "```" + " " * MIB + "x\n## Downstream Directives\nA",
}


@pytest.mark.parametrize("text", HANDOFF_INPUTS.values(), ids=HANDOFF_INPUTS.keys())
def test_extract_handoff(text: str) -> None:
    _finishes(lambda: assembly.extract_handoff(text, HEADING))


@pytest.mark.parametrize("text", HANDOFF_INPUTS.values(), ids=HANDOFF_INPUTS.keys())
def test_child_block(text: str) -> None:
    _finishes(lambda: chaincontext.child_block(text, window="tail", handoff_heading=HEADING))


def test_heading_text() -> None:
    _finishes(lambda: assembly._heading_text("a" + " " * MIB + "b"))


def test_prompt_sections() -> None:
    value = ("<" + " " * 100 + "\n") * (MIB // 102)

    def work() -> None:
        assembly.store_section({"ns": [("k", value)] * 4}, budget_chars=8 * MIB)
        result = DependencyResult("a", "dev", "t", "Succeeded", value)
        assembly.dependency_section([result] * 4, scope="dependencies")
        assembly.assemble_prompt(original=value, store=value, dependencies=value)

    _finishes(work)


def test_team_anchor_strings() -> None:
    huge = '\u00e9\\"' * (MIB // 3)

    def work() -> None:
        anchor = teamanchor.job_update(
            {},
            chain_id=huge,
            job=huge,
            agent=huge,
            depth=1,
            phase=huge,
            reason=huge,
            attempt=1,
            at=huge,
            limit=4096,
        )
        anchor = teamanchor.hop_update(
            anchor,
            chain_id=huge,
            parent=huge,
            parent_agent=huge,
            action="refused",
            child=huge,
            child_agent=huge,
            reason=huge,
            message=huge,
            at=huge,
            limit=4096,
        )
        assert teamanchor.serialized_size(anchor) <= 4096

    _finishes(work)


def test_team_anchor_with_thousands_of_entries() -> None:
    """A damaged (oversized) stored anchor: fitting it once took minutes."""
    n = 5000
    anchor = {
        "chainId": "c",
        "decisions": [{"job": f"j{i}", "action": "none", "at": "2026"} for i in range(n)],
        "handoffs": [{"from": f"j{i}", "to": "x", "at": "2026"} for i in range(n)],
        "jobs": {
            f"j{i}": {"agent": "a", "phase": "Succeeded", "updatedAt": "2026"} for i in range(n)
        },
    }

    def work() -> None:
        assert teamanchor.serialized_size(teamanchor.fit(anchor, 4096)) <= 4096

    _finishes(work)


def test_label_value() -> None:
    _finishes(lambda: naming.label_value("a-" * MIB + "!" + " " * MIB))
