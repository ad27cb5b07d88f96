"""GitHub's REST description (``@octokit/openapi``) as an operation index with validators.

The stand-in never hand-writes what GitHub accepts: each request is matched to an
operation of the official description (method + path template) and its path and query
parameters and JSON body are checked against that operation's schemas; each answer the
stand-in builds is checked against the documented response schema of its status.

Loading is cheap enough not to need a cache file: ``json.load`` of the 13 MB description
takes ~0.3 s, the path index is built in milliseconds and a validator is compiled lazily
the first time an operation is used, then kept (the whole document is one ``referencing``
resource, so ``$ref``s resolve in place without dereferencing the description).

Strictness beyond GitHub: unknown query parameters and unknown top-level body properties
are violations even where GitHub would silently ignore them, because for a client under
test they are almost always typos that would make a real call do less than intended.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from jsonschema import validators
from jsonschema.protocols import Validator
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

_VERSIONS = Path(__file__).with_name("versions.env")
SPEC_ENV = "AGENTCHAIN_GITHUB_OPENAPI"
_URN = "urn:github-openapi"
BASE_API_VERSION = "2022-11-28"  # what GitHub selects when a request names none
_METHODS = ("get", "post", "put", "patch", "delete")
# Path parameters whose value may span segments (contents paths, git refs).
_GREEDY_PARAMS = frozenset({"path"})


class SpecMissing(RuntimeError):
    """The npm cache with the description is absent (run e2e/setup.sh)."""


def pinned_version() -> str:
    for line in _VERSIONS.read_text().splitlines():
        if line.startswith("OCTOKIT_OPENAPI_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError(f"OCTOKIT_OPENAPI_VERSION missing from {_VERSIONS}")


def spec_path() -> Path:
    """Where e2e/setup.sh's ``npm_fetch`` unpacks the description (override: env var)."""
    override = os.environ.get(SPEC_ENV)
    if override:
        return Path(override)
    cache = Path(os.environ.get("AGENTCHAIN_CACHE", Path.home() / ".cache/agentchain")) / "npm"
    package = cache / f"octokit-openapi-{pinned_version()}" / "package"
    return package / "generated" / "api.github.com.json"


@dataclass(frozen=True)
class Problem:
    """One way a request departs from the description."""

    where: str  # "path", "query", "body"
    message: str


@dataclass(frozen=True)
class _Param:
    name: str
    pattern: re.Pattern[str] | None = None

    def bind(self, value: str, values: dict[str, str]) -> bool:
        if not value:
            return False
        if self.pattern is None:
            values[self.name] = value
            return True
        found = self.pattern.fullmatch(value)
        if found is None:
            return False
        values.update(zip(self.name.split(","), found.groups(), strict=True))
        return True


@dataclass
class Operation:
    method: str
    template: str
    operation_id: str
    raw: Mapping[str, Any]
    parameters: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    segments: list[str | _Param] = field(default_factory=list)
    literal_segments: int = 0

    def match(self, parts: list[str]) -> dict[str, str] | None:
        """The path parameters if ``parts`` (the path's segments) fit this template."""
        values: dict[str, str] = {}
        for index, segment in enumerate(self.segments):
            if index >= len(parts):
                return None
            if isinstance(segment, str):
                if parts[index] != segment:
                    return None
            elif segment.name in _GREEDY_PARAMS and index == len(self.segments) - 1:
                values[segment.name] = "/".join(parts[index:])
                return values
            elif not segment.bind(parts[index], values):
                return None
        return values if len(parts) == len(self.segments) else None

    def response_schema(self, status: int) -> Mapping[str, Any] | bool | None:
        """The JSON schema for ``status``; None if the status is undocumented, False if
        it is documented without a JSON body."""
        responses = self.raw.get("responses", {})
        response = responses.get(str(status))
        if response is None:
            return None
        content = response.get("content", {})
        media = content.get("application/json") or content.get("application/scim+json")
        if media is None:
            return False
        schema: Mapping[str, Any] = media.get("schema", {})
        return schema


