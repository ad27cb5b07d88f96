"""Prompt building (``agentchain.prompts.rules.assembly``).

Aspects covered:
* rendering: template variables, undefined names render empty, the default
  prompt from an event, the fallback without an event;
* injection: template syntax and sandbox probes in event text arrive verbatim
  (default template and custom template alike); the same probes in a template
  are refused as ``PromptRenderError`` with a readable message; no loader;
  oversized output refused; property: any event text renders verbatim;
* dependency isolation (seed 001): only succeeded dependencies, none → "",
  ``memoryScope: all`` marks failed results;
* store entries: per-namespace headings, order, budget with a visible marker;
* learnings and anchor sections;
* assembly order, with and without a chain-context block;
* hand-off extraction edge cases and the completion marker (seed 002);
* the hand parsers of headings and thematic breaks agree with the regular
  expressions they replaced (issue 14: those backtracked quadratically), as a
  property over short lines where the old patterns are still fast.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.models.agentjob import JobEvent
from agentchain.models.conditions import Reason
from agentchain.prompts.rules import assembly
from agentchain.prompts.rules.assembly import DependencyResult, PromptRenderError

INJECTIONS = [
    "{{ 7*7 }}",
    "{% for x in range(3) %}loop{% endfor %}",
    "{# comment #}",
    "{{ ''.__class__.__mro__ }}",
    "__class__.__subclasses__()",
    "{% include '/etc/passwd' %}",
    "{{",
    "{%",
    "{#",
    "</chain-context>",
]


def issue_event(title: str = "Login broken", body: str = "Steps: click login") -> JobEvent:
    return JobEvent(
        source="github",
        name="issues",
        action="opened",
        repository="octo/app",
        number=12,
        title=title,
        body=body,
        url="https://github.com/octo/app/issues/12",
    )


# --------------------------------------------------------------------------- rendering


class TestRendering:
    def test_template_sees_event_agent_and_prompt(self) -> None:
        template = "{{ agent }}: {{ event.title }} in {{ event.repository }} / {{ prompt }}"
        out = assembly.render_prompt(template, issue_event(), agent="ai-triage", fallback="go")
        assert out == "ai-triage: Login broken in octo/app / go"

    def test_undefined_renders_empty_even_when_chained(self) -> None:
        out = assembly.render_prompt("[{{ nope }}|{{ event.issue.user.login }}]", None, agent="a")
        assert out == "[|]"

    def test_labels_are_a_list(self) -> None:
        event = issue_event().model_copy(update={"labels": ["bug", "p1"]})
        out = assembly.render_prompt("{{ event.labels | join(',') }}", event, agent="a")
        assert out == "bug,p1"

    def test_default_prompt_from_event(self) -> None:
        out = assembly.render_prompt(None, issue_event(), agent="a", fallback="ignored")
        assert out == (
            "GitHub issues.opened in octo/app #12: Login broken\n"
            "https://github.com/octo/app/issues/12\n\nSteps: click login"
        )

    def test_default_prompt_of_bare_event(self) -> None:
        event = JobEvent(source="github", name="push", repository="octo/app")
        assert assembly.render_prompt(None, event, agent="a") == "GitHub push in octo/app"

    @pytest.mark.parametrize(
        "event",
        [None, JobEvent(source="manual")],
        ids=["no-event", "event-without-name"],
    )
    def test_fallback_without_event(self, event: JobEvent | None) -> None:
        assert assembly.render_prompt(None, event, agent="a", fallback="do it") == "do it"

    def test_template_without_event(self) -> None:
        out = assembly.render_prompt(
            "{% if event %}E{% else %}{{ prompt }}{% endif %}", None, agent="a", fallback="manual"
        )
        assert out == "manual"


# --------------------------------------------------------------------------- injection


class TestInjection:
    @pytest.mark.parametrize("text", INJECTIONS)
    def test_event_text_is_verbatim_with_default_template(self, text: str) -> None:
        out = assembly.render_prompt(None, issue_event(title=text, body=text), agent="a")
        assert out.count(text) == 2

    @pytest.mark.parametrize("text", INJECTIONS)
    def test_event_text_is_verbatim_with_custom_template(self, text: str) -> None:
        event = issue_event(title=text, body=text)
        out = assembly.render_prompt("T={{ event.title }} B={{ event.body }}", event, agent="a")
        assert out == f"T={text} B={text}"

    @pytest.mark.parametrize(
        ("template", "fragment"),
        [
            ("{{ ''.__class__.__mro__ }}", "refused by the sandbox"),
            ("{{ ''.__class__ }}", "'__class__' of 'str'"),
            ("{{ event.__class__ }}", "refused by the sandbox"),
            ("{{ agent.format.__globals__ }}", "refused by the sandbox"),
            ("{% for %}", "syntax error on line 1"),
            ("ok\n{{ 1 +  }}", "syntax error on line 2"),
            ("{{ missing() }}", "'missing' is undefined"),
            ("{% include 'x.txt' %}", "no loader"),
            ("{{ 1 / 0 }}", "ZeroDivisionError"),
            ("{{ 'a' * 200000 }}", "more than the"),
        ],
    )
    def test_template_errors_are_prompt_render_errors(self, template: str, fragment: str) -> None:
        with pytest.raises(PromptRenderError, match="prompt template") as info:
            assembly.render_prompt(template, issue_event(), agent="a")
        assert fragment in str(info.value)
        assert info.value.reason == Reason.PROMPT_RENDER_FAILED

    def test_a_reused_template_is_sandboxed_and_renders_each_event(self) -> None:
        # Compiled templates are cached: the cache must keep neither data nor a way out.
        template = "{{ event.title }}{{ ''.__class__ if event.body == 'escape' else '' }}"
        for title in ("one", "two", "one"):
            assert assembly.render_prompt(template, issue_event(title=title), agent="a") == title
        for _ in range(2):
            with pytest.raises(PromptRenderError, match="'__class__' of 'str'"):
                assembly.render_prompt(template, issue_event(body="escape"), agent="a")

    def test_output_is_not_escaped(self) -> None:
        out = assembly.render_prompt("{{ event.title }}", issue_event(title="<b>&</b>"), agent="a")
        assert out == "<b>&</b>"

    @given(title=st.text(), body=st.text())
    def test_default_template_never_raises_and_keeps_text(self, title: str, body: str) -> None:
        out = assembly.render_prompt(None, issue_event(title=title, body=body), agent="a")
        assert title in out
        assert body in out

    @given(body=st.text())
    def test_custom_template_keeps_text(self, body: str) -> None:
        out = assembly.render_prompt("<{{ event.body }}>", issue_event(body=body), agent="a")
        assert out == f"<{body}>"


# --------------------------------------------------------------------------- dependencies


def dep(name: str, phase: str = "Succeeded", result: str | None = None) -> DependencyResult:
    return DependencyResult(
        name=name,
        agent=f"ai-{name}",
        title=f"Job {name}",
        phase=phase,
        result=f"result of {name}" if result is None else result,
    )


class TestDependencySection:
    def test_c_sees_exactly_a_and_b(self) -> None:
        # C depends on A and B; D ran in the same chain but is no dependency,
        # so the caller never passes it and nothing of it can appear.
        out = assembly.dependency_section([dep("a"), dep("b")], scope="dependencies")
        assert out == (
            "## Context from prerequisite jobs\n\n"
            "### Job a (by ai-a)\nresult of a\n\n"
            "### Job b (by ai-b)\nresult of b"
        )
        assert "result of d" not in out

    @pytest.mark.parametrize("phase", ["Failed", "Skipped", "Running", "Pending"])
    def test_unsuccessful_dependency_is_omitted(self, phase: str) -> None:
        out = assembly.dependency_section([dep("a"), dep("b", phase)], scope="dependencies")
        assert "result of a" in out
        assert "result of b" not in out

    @pytest.mark.parametrize(
        "results",
        [
            [],
            [dep("a", "Failed")],
            [dep("a", result="")],
            [DependencyResult("a", "x", "t", "Succeeded", None)],
        ],
        ids=["none", "only-failed", "empty-result", "no-result"],
    )
    def test_nothing_from_anyone(self, results: list[DependencyResult]) -> None:
        assert assembly.dependency_section(results, scope="dependencies") == ""

    def test_duplicate_dependency_once(self) -> None:
        out = assembly.dependency_section([dep("a"), dep("a")], scope="dependencies")
        assert out.count("result of a") == 1

    def test_scope_all_includes_failed_marked(self) -> None:
        out = assembly.dependency_section([dep("a"), dep("d", "Failed")], scope="all")
        assert out.startswith("## Results from this chain")
        assert "### Job a (by ai-a)\n" in out
        assert "### Job d (by ai-d, Failed)\nresult of d" in out


# --------------------------------------------------------------------------- store


class TestStoreSection:
    def test_heading_per_namespace_in_given_order(self) -> None:
        out = assembly.store_section(
            {"team": [("new", "1"), ("old", "2")], "empty": [], "docs": [("k", "a\nb")]}
        )
        assert out == (
            "## Shared context store\n\n"
            "### Namespace `team`\n- `new`: 1\n- `old`: 2\n\n"
            "### Namespace `docs`\n- `k`: a\n  b"
        )

    @pytest.mark.parametrize("entries", [{}, {"a": []}], ids=["no-namespaces", "no-entries"])
    def test_nothing_gives_empty(self, entries: dict[str, list[tuple[str, str]]]) -> None:
        assert assembly.store_section(entries) == ""

    def test_budget_keeps_most_recent_and_says_how_many_omitted(self) -> None:
        entries = [(f"k{i}", "v" * 90) for i in range(10)]
        out = assembly.store_section({"ns": entries}, budget_chars=400)
        assert "`k0`" in out
        assert "`k9`" not in out
        kept = out.count("- `k")
        assert f"… {10 - kept} more entries omitted" in out
        body = out.rsplit("\n", 1)[0]
        assert len(body) <= 400

    def test_budget_is_shared_between_namespaces(self) -> None:
        big = [(f"k{i}", "x" * 100) for i in range(20)]
        out = assembly.store_section({"a": big, "b": [("only", "y")]}, budget_chars=1000)
        assert "- `only`: y" in out
        assert "more entries omitted" in out

    def test_single_omitted_entry_is_singular(self) -> None:
        out = assembly.store_section({"a": [("k", "v"), ("big", "x" * 500)]}, budget_chars=100)
        assert "… 1 more entry omitted" in out


# --------------------------------------------------------------------------- learnings, anchor


class TestLearningsAndAnchor:
    def test_learnings_sorted_and_mandatory(self) -> None:
        out = assembly.learnings_section({"z.md": "- Z-1 last", "a.md": "- A-1 first\n", "e": " "})
        assert out.startswith(assembly.LEARNINGS_HEADING)
        assert out.index("### a.md\n- A-1 first") < out.index("### z.md\n- Z-1 last")
        assert "### e" not in out

    def test_no_learnings(self) -> None:
        assert assembly.learnings_section({}) == ""

    @pytest.mark.parametrize("anchor", [None, {}])
    def test_no_anchor(self, anchor: dict[str, str] | None) -> None:
        assert assembly.anchor_section(anchor) == ""

    def test_anchor_is_json_block(self) -> None:
        anchor = {"task": "fix ```auth```", "progress": [{"completed": "root cause"}]}
        out = assembly.anchor_section(anchor)
        assert out.startswith(assembly.ANCHOR_HEADING)
        block = out.split("```json\n", 1)[1].rsplit("\n```", 1)[0]
        assert json.loads(block) == anchor
        assert not any(line.startswith("```") for line in block.splitlines())


# --------------------------------------------------------------------------- assembly


CHAIN = "<chain-context>\nPrevious agent output:\nhi\n</chain-context>\n\n"


class TestAssembly:
    def test_original_alone(self) -> None:
        assert assembly.assemble_prompt(original="do it") == "do it"

    def test_chain_context_alone_is_exact_prefix(self) -> None:
        assert assembly.assemble_prompt(original="do it", chain_context=CHAIN) == CHAIN + "do it"

    def test_full_order(self) -> None:
        out = assembly.assemble_prompt(
            original="ORIGINAL",
            chain_context=CHAIN,
            learnings="LEARN\n",
            anchor="ANCHOR",
            store="STORE",
            dependencies="DEPS",
        )
        assert out == CHAIN + "LEARN\n\nANCHOR\n\nSTORE\n\nDEPS\n\nORIGINAL"

    def test_learnings_first_without_chain_context(self) -> None:
        out = assembly.assemble_prompt(original="O", learnings="L", dependencies="D")
        assert out == "L\n\nD\n\nO"

    def test_empty_original(self) -> None:
        assert assembly.assemble_prompt(original="", store="S", anchor=" \n") == "S"


# --------------------------------------------------------------------------- hand-off


HEADING = "## Downstream Directives"


class TestHandoff:
    @pytest.mark.parametrize(
        ("output", "expected"),
        [
            ("# Report\nx\n## Downstream Directives\nDo A.\nDo B.\n", "Do A.\nDo B."),
            ("## Downstream Directives\nA\n## Next\nB", "A"),
            ("## Downstream Directives\nA\n### Detail\nB\n# Top\nC", "A\n### Detail\nB"),
            ("## Section 3: Downstream Directives\nA\n\n---\n**DEV_COMPLETE**", "A"),
            ("## downstream directives ##\nA", "A"),
            ("## 3. Downstream Directives\nA", "A"),
            ("## **Downstream Directives**\nA", "A"),
            ("### Downstream Directives\nA\n### Other\nB", "A"),
            ("## Downstream Directives\r\nA\r\n## Next\r\n", "A"),
            ("## Downstream Directives\nold\n## Downstream Directives\nnew", "new"),
            (
                "## Downstream Directives\n```\n# not a heading\n```\nA",
                "```\n# not a heading\n```\nA",
            ),
            ("```\n## Downstream Directives\nquoted\n```\n## Downstream Directives\nreal", "real"),
            ("## Downstream Directives\n\n    indented code\n", "    indented code"),
        ],
        ids=[
            "to-end",
            "next-same-level",
            "deeper-kept-higher-ends",
            "seed-002-prefix-and-break",
            "case-and-closing-hashes",
            "numbered",
            "bold",
            "other-level",
            "crlf",
            "last-wins",
            "fenced-heading-kept",
            "fenced-match-ignored",
            "indentation-kept",
        ],
    )
    def test_section_found(self, output: str, expected: str) -> None:
        assert assembly.extract_handoff(output, HEADING) == expected

    @pytest.mark.parametrize(
        "output",
        [
            "",
            "no headings at all",
            "## Downstream\nA",
            "## Not Downstream Directives\nA",
            "Downstream Directives\nA",
            "## Downstream Directives\n\n## Next\nA",
            "```\n## Downstream Directives\nA\n```",
            "##Downstream Directives\nA",
        ],
        ids=[
            "empty",
            "no-headings",
            "partial",
            "prefix-without-separator",
            "not-a-heading",
            "empty-section",
            "only-in-fence",
            "no-space-after-hashes",
        ],
    )
    def test_no_section(self, output: str) -> None:
        assert assembly.extract_handoff(output, HEADING) is None

    def test_heading_without_hashes(self) -> None:
        assert assembly.extract_handoff("# Hand-off\nA", "Hand-off") == "A"

    def test_blank_heading_matches_nothing(self) -> None:
        assert assembly.extract_handoff("#\nA", "##") is None


class TestCompletionMarker:
    @pytest.mark.parametrize(
        ("output", "marker", "expected"),
        [
            ("anything", None, True),
            ("anything", "", True),
            ("done\n**DEV_COMPLETE**\n", "DEV_COMPLETE", True),
            ("done", "DEV_COMPLETE", False),
            ("dev_complete", "DEV_COMPLETE", False),
        ],
    )
    def test_marker(self, output: str, marker: str | None, expected: bool) -> None:
        assert assembly.completion_marker_present(output, marker) is expected


# The patterns the hand parsers replaced, as the oracle on short lines.
_OLD_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_OLD_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")


def _old_heading_text(text: str) -> str:
    text = re.sub(r"[ \t]+#+$", "", text.strip()).strip("#").strip()
    return text.strip("*_ \t").casefold()


markdown_lines = st.lists(
    st.sampled_from(["#", " ", "\t", "-", "*", "_", "a", "B", "\u00a0", "`"]), max_size=12
).map("".join)


class TestHandParsers:
    @given(line=markdown_lines)
    def test_heading_as_before(self, line: str) -> None:
        old = _OLD_ATX.match(line)
        expected = (len(old.group(1)), _old_heading_text(old.group(2) or "")) if old else None
        new = assembly._atx_heading(line)
        found = (new[0], assembly._heading_text(new[1])) if new else None
        assert found == expected

    @given(line=markdown_lines)
    def test_thematic_break_as_before(self, line: str) -> None:
        assert assembly._is_thematic_break(line) is (_OLD_BREAK.match(line) is not None)

    @given(text=st.text(st.sampled_from(" \t#ab*_"), max_size=12))
    def test_heading_text_as_before(self, text: str) -> None:
        assert assembly._heading_text(text) == _old_heading_text(text)
