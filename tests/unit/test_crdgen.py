"""CRDs and the CRD reference generated from the pydantic models.

Aspects covered:
- drift: ``crds/*.yaml`` and ``docs/reference/crds.md`` equal what the models generate now,
  and ``agentchain crds --check`` agrees (fresh → 0, stale → 1 with a regenerate hint);
- structure: no ``$ref``/``anyOf``/``allOf``/``oneOf``/``title``/``nullable`` anywhere, every
  node typed (or explicitly schemaless), defaults valid against their own node;
- API surface: names, short names, categories, scope, version, status subresource, required
  ``spec``, enums, condition lists keyed by ``type``, printer columns;
- translation rules on small models: ``const``, exclusive bounds, typed maps, sets, and the
  refusal of unions a structural schema cannot express;
- samples: seed 003's manifests and the AgentJob example parse with the models, lose no field
  to pruning, and mean the same after the API server's defaulting; the invalid samples are
  refused by the models for the same reason the API server refuses them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest
import yaml

from agentchain import crdgen
from agentchain.models import agentjob, aiagent

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "config" / "samples"
Schema = dict[str, Any]


def crd(kind: str) -> Schema:
    return next(c for c in crdgen.build_crds() if c["spec"]["names"]["kind"] == kind)


def root_schema(kind: str) -> Schema:
    schema: Schema = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def at(schema: Schema, path: str) -> Schema:
    """The node at a dotted path, ``[]`` stepping into array items."""
    node = schema
    for part in path.split("."):
        node = node["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node["items"]
    return node


def nodes(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if "items" in schema:
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}{{}}")


def sample_documents() -> list[tuple[str, Schema]]:
    return [
        (path.name, doc)
        for path in sorted([*SAMPLES.glob("*.yaml"), *SAMPLES.glob("seed-003/*.yaml")])
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc
    ]


MODELS: dict[str, type[pydantic.BaseModel]] = {
    "AiAgent": aiagent.AiAgent,
    "AgentJob": agentjob.AgentJob,
}


# --- drift ---------------------------------------------------------------------------


@pytest.mark.parametrize("filename", sorted(crdgen.render_crds()))
def test_committed_crd_matches_the_models(filename: str) -> None:
    committed = ROOT / "crds" / filename
    assert committed.exists(), f"{committed} is missing: {crdgen.REGENERATE_HINT}"
    assert committed.read_text(encoding="utf-8") == crdgen.render_crds()[filename], (
        f"crds/{filename} has drifted from the models: {crdgen.REGENERATE_HINT}"
    )


def test_crds_directory_holds_only_generated_files() -> None:
    assert sorted(p.name for p in (ROOT / "crds").glob("*.yaml")) == sorted(crdgen.render_crds())


def test_committed_reference_matches_the_models() -> None:
    committed = ROOT / crdgen.REFERENCE_PATH
    assert committed.exists(), f"{committed} is missing: {crdgen.REGENERATE_HINT}"
    assert committed.read_text(encoding="utf-8") == crdgen.render_reference(), (
        f"{crdgen.REFERENCE_PATH} has drifted from the models: {crdgen.REGENERATE_HINT}"
    )


def test_rendering_is_deterministic_and_ends_with_a_newline() -> None:
    first, second = crdgen.render_crds(), crdgen.render_crds()
    assert first == second
    assert all(text.endswith("\n") and not text.endswith("\n\n") for text in first.values())
    assert crdgen.render_reference().endswith("|\n")


def test_rendered_yaml_is_the_built_crd() -> None:
    for kind, text in zip(crdgen.KINDS, crdgen.render_crds().values(), strict=True):
        assert yaml.safe_load(text) == crdgen.build_crd(kind)


def test_main_writes_then_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--crds-dir", str(tmp_path / "crds"), "--reference", str(tmp_path / "ref.md")]
    assert crdgen.main([*argv, "--check"]) == 1
    assert crdgen.main(argv) == 0
    assert crdgen.main([*argv, "--check"]) == 0
    (tmp_path / "ref.md").write_text("stale\n", encoding="utf-8")
    assert crdgen.main([*argv, "--check"]) == 1
    assert "ref.md is stale: regenerate with `agentchain crds`" in capsys.readouterr().err


def test_write_crds_returns_the_written_paths(tmp_path: Path) -> None:
    paths = crdgen.write_crds(tmp_path / "out")
    assert [p.name for p in paths] == list(crdgen.render_crds())
    assert all(p.is_file() for p in paths)


# --- structure -----------------------------------------------------------------------

FORBIDDEN = {"$ref", "$defs", "anyOf", "allOf", "oneOf", "not", "title", "nullable"}


@pytest.mark.parametrize("kind", ["AiAgent", "AgentJob"])
def test_schema_is_structural(kind: str) -> None:
    for path, node in nodes(root_schema(kind)):
        assert not FORBIDDEN & node.keys(), f"{path}: {FORBIDDEN & node.keys()}"
        assert "type" in node, f"{path} has no type"
        # The root's metadata is ObjectMeta, which the API server validates and never prunes.
        if node["type"] == "object" and "properties" not in node and path != ".metadata":
            assert node.get("x-kubernetes-preserve-unknown-fields") or node.get(
                "additionalProperties"
            ), f"{path}: an object without properties would lose everything to pruning"
        if node["type"] == "array":
            assert "items" in node, f"{path}: array without items"


@pytest.mark.parametrize("kind", ["AiAgent", "AgentJob"])
def test_defaults_are_valid_for_their_own_node(kind: str) -> None:
    for path, node in nodes(root_schema(kind)):
        if "default" not in node:
            continue
        value = node["default"]
        assert value is not None, path
        types: dict[str, type | tuple[type, ...]] = {
            "string": str,
            "integer": int,
            "boolean": bool,
            "number": (int, float),
            "array": list,
            "object": dict,
        }
        assert isinstance(value, types[node["type"]]), path
        assert value in node.get("enum", [value]), path
        assert re.search(node.get("pattern", ""), str(value)), path
        assert node.get("minimum", value) <= value <= node.get("maximum", value), path


# --- API surface ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "plural", "short"), [("AiAgent", "aiagents", "aia"), ("AgentJob", "agentjobs", "aj")]
)
def test_names_scope_version_and_subresources(kind: str, plural: str, short: str) -> None:
    doc = crd(kind)
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["metadata"]["name"] == f"{plural}.labrats.work"
    spec = doc["spec"]
    assert spec["group"] == "labrats.work"
    assert spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
        "shortNames": [short],
        "categories": ["ai", "agentchain"],
    }
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    assert root_schema(kind)["required"] == ["spec"]


@pytest.mark.parametrize(
    ("kind", "path", "values"),
    [
        ("AiAgent", "spec.eventTriggers[].next.condition", ["always", "on-success", "on-failure"]),
        ("AiAgent", "spec.eventTriggers[].next.failurePolicy", ["stop", "skip", "notify"]),
        ("AiAgent", "spec.eventTriggers[].source", ["github", "manual", "schedule"]),
        ("AiAgent", "status.conditions[].status", ["True", "False", "Unknown"]),
        ("AgentJob", "spec.origin", ["github", "manual", "chain", "delegation", "api", "schedule"]),
        ("AgentJob", "spec.memoryScope", ["dependencies", "all"]),
        (
            "AgentJob",
            "status.phase",
            [
                *("Pending", "Waiting", "Running", "Succeeded", "Failed", "Skipped"),
                *("Queued", "AwaitingApproval", "Cancelled"),
            ],
        ),
    ],
)
def test_enums_are_typed_strings_in_model_order(kind: str, path: str, values: list[str]) -> None:
    node = at(root_schema(kind), path)
    assert (node["type"], node["enum"]) == ("string", values)


@pytest.mark.parametrize(
    ("kind", "path", "default"),
    [
        ("AiAgent", "spec.enabled", True),
        ("AiAgent", "spec.eventTriggers[].next.condition", "on-success"),
        ("AiAgent", "spec.eventTriggers[].next.failurePolicy", "stop"),
        ("AgentJob", "spec.origin", "manual"),
    ],
)
def test_seed_defaults_are_applied_by_the_api_server(kind: str, path: str, default: Any) -> None:
    assert at(root_schema(kind), path)["default"] == default


def test_required_fields_and_constraints_survive() -> None:
    spec = at(root_schema("AiAgent"), "spec")
    assert spec["required"] == ["triggerName"]
    assert spec["properties"]["triggerName"]["pattern"] == aiagent.TRIGGER_NAME_PATTERN
    assert spec["properties"]["triggerName"]["maxLength"] == 63
    assert at(spec, "eventTriggers[].next")["required"] == ["agentTriggerName"]
    assert at(spec, "timeoutSeconds") == {"type": "integer", "minimum": 1}
    assert at(root_schema("AgentJob"), "spec.agentRole")["minLength"] == 1


def test_free_form_fields_keep_unknown_fields_and_times_are_dates() -> None:
    spec = at(root_schema("AiAgent"), "spec")
    assert spec["properties"]["resources"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert spec["properties"]["env"]["items"]["x-kubernetes-preserve-unknown-fields"] is True
    start = at(root_schema("AgentJob"), "status.startTime")
    assert (start["type"], start["format"]) == ("string", "date-time")


@pytest.mark.parametrize("kind", ["AiAgent", "AgentJob"])
def test_conditions_are_a_list_keyed_by_type(kind: str) -> None:
    conditions = at(root_schema(kind), "status.conditions")
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert "type" in conditions["items"]["required"]


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        (
            "AiAgent",
            [
                ("Trigger", "string", ".spec.triggerName"),
                ("Enabled", "boolean", ".spec.enabled"),
                ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
                ("Age", "date", ".metadata.creationTimestamp"),
            ],
        ),
        (
            "AgentJob",
            [
                ("Agent", "string", ".spec.agentRole"),
                ("Phase", "string", ".status.phase"),
                ("Chain", "string", ".status.chainId"),
                ("Depth", "integer", ".status.chainDepth"),
                ("Parent", "string", ".status.parentJobId"),
                ("Exit", "integer", ".status.exitCode"),
                ("Age", "date", ".metadata.creationTimestamp"),
                ("Reason", "string", ".status.reason"),  # -o wide only
            ],
        ),
    ],
)
def test_printer_columns(kind: str, columns: list[tuple[str, str, str]]) -> None:
    printed = crd(kind)["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [(c["name"], c["type"], c["jsonPath"]) for c in printed] == columns
    # The SPEC's columns show by default; anything more only with ``-o wide``.
    assert [c["name"] for c in printed if c.get("priority", 0) == 0][-1] == "Age"
    assert all(
        c.get("priority", 0) == 1 for c in printed[[c["name"] for c in printed].index("Age") + 1 :]
    )
    for _, _, json_path in columns:  # each column reads a field the schema has
        if not json_path.startswith(".metadata."):
            at(root_schema(kind), json_path.lstrip(".").split("[")[0])


# --- translation rules ---------------------------------------------------------------


class Quirks(pydantic.BaseModel):
    only: Literal["one"] = "one"
    ratio: float = pydantic.Field(default=0.5, gt=0, lt=1)
    labels: dict[str, str] = pydantic.Field(default_factory=dict)
    tags: set[str] = pydantic.Field(default_factory=set)


class Union(pydantic.BaseModel):
    either: int | str


def test_translation_of_const_bounds_maps_and_sets() -> None:
    props = crdgen.structural(Quirks)["properties"]
    assert props["only"] == {"type": "string", "enum": ["one"], "default": "one"}
    assert props["ratio"] == {
        "type": "number",
        "default": 0.5,
        "minimum": 0,
        "exclusiveMinimum": True,
        "maximum": 1,
        "exclusiveMaximum": True,
    }
    assert props["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert props["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-list-type": "set",
    }


def test_unions_a_structural_schema_cannot_express_are_refused() -> None:
    with pytest.raises(crdgen.UnsupportedSchema, match=r"Union\.either: unions other than"):
        crdgen.structural(Union)


# --- samples -------------------------------------------------------------------------


def test_samples_hold_seed_003s_agents_and_an_agentjob() -> None:
    names = [(doc["kind"], doc["metadata"]["name"]) for _, doc in sample_documents()]
    working_set = [
        ("AgentJob", "triage-manual-run"),
        ("AiAgent", "developer"),
        ("AiAgent", "escalation"),
        ("AiAgent", "issue-triage"),
        ("AiAgent", "primary-agent"),
        ("AiAgent", "reviewer"),
        ("AiAgent", "workspace-developer"),  # Issue 18.
    ]
    seed_003 = [
        ("AiAgent", "developer"),
        ("AiAgent", "issue-triage"),
        ("AiAgent", "primary-agent"),
        ("AiAgent", "reviewer"),
        ("AiAgent", "triage"),
    ]
    assert sorted(names) == sorted(working_set + seed_003)


def unknown_fields(value: Any, schema: Schema, path: str) -> Iterator[str]:
    """Fields the API server would prune from ``value`` under ``schema``."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict) and "properties" in schema:
        for key, sub in value.items():
            if key not in schema["properties"]:
                yield f"{path}.{key}"
            else:
                yield from unknown_fields(sub, schema["properties"][key], f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from unknown_fields(item, schema["items"], f"{path}[{i}]")


def with_defaults(value: Any, schema: Schema) -> Any:
    """``value`` as the API server stores it: missing fields with defaults filled in."""
    if isinstance(value, list):
        return [with_defaults(item, schema["items"]) for item in value]
    if not isinstance(value, dict) or "properties" not in schema:
        return value
    out = {k: with_defaults(v, schema["properties"].get(k, {})) for k, v in value.items()}
    for key, sub in schema["properties"].items():
        if key not in out and "default" in sub:
            out[key] = sub["default"]
    return out


@pytest.mark.parametrize(("filename", "doc"), sample_documents(), ids=lambda v: str(v)[:40])
def test_sample_is_valid_and_loses_nothing(filename: str, doc: Schema) -> None:
    kind = doc["kind"]
    schema = root_schema(kind)
    assert doc["apiVersion"] == "labrats.work/v1alpha1"
    assert list(unknown_fields(doc["spec"], schema["properties"]["spec"], "spec")) == []
    parsed = MODELS[kind].model_validate(doc)
    defaulted = MODELS[kind].model_validate(with_defaults(doc, schema))
    assert parsed == defaulted, "the API server's defaults must mean what the model's mean"


@pytest.mark.parametrize(
    ("filename", "field"),
    [
        ("aiagent_condition-sometimes.yaml", ("spec", "eventTriggers", 0, "next", "condition")),
        ("aiagent_missing-triggername.yaml", ("spec", "triggerName")),
    ],
)
def test_invalid_samples_are_refused_by_the_models_too(
    filename: str, field: tuple[str | int, ...]
) -> None:
    doc = yaml.safe_load((SAMPLES / "invalid" / filename).read_text(encoding="utf-8"))
    with pytest.raises(pydantic.ValidationError) as refused:
        aiagent.AiAgent.model_validate(doc)
    assert [error["loc"] for error in refused.value.errors()] == [field]
