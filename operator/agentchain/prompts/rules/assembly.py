"""Building an agent's prompt: pure text functions, no I/O.

Why it is shaped this way:

* **Event text is data, never code.**  A prompt template is rendered once, in a
  Jinja ``SandboxedEnvironment`` with no loader, and the event reaches it only
  as a plain ``dict`` of strings.  Jinja never re-renders a value it outputs,
  so an issue body holding ``{{ 7*7 }}`` or ``{% for %}`` arrives verbatim.
  Without a template the prompt is built with plain string concatenation, so
  that path cannot fail at all.  Unsafe attribute access in a *template*
  (``''.__class__``) raises immediately instead of rendering empty, and every
  template failure becomes one ``PromptRenderError`` the handler turns into
  reason ``PromptRenderFailed``.
* **Default deny for context (seed 001).**  ``dependency_section`` shows only
  results of dependencies that succeeded; nothing in, nothing out.
* **One assembly order, in one place** (``assemble_prompt``):
  ``chain_context`` (SPEC §2: a child prompt *starts* with its block), then
  learnings (seed 002: at the top, before any other work), the retry anchor
  (seed 004), store entries, dependency results, and the original prompt last.
* **Hand-off (seed 002).**  ``extract_handoff`` reads a parent's output the
  way a Markdown reader would (headings inside code fences are not headings)
  and takes the *last* matching section, since agents print conclusions last
  and may quote their instructions earlier.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Literal

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from agentchain.models.agentjob import JobEvent
from agentchain.models.conditions import Reason

# Linux refuses to exec a process when one argv/env string exceeds
# MAX_ARG_STRLEN (128 KiB), and the prompt travels as AGENT_PROMPT; a rendered
# template above this leaves room for the context sections added around it.
RENDERED_MAX_BYTES = 96 * 1024

DEPENDENCIES_HEADING = "## Context from prerequisite jobs"
CHAIN_RESULTS_HEADING = "## Results from this chain"
STORE_HEADING = "## Shared context store"
LEARNINGS_HEADING = "## MANDATORY: Learnings (read before any other work)"
ANCHOR_HEADING = "## Anchor from your previous attempt"

_SUCCEEDED = "Succeeded"
_EMPTY_VALUE = "(empty)"


class PromptRenderError(ValueError):
    """A prompt template could not be rendered; the message says why, for users."""

    reason: ClassVar[str] = Reason.PROMPT_RENDER_FAILED


class _PromptEnvironment(SandboxedEnvironment):
    """The sandbox, with unsafe attribute access as an error rather than ``""``.

    Undefined names render empty (``ChainableUndefined``), which would also
    swallow ``''.__class__.__mro__`` silently; a template author probing the
    sandbox should see a refusal, so that case raises ``SecurityError``.
    """

    def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )


_ENV = _PromptEnvironment(
    autoescape=False,
    undefined=jinja2.ChainableUndefined,
    loader=None,
    keep_trailing_newline=False,
)


@lru_cache(maxsize=256)
def _compiled(template: str) -> jinja2.Template:
    """Compiling costs ~50x a render, and every job of an agent has the same template;
    jinja caches only templates from a loader, and there is none here."""
    return _ENV.from_string(template)


# --------------------------------------------------------------------------- rendering


def render_prompt(
    template: str | None, event: JobEvent | None, *, agent: str, fallback: str = ""
) -> str:
    """Render an agent's prompt for one job.

    Template variables: ``event`` (the JobEvent as a dict with snake_case keys,
    or ``None``), ``agent`` (the agent's triggerName) and ``prompt`` (the
    ``fallback``, i.e. the job's original prompt).  With no template, the prompt
    is built from the event; with no event (or one without a name, as manual
    runs have), ``fallback`` is returned unchanged.
    """
    if template is None:
        if event is None or event.name is None:
            return fallback
        return default_prompt(event)
    try:
        rendered = _compiled(template).render(**template_variables(event, agent, fallback))
    except Exception as exc:  # Any template failure is the user's to fix, never a crash.
        raise PromptRenderError(_describe(exc)) from exc
    size = len(rendered.encode("utf-8", "replace"))
    if size > RENDERED_MAX_BYTES:
        raise PromptRenderError(
            f"prompt template rendered {size} bytes, more than the {RENDERED_MAX_BYTES} allowed"
        )
    return rendered


def template_variables(event: JobEvent | None, agent: str, prompt: str) -> dict[str, Any]:
    """What a ``promptTemplate`` sees (docs/prompts.md lists it; a test holds the two
    together): the event as plain data with snake_case keys (None without one), the
    agent's triggerName and the job's original prompt."""
    data = event.model_dump(mode="json") if event is not None else None
    return {"event": data, "agent": agent, "prompt": prompt}


def render_template(template: str, variables: Mapping[str, Any]) -> str:
    """Render a short template (a concurrency group) in the same sandbox as prompts,
    ``variables`` being plain data; raises PromptRenderError."""
    try:
        rendered = _compiled(template).render(**variables)
    except Exception as exc:  # Any template failure is the user's to fix, never a crash.
        raise PromptRenderError(_describe(exc)) from exc
    if len(rendered) > RENDERED_MAX_BYTES:
        raise PromptRenderError(f"template rendered more than {RENDERED_MAX_BYTES} characters")
    return rendered


def default_prompt(event: JobEvent) -> str:
    """``GitHub issues.opened in owner/repo #12: <title>``, the URL, then the body."""
    label = "GitHub" if event.source == "github" else event.source
    selector = event.name or "event"
    if event.action:
        selector += f".{event.action}"
    head = f"{label} {selector}"
    if event.repository:
        head += f" in {event.repository}"
    if event.number is not None:
        head += f" #{event.number}"
    if event.title:
        head += f": {event.title}"
    lines = [head]
    if event.url:
        lines.append(event.url)
    if event.body:
        lines += ["", event.body]
    return "\n".join(lines)


def _describe(exc: Exception) -> str:
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return f"prompt template syntax error on line {exc.lineno}: {exc.message}"
    if isinstance(exc, SecurityError):
        return f"prompt template refused by the sandbox: {exc}"
    if isinstance(exc, jinja2.TemplateError):
        return f"prompt template failed: {exc.message or type(exc).__name__}"
    return f"prompt template failed: {type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class DependencyResult:
    """What one finished job contributes to another's prompt."""

    name: str
    agent: str
    title: str
    phase: str
    result: str | None
    uid: str = ""
    """The job's uid: its captured output is that object's (``store/outputs.py``)."""


def dependency_section(
    results: Sequence[DependencyResult], *, scope: Literal["dependencies", "all"]
) -> str:
    """Results of other jobs, one ``### <title> (by <agent>)`` block each.

    ``dependencies`` (seed 001, the default scope): only dependencies that
    Succeeded with a non-empty result.  ``all`` (a coordinator's synthesis):
    every result of the chain, failed ones marked with their phase, since a
    synthesis should know what did not work.  A job listed twice appears once;
    no qualifying result gives ``""``, i.e. no context from anyone.
    """
    blocks: list[str] = []
    seen: set[str] = set()
    for dep in results:
        if dep.name in seen or not dep.result:
            continue
        if scope == "dependencies" and dep.phase != _SUCCEEDED:
            continue
        seen.add(dep.name)
        marker = "" if dep.phase == _SUCCEEDED else f", {dep.phase}"
        blocks.append(f"### {dep.title or dep.name} (by {dep.agent}{marker})\n{dep.result}")
    if not blocks:
        return ""
    heading = DEPENDENCIES_HEADING if scope == "dependencies" else CHAIN_RESULTS_HEADING
    return "\n\n".join([heading, *blocks])


def store_section(
    entries_by_namespace: Mapping[str, Sequence[tuple[str, str]]], *, budget_chars: int = 4000
) -> str:
    """Store entries under a heading per namespace, within ``budget_chars``.

    Entries are expected most recent first (the store's order) and kept in that
    order, so what a budget cuts is the oldest.  Each namespace gets an equal
    share of the budget, and what one leaves unused passes to the next; a
    namespace whose entries do not all fit ends with a visible
    ``… N more entries omitted`` line (the marker itself is outside the budget).
    """
    namespaces = [(ns, entries) for ns, entries in entries_by_namespace.items() if entries]
    if not namespaces:
        return ""
    parts = [STORE_HEADING]
    remaining = budget_chars - len(STORE_HEADING)
    for index, (namespace, entries) in enumerate(namespaces):
        share = remaining // (len(namespaces) - index)
        block, used = _namespace_block(namespace, entries, share)
        parts.append(block)
        remaining -= used
    return "\n\n".join(parts)


def _namespace_block(
    namespace: str, entries: Sequence[tuple[str, str]], share: int
) -> tuple[str, int]:
    heading = f"### Namespace `{namespace}`"
    lines = [heading]
    used = len(heading) + 2
    for key, value in entries:
        line = _entry_line(key, value)
        if used + len(line) + 1 > share:
            break
        lines.append(line)
        used += len(line) + 1
    omitted = len(entries) - (len(lines) - 1)
    if omitted:
        noun = "entry" if omitted == 1 else "entries"
        lines.append(f"… {omitted} more {noun} omitted (prompt size budget)")
    return "\n".join(lines), used


def _entry_line(key: str, value: str) -> str:
    # Continuation lines are indented so a multi-line value stays inside its item.
    text = value.replace("\n", "\n  ") if value else _EMPTY_VALUE
    return f"- `{key}`: {text}"


def learnings_section(learnings: Mapping[str, str]) -> str:
    """Seed 002's MANDATORY learnings directive, one block per source, sorted by name."""
    blocks = [
        f"### {name}\n{text.strip()}" for name, text in sorted(learnings.items()) if text.strip()
    ]
    if not blocks:
        return ""
    intro = (
        "Scan these learnings from earlier runs before any other work, and apply the ones "
        "relevant to the task below."
    )
    return "\n\n".join([LEARNINGS_HEADING, intro, *blocks])


def anchor_section(anchor: Mapping[str, Any] | None) -> str:
    """Seed 004: the state a retried attempt recorded, as a JSON block."""
    if not anchor:
        return ""
    intro = (
        "You are resuming this job. This is the state you recorded in an earlier attempt: "
        "continue from it, do not repeat completed work, and keep the decisions listed."
    )
    # JSON with indent puts every value on a line starting with whitespace or a
    # bracket, so nothing inside can close the fence.
    body = json.dumps(dict(anchor), indent=2, ensure_ascii=False, default=str)
    return f"{ANCHOR_HEADING}\n\n{intro}\n\n```json\n{body}\n```"


def assemble_prompt(
    *,
    original: str,
    chain_context: str | None = None,
    learnings: str = "",
    store: str = "",
    dependencies: str = "",
    anchor: str = "",
) -> str:
    """Join the sections in the documented order.

    Final order: ``chain_context`` (verbatim, it already ends in a blank line),
    learnings, anchor, store, dependencies, then ``original``.  Sections are
    separated by one blank line; empty ones leave no trace, so with only
    ``chain_context`` the result is exactly ``chain_context + original``, and
    with nothing at all it is ``original``.
    """
    sections = [s.strip("\n") for s in (learnings, anchor, store, dependencies) if s.strip()]
    body = "\n\n".join([*sections, original]) if original else "\n\n".join(sections)
    return (chain_context or "") + body


# --------------------------------------------------------------------------- output

# Lines of agent output are parsed by hand, not with regular expressions: patterns
# like ``(.*?)[ \t]*$`` backtrack quadratically on long runs of blanks, and
# each step here is one pass of a str method.
_BLANKS = " \t"
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")  # Nothing after the run: linear.
_PREFIX_ENDS = frozenset(":.)-\u2013\u2014")


def extract_handoff(output: str, heading: str) -> str | None:
    """The section of ``output`` under ``heading``, or None when there is none.

    A heading matches at any level when its text equals the wanted text
    (case-insensitive, closing ``#``s and emphasis ignored), also after a
    numbering prefix such as seed 002's ``## Section 3: Downstream Directives``.  The section
    ends at the next heading of the same or a higher level, or at a thematic
    break (seed 002 puts ``---`` before the completion marker).  Headings in
    code fences do not count.  The last match wins; an empty section is None,
    so the caller falls back to the raw output rather than passing nothing.
    """
    wanted = _heading_text(heading.lstrip().lstrip("#"))
    if not wanted:
        return None
    lines = output.splitlines()
    outline = _outline(lines)
    found = [(i, level) for i, level, text in outline if level and _matches(text, wanted)]
    if not found:
        return None
    start, level = found[-1]
    end = next((i for i, lvl, _ in outline if i > start and lvl <= level), len(lines))
    section = "\n".join(lines[start + 1 : end]).strip("\n")
    return section if section.strip() else None


def completion_marker_present(output: str, marker: str | None) -> bool:
    """Seed 002: exit 0 counts only with the marker in the output (None or "": no marker)."""
    return not marker or marker in output


def _outline(lines: Sequence[str]) -> list[tuple[int, int, str]]:
    """(line index, level, text) of headings, with level 0 for thematic breaks."""
    outline: list[tuple[int, int, str]] = []
    fence: str | None = None
    for index, line in enumerate(lines):
        opened = _FENCE.match(line)
        if fence is not None:
            # A fence closes with the same character, at least as long, alone on its line.
            if opened and opened.group(1).startswith(fence) and not line[opened.end() :].strip():
                fence = None
            continue
        if opened:
            fence = opened.group(1)
        elif heading := _atx_heading(line):
            outline.append((index, heading[0], _heading_text(heading[1])))
        elif _is_thematic_break(line):
            outline.append((index, 0, ""))
    return outline


def _indented(line: str) -> str | None:
    """``line`` without up to three leading spaces; None when indented more (code)."""
    rest = line.lstrip(" ")
    return rest if len(line) - len(rest) <= 3 else None


def _atx_heading(line: str) -> tuple[int, str] | None:
    """(level, text) of an ATX heading: 1-6 ``#``, then a blank or the end of the line."""
    rest = _indented(line)
    if not rest:
        return None
    text = rest.lstrip("#")
    level = len(rest) - len(text)
    if not 1 <= level <= 6 or text[:1] not in ("", " ", "\t"):
        return None
    return level, text.strip(_BLANKS)


def _is_thematic_break(line: str) -> bool:
    """Three or more of one of ``-*_``, with blanks between and around."""
    rest = _indented(line)
    if not rest or rest[0] not in "-*_":
        return False
    marks = rest.replace(" ", "").replace("\t", "")
    return len(marks) >= 3 and marks.count(rest[0]) == len(marks)


def _heading_text(text: str) -> str:
    """The comparable text of a heading: closing ``#``s, emphasis and case dropped."""
    text = text.strip()
    # A closing sequence is ``#``s after a blank, at the end.
    unclosed = text.rstrip("#")
    if unclosed != text and unclosed[-1:] in (" ", "\t"):
        text = unclosed.rstrip(_BLANKS)
    return text.strip("#").strip().strip("*_ \t").casefold()


def _matches(text: str, wanted: str) -> bool:
    if text == wanted:
        return True
    # A numbering prefix ("Section 3:", "3.", "C -") is allowed; a word ("Not") is not.
    prefix = text.removesuffix(wanted)
    return prefix != text and prefix.rstrip()[-1:] in _PREFIX_ENDS