class Spec:
    """The operation index of one description document."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        resource = Resource.from_contents(document, default_specification=DRAFT4)
        self._registry: Registry[Any] = Registry().with_resource(_URN, resource)
        self._validators: dict[str, Validator] = {}
        self._by_method: dict[str, list[Operation]] = {m.upper(): [] for m in _METHODS}
        for template, item in document["paths"].items():
            for method in _METHODS:
                if method in item:
                    op = self._operation(method.upper(), template, item)
                    self._by_method[op.method].append(op)
        for ops in self._by_method.values():
            # Literal segments win over parameters: /issues/comments/{id} before /issues/{n}.
            ops.sort(key=lambda o: -o.literal_segments)
        self.by_id = {op.operation_id: op for ops in self._by_method.values() for op in ops}

    @property
    def version(self) -> str:
        return str(self.document["info"]["version"])

    @functools.cached_property
    def api_versions(self) -> frozenset[str]:
        """The X-GitHub-Api-Version values GitHub accepts: the base version and every
        version the description's ``x-github-breaking-changes`` patches lead to."""
        owners = [*self.by_id.values()]
        found = {BASE_API_VERSION}
        for node in [op.raw for op in owners] + list(
            self.document["components"]["schemas"].values()
        ):
            for change in node.get("x-github-breaking-changes", []):
                found.add(change["version"])
        return frozenset(found)

    def _operation(self, method: str, template: str, item: Mapping[str, Any]) -> Operation:
        raw = item[method.lower()]
        op = Operation(method, template, raw["operationId"], raw)
        for param in [*item.get("parameters", []), *raw.get("parameters", [])]:
            resolved = self.resolve(param)
            op.parameters[(resolved["in"], resolved["name"])] = resolved
        for segment in template.strip("/").split("/"):
            names = re.findall(r"\{([^}]+)\}", segment)
            if not names:
                op.literal_segments += 1
                op.segments.append(segment)
            elif segment == f"{{{names[0]}}}":
                op.segments.append(_Param(names[0]))
            else:  # e.g. {base}...{head}: the one place a regex is worth compiling
                pieces = re.split(r"\{[^}]+\}", segment)
                body = "".join(re.escape(p) + "(.+?)" for p in pieces[:-1]) + re.escape(pieces[-1])
                op.segments.append(_Param(",".join(names), re.compile(body)))
        return op

    def resolve(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in node:  # the description only has local refs: "#/components/..."
            target: Any = self.document
            for key in node["$ref"].removeprefix("#/").split("/"):
                target = target[key.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        """The operation for ``method path`` with its raw path parameters, or None."""
        parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        for op in self._by_method.get(method.upper(), []):
            values = op.match(parts)
            if values is not None:
                return op, values
        return None

    def path_allows(self, path: str) -> list[str]:
        """Methods the description knows for ``path`` (GitHub answers 404 for the others)."""
        return [m for m in self._by_method if self.match(m, path) is not None]

    def validator(self, schema: Mapping[str, Any]) -> Validator:
        key = json.dumps(schema, sort_keys=True)
        compiled = self._validators.get(key)
        if compiled is None:
            # Refs inside an operation are "#/components/...": resolve them in the document.
            compiled = _Validator(
                schema,
                registry=self._registry,
                format_checker=oas30_format_checker,
                _resolver=self._registry.resolver(base_uri=_URN),
            )
            self._validators[key] = compiled
        return compiled

    def check_request(
        self,
        op: Operation,
        path_params: Mapping[str, str],
        query: Mapping[str, list[str]],
        body: Any,
    ) -> list[Problem]:
        problems = [*self._check_path(op, path_params), *self._check_query(op, query)]
        problems.extend(self._check_body(op, body))
        return problems

    def _check_path(self, op: Operation, values: Mapping[str, str]) -> list[Problem]:
        problems = []
        for name, raw in values.items():
            param = op.parameters.get(("path", name))
            if param is not None:
                problems.extend(self._check_value("path", name, param, [raw]))
        return problems

    def _check_query(self, op: Operation, query: Mapping[str, list[str]]) -> list[Problem]:
        problems = []
        for name, values in query.items():
            param = op.parameters.get(("query", name))
            if param is None:
                problems.append(Problem("query", f"unknown query parameter {name!r}"))
            else:
                problems.extend(self._check_value("query", name, param, values))
        for (where, name), param in op.parameters.items():
            if where == "query" and param.get("required") and name not in query:
                problems.append(Problem("query", f"missing required query parameter {name!r}"))
        return problems

    def _check_value(
        self, where: str, name: str, param: Mapping[str, Any], raw: list[str]
    ) -> list[Problem]:
        schema = self.resolve(param.get("schema", {}))
        value = _coerce(schema, raw)
        errors = list(self.validator(schema).iter_errors(value))
        return [Problem(where, f"{name}={raw!r}: {e.message}") for e in errors[:3]]

    def _check_body(self, op: Operation, body: Any) -> list[Problem]:
        request_body = op.raw.get("requestBody")
        if request_body is None:
            if body not in (None, {}, ""):
                return [Problem("body", "this operation takes no request body")]
            return []
        request_body = self.resolve(request_body)
        if body is None:
            if request_body.get("required"):
                return [Problem("body", "the request body is required")]
            return []
        schema = request_body.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            return []
        errors = sorted(self.validator(schema).iter_errors(body), key=lambda e: list(e.path))
        problems = [Problem("body", _describe(e)) for e in errors[:5]]
        if isinstance(body, dict):
            known = self._property_names(schema)
            unknown = sorted(set(body) - known) if known else []
            problems.extend(Problem("body", f"unknown property {k!r}") for k in unknown)
        return problems

    def _property_names(self, schema: Mapping[str, Any]) -> set[str]:
        schema = self.resolve(schema)
        if schema.get("additionalProperties") not in (None, False):
            return set()  # a map: any key is allowed
        names = set(schema.get("properties", {}))
        for key in ("allOf", "anyOf", "oneOf"):
            for branch in schema.get(key, []):
                names |= self._property_names(branch)
        return names

    def check_response(self, op: Operation, status: int, body: Any) -> list[str]:
        """Why ``body`` is not what the description documents for ``status`` (empty: ok)."""
        schema = op.response_schema(status)
        if schema is None:
            return [f"{op.operation_id}: status {status} is not documented"]
        if isinstance(schema, bool):
            return [] if body is None else [f"{op.operation_id}: {status} has no JSON body"]
        errors = self.validator(schema).iter_errors(body)
        return [f"{op.operation_id} {status}: {_describe(e)}" for e in errors][:5]


def _nullable_enum(validator: Any, enums: Any, instance: Any, schema: Mapping[str, Any]) -> Any:
    # OpenAPI 3.0.3 lets ``nullable: true`` admit null even when ``enum`` omits it (GitHub
    # relies on that, e.g. a queued check run's ``conclusion``); plain JSON Schema does not.
    if instance is None and schema.get("nullable"):
        return
    yield from _ENUM(validator, enums, instance, schema)


_ENUM = OAS30Validator.VALIDATORS["enum"]
_extend: Callable[..., Any] = validators.extend  # jsonschema leaves extend() unannotated
_Validator = _extend(OAS30Validator, {"enum": _nullable_enum})


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message[:300]}"


def _coerce(schema: Mapping[str, Any], raw: list[str]) -> Any:
    """A query/path string as the JSON value the schema talks about (form style)."""
    kind = schema.get("type")
    if kind == "array":
        items = [part for value in raw for part in value.split(",")]
        return [_coerce(schema.get("items", {}), [item]) for item in items]
    value = raw[-1]
    if kind == "integer" and re.fullmatch(r"-?\d+", value):
        return int(value)
    if kind == "number" and re.fullmatch(r"-?\d+(\.\d+)?", value):
        return float(value)
    if kind == "boolean" and value in ("true", "false"):
        return value == "true"
    return value


def load(path: Path | None = None) -> Spec:
    """The description at ``path`` (default: the pinned npm cache), parsed once per process."""
    return _load(path or spec_path())


@functools.lru_cache(maxsize=2)
def _load(path: Path) -> Spec:
    if not path.is_file():
        raise SpecMissing(
            f"GitHub's OpenAPI description is not at {path}; run e2e/setup.sh "
            f"(npm_fetch @octokit/openapi {pinned_version()})"
        )
    with path.open("rb") as handle:
        return Spec(json.load(handle))
