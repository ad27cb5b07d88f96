"""docs/prompts.md against the code: template variables, event keys, anchor fields, limits.

Aspects covered:
* the variables a ``promptTemplate`` and a ``concurrency.group`` see are exactly the ones
  the page lists for each (they differ), and ``event``'s keys are the JobEvent's fields;
* the anchor fields and their JSON types are the store's;
* every size limit the page states is the constant the code enforces.
"""

from __future__ import annotations

from pathlib import Path

from agentchain.flow.rules import concurrency
from agentchain.github.rules import matching
from agentchain.hop.rules import jobspec
from agentchain.memory import anchors
from agentchain.models.agentjob import JobEvent
from agentchain.prompts.rules import assembly
from agentchain.web import schemas

DOC = Path(__file__).resolve().parents[2] / "docs" / "prompts.md"
JSON_TYPES: dict[type, str] = {str: "string", list: "array"}


def _table(heading: str) -> dict[str, str]:
    """The rows (first column's name without backticks -> second column) under ``heading``."""
    section = DOC.read_text().split(f"\n{heading}\n", 1)[1]
    rows: dict[str, str] = {}
    for line in section.split("\n#", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def test_prompt_template_variables_are_the_documented_ones() -> None:
    event = JobEvent(source="github", name="issues")
    assert set(assembly.template_variables(event, "a", "p")) == set(
        _table("### Variables of `promptTemplate`")
    )


def test_group_variables_are_the_documented_ones() -> None:
    documented = _table("### Variables of `concurrency.group`")
    assert set(concurrency.group_variables(JobEvent(), "a")) == set(documented)
    assert set(concurrency.group_variables(None, "a")) == set(documented)


def test_event_keys_are_the_job_events_fields() -> None:
    data = assembly.template_variables(JobEvent(), "a", "p")["event"]
    assert set(data) == set(JobEvent.model_fields) == set(_table("### Keys of `event`"))


def test_anchor_fields_and_types_are_the_stores() -> None:
    documented = _table("## Anchors")
    expected = {
        name: " or ".join(JSON_TYPES[t] for t in types)
        for name, types in anchors.JOB_ANCHOR_FIELDS.items()
    }
    assert documented == expected
    text = DOC.read_text()
    assert f"{anchors.JOB_ANCHOR_MAX_BYTES:,} bytes" in text
    assert f"{anchors.TEAM_ANCHOR_MAX_BYTES:,} bytes" in text


def test_limits_are_the_enforced_constants() -> None:
    text = DOC.read_text().split("\n## Size limits\n", 1)[1]
    for number, unit in (
        (matching.TITLE_MAX_BYTES, "bytes"),
        (matching.BODY_MAX_BYTES, "bytes"),
        (schemas.PROMPT_MAX_CHARS, "characters"),
        (assembly.RENDERED_MAX_BYTES, "bytes"),
        (jobspec.PROMPT_MAX_BYTES, "bytes"),
        (jobspec.ENV_PROMPT_MAX_BYTES, "bytes"),
    ):
        assert f"| {number:,} {unit}" in text, (number, unit)
    assert f"| {matching.LABELS_MAX} labels, each {matching.LABEL_MAX_BYTES} bytes |" in text
