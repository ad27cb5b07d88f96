"""Fuzzed HTTP requests for ``test_api_fuzz.py``: from the OpenAPI document, and the webhook.

Plain hypothesis, no schemathesis: a small JSON Schema → strategy translation
covers everything ``agentchain/web/openapi.py`` emits (``$ref``, ``anyOf`` and
``oneOf``, ``enum``, type lists, string patterns and lengths, number bounds,
objects with required and forbidden extra properties, arrays).  On top of it:

* :class:`Schemas` draws values *valid* for a schema and values that are
  *invalid* in one known way (wrong type, one past a bound, a pattern broken),
  with hints that mix in values the running app knows (its namespace, a real
  job name) so requests get past "not found" often enough to reach the code
  behind it;
* :func:`api_requests` draws requests for every operation of the document:
  path parameters (arbitrary text, raw bytes, broken percent-escapes), query
  parameters valid and invalid plus unknown ones, bodies valid, invalid,
  arbitrary JSON or binary junk under any content type, a method the path does
  not have now and then, paths no route has, and each of the given
  ``Authorization`` headers;
* :func:`webhook_request` draws GitHub deliveries: GitHub-shaped payloads
  whose every field may be of the wrong type, as JSON or form-encoded, or junk
  bodies; valid and invalid event, delivery and hook headers; signed with the
  configured secret (so the delivery gets past the HMAC check to parsing and
  matching), with another secret, garbled, or not at all.

Every :class:`FuzzRequest` carries what its answer must satisfy
(:meth:`FuzzRequest.check`): never a 5xx, every error a JSON object with an
``error`` sentence, a status the document lists for the operation, and a 4xx
for a request that is certainly invalid.
"""

from __future__ import annotations

import gzip
import json
import re
import urllib.parse
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from agentchain.web.hooks.signatures import sign

Json = Any
Schema = Mapping[str, Any]
Hints = Mapping[str, SearchStrategy[Any]]

METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "HEAD")
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
CONTENT_TYPES = (
    JSON_TYPE,
    f"{JSON_TYPE}; charset=utf-8",
    FORM_TYPE,
    "text/plain",
    "multipart/form-data; boundary=fuzz",
    "application/octet-stream",
    "",
    "}{ not a type",
)
MAX_TEXT = 48
# Characters that trip encoders, parsers and key builders.
NASTY = "\ud800\udfff\x00\n\r\t\u2028\ufeff\uffff\U0001f4a5é%/\\:*?\"'<>&=+ .~"
NASTY_TEXT = st.text(
    st.sampled_from(NASTY) | st.characters(min_codepoint=0x61, max_codepoint=0x7A),
    max_size=MAX_TEXT,
)
# Text a reason may quote back: a lone surrogate, a NUL, a bidi override.
ODD_TEXT = st.sampled_from(["\ud800", "acme/\udfff", "a\x00b", "\u202eevil"]) | NASTY_TEXT
# Any code point, lone surrogates included (JSON can carry them as \udXXX escapes).
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=MAX_TEXT) | NASTY_TEXT
# What a client can put in a header value (no control characters: aiohttp refuses them).
HEADER_TEXT = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("éü€\u200b"),
    max_size=MAX_TEXT,
)
JUNK_JSON: SearchStrategy[Json] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)


# Just over the job API's body cap (app.API_MAX_BODY_BYTES).
HUGE = b" " * (1024 * 1024 + 1)
# JSON Python's parser accepts but other layers may not: NaN and infinities, a number
# past int()'s digit limit, duplicate keys, a byte-order mark, null where text goes.
ODD_BODIES = (
    b'{"value": NaN}',
    b'{"value": "x", "ttlSeconds": 1e400}',
    b'{"value": "x", "ttlSeconds": ' + b"9" * 5000 + b"}",
    b'{"files": [NaN, Infinity], "progress": [-Infinity]}',
    b'{"task": "t", "task": 1}',
    b'\xef\xbb\xbf{"value": "bom"}',
    b'{"value": "x"} trailing',
    b'{"agentRole": "ai-a", "task": "t", "namespace": null}',
    b'{"namespace": null, "agentRole": null}',
    b'"\\u0000"',
)
# Query values that number and boolean parsers disagree about (short of the 8 KiB
# request line aiohttp refuses before the app sees it).
ODD_QUERY_VALUES = ("nan", "inf", "-0", "1e3", "%D9%A3", "0x10", "1_0", "", "yes", "9" * 400)


def one_in(n: int) -> SearchStrategy[bool]:
    """True about once in ``n`` draws (``st.integers`` favours small numbers, and
    ``sampled_from`` its first value: that one is False)."""
    return st.sampled_from(range(n)).map(lambda i: i == n - 1)


def weighted(choices: Sequence[tuple[int, Json]]) -> SearchStrategy[Json]:
    """One of the values, each about as often as its weight says."""
    return st.sampled_from([value for weight, value in choices for _ in range(weight)])


_COMPRESS: Mapping[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "identity": bytes,
}


@st.composite
def content_encoding(draw: st.DrawFn, body: bytes) -> tuple[bytes, dict[str, str], bool]:
    """(body, headers, still readable): now and then compressed, or only said to be.

    The server decompresses nothing (issue 14): any encoding but ``identity`` is a 415,
    whether the body really is compressed or not.
    """
    if not draw(one_in(12)):
        return body, {}, True
    name = draw(st.sampled_from(sorted(_COMPRESS)))
    body = _COMPRESS[name](body) if draw(st.booleans()) else body
    return body, {"Content-Encoding": name}, name == "identity"


@st.composite
def _mostly(draw: st.DrawFn, usual: SearchStrategy[Json], other: SearchStrategy[Json]) -> Json:
    """``usual`` three times in four (``usual | other`` would flatten ``other``'s branches)."""
    return draw(other) if draw(one_in(4)) else draw(usual)


def encode_json(value: Json, ascii_only: bool = False) -> bytes:
    """``value`` as JSON bytes; lone surrogates force ``\\u`` escapes."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode("ascii")


def _json_type(value: Json) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}[type(value)]


def deep_nesting() -> SearchStrategy[bytes]:
    """Nested arrays deep enough to hit the JSON parser's recursion limit, or nearly."""
    return st.sampled_from([50, 900, 5000, 100_000]).map(
        lambda n: b'{"a": ' + b"[" * n + b"]" * n + b"}"
    )


# --------------------------------------------------------------------------- schemas


@dataclass(frozen=True)
class Schemas:
    """Strategies for values valid or invalid for a JSON schema of ``document``.

    ``likely`` mixes known-good values into the valid values of a property or
    parameter of that name; ``only`` replaces them (e.g. to keep ``?wait=`` short).
    """

    document: Mapping[str, Any]
    likely: Hints = field(default_factory=dict)
    only: Hints = field(default_factory=dict)

    def resolve(self, schema: Schema) -> Schema:
        while "$ref" in schema:
            schema = self.document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    def branches(self, schema: Schema) -> list[Schema]:
        schema = self.resolve(schema)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return [b for s in schema[key] for b in self.branches(s)]
        types = schema.get("type")
        if isinstance(types, list):
            return [{**schema, "type": t} for t in types]
        return [schema]

    # ----------------------------------------------------------------- valid values

    def valid(self, schema: Schema, name: str | None = None) -> SearchStrategy[Json]:
        if name is not None and name in self.only:
            return self.only[name]
        drawn = st.one_of([self._valid(b) for b in self.branches(schema)])
        if name is not None and name in self.likely:
            return _mostly(self.likely[name], drawn)
        return drawn

    def _valid(self, schema: Schema) -> SearchStrategy[Json]:
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        if "const" in schema:
            return st.just(schema["const"])
        kind = schema.get("type")
        if kind is None:
            return JUNK_JSON
        draw: Callable[[Schema], SearchStrategy[Json]] = getattr(self, f"_valid_{kind}")
        return draw(schema)

    def _valid_string(self, schema: Schema) -> SearchStrategy[Json]:
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if "pattern" in schema:
            text = st.from_regex(schema["pattern"], fullmatch=True)
            return text.filter(lambda s: low <= len(s) <= (high or len(s)))
        top = min(high or MAX_TEXT, MAX_TEXT)
        options = [
            st.text(min_size=low, max_size=top),
            ANY_TEXT.filter(lambda s: low <= len(s) <= top),
        ]
        if high:
            options.append(st.just("x" * high))  # At the bound: still valid.
        return st.one_of(options)

    def _valid_integer(self, schema: Schema) -> SearchStrategy[Json]:
        return st.integers(schema.get("minimum"), schema.get("maximum"))

    def _valid_number(self, schema: Schema) -> SearchStrategy[Json]:
        low, high = schema.get("minimum"), schema.get("maximum")
        floats = st.floats(low, high, allow_nan=False, allow_infinity=False)
        return floats | self._valid_integer(schema)

    def _valid_boolean(self, schema: Schema) -> SearchStrategy[Json]:
        return st.booleans()

    def _valid_null(self, schema: Schema) -> SearchStrategy[Json]:
        return st.none()

    def _valid_array(self, schema: Schema) -> SearchStrategy[Json]:
        return st.lists(self.valid(schema.get("items", {})), max_size=4)

    def _valid_object(self, schema: Schema) -> SearchStrategy[Json]:
        props: Mapping[str, Schema] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fixed = st.fixed_dictionaries(
            {k: self.valid(s, k) for k, s in props.items() if k in required},
            optional={k: self.valid(s, k) for k, s in props.items() if k not in required},
        )
        if schema.get("additionalProperties") is False:
            return fixed
        extra = st.dictionaries(ANY_TEXT.filter(lambda k: k not in props), JUNK_JSON, max_size=2)
        return st.builds(lambda a, b: {**b, **a}, fixed, extra)

    # ----------------------------------------------------------------- invalid values

    def invalid(self, schema: Schema) -> SearchStrategy[Json]:
        """Values that most likely break ``schema`` (a pattern is not always broken)."""
        branches = self.branches(schema)
        types = {b.get("type") for b in branches}
        if None in types:
            return st.nothing()  # Anything goes.
        if "number" in types:
            types.add("integer")
        wrong = JUNK_JSON.filter(lambda v: _json_type(v) not in types)
        return st.one_of([wrong, *(self._invalid(b) for b in branches)])

    def _invalid(self, schema: Schema) -> SearchStrategy[Json]:
        options: list[SearchStrategy[Json]] = []
        if "enum" in schema:
            options.append(ANY_TEXT.filter(lambda v: v not in schema["enum"]))
        if "maxLength" in schema:
            high = schema["maxLength"]
            options.append(st.integers(high + 1, high + 3).map(lambda n: "a" * n))
        if "pattern" in schema:
            pattern = re.compile(schema["pattern"])
            options.append(ANY_TEXT.filter(lambda v: not pattern.search(v)))
        if "minimum" in schema:
            options.append(st.just(schema["minimum"] - 1))
        if "maximum" in schema:
            options.append(st.just(schema["maximum"] + 1))
        if schema.get("type") == "object":
            options.append(self.invalid_object(schema).map(lambda pair: pair[0]))
        return st.one_of(options) if options else st.nothing()

    def invalid_object(self, schema: Schema) -> SearchStrategy[tuple[Json, bool]]:
        """(an object breaking ``schema``, whether certainly invalid for every branch)."""
        return _invalid_object(self, schema)


@st.composite
def _invalid_object(draw: st.DrawFn, schemas: Schemas, schema: Schema) -> tuple[Json, bool]:
    branches = [b for b in schemas.branches(schema) if b.get("type", "object") == "object"]
    drawn = draw(st.one_of([schemas.valid(b) for b in branches]))
    if not isinstance(drawn, dict):
        # A branch that only adds requirements (``anyOf: [{required: [prompt]}, ...]``)
        # has no type of its own, so what is valid for it alone may be any JSON: break the
        # object the way that needs no branch, by not being one.
        return draw(JUNK_JSON.filter(lambda v: not isinstance(v, dict))), True
    value: dict[str, Json] = drawn
    how = draw(st.sampled_from(["field", "extra", "missing", "not-object"]))
    known = {k for b in branches for k in b.get("properties", {})}
    if how == "extra" and all(b.get("additionalProperties") is False for b in branches):
        return {**value, draw(ANY_TEXT.filter(lambda k: k not in known)): 1}, True
    everywhere = set.intersection(*(set(b.get("required", ())) for b in branches))
    if how == "missing" and everywhere:
        gone = draw(st.sampled_from(sorted(everywhere)))
        return {k: v for k, v in value.items() if k != gone}, True
    if how == "not-object" or not value:
        return draw(JUNK_JSON.filter(lambda v: not isinstance(v, dict))), True
    key = draw(st.sampled_from(sorted(value)))
    field_schema = next(
        (b["properties"][key] for b in branches if key in b.get("properties", {})), None
    )
    bad = schemas.invalid(field_schema) if field_schema is not None else st.nothing()
    return {**value, key: draw(bad | JUNK_JSON)}, False


# --------------------------------------------------------------------------- requests


def is_dashboard_page(target: str) -> bool:
    """A dashboard path answered with its page, not JSON (``/ui/`` but its API and files)."""
    path = target.split("?", 1)[0]
    return path.startswith("/ui/") and not path.startswith(("/ui/api/", "/ui/static/"))


@dataclass(frozen=True)
class FuzzRequest:
    """One request and what its answer must satisfy."""

    method: str
    target: str  # Path and query, already percent-encoded: sent byte for byte.
    headers: Mapping[str, str]
    body: bytes
    label: str  # What drew it ("GET /api/jobs", "webhook signed", "junk path").
    statuses: frozenset[int] = frozenset()  # Documented answers; empty: any non-5xx.
    must_refuse: bool = False  # Certainly invalid: a 4xx, never a 2xx.
    must_accept: bool = False  # Certainly valid (a signed, well-formed delivery): a 2xx.

    def __repr__(self) -> str:  # Bodies can be large: show their start and size.
        body = f"{self.body[:200]!r}{'...' if len(self.body) > 200 else ''} ({len(self.body)} B)"
        return (
            f"FuzzRequest({self.method} {self.target[:300]} ({self.label}), "
            f"headers={dict(self.headers)!r:.600}, body={body}, must_refuse={self.must_refuse}, "
            f"must_accept={self.must_accept})"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis's printer.
        printer.text(repr(self))

    def check(self, status: int, content_type: str, body: bytes) -> None:
        what = f"{self.method} {self.target} ({self.label}) → {status}: {body[:300]!r}"
        assert status < 500, what
        page = status == 401 and content_type == "text/html" and is_dashboard_page(self.target)
        if page and self.method != "HEAD":
            # A dashboard page without a session: 401 with the page that shows the login.
            assert b'id="login-form"' in body, what
        elif status >= 400 and self.method != "HEAD":
            assert content_type == JSON_TYPE, what
            answer = json.loads(body)
            assert isinstance(answer, dict), what
            assert isinstance(answer.get("error"), str) and answer["error"], what
            assert isinstance(answer.get("detail"), str), what
        if self.statuses:
            assert status in self.statuses, f"undocumented status: {what}"
        if self.must_refuse:
            assert 400 <= status < 500, f"accepted an invalid request: {what}"
        if self.must_accept:
            assert 200 <= status < 300, f"refused a valid delivery: {what}"


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    params: tuple[Schema, ...]
    body: Mapping[str, Schema] | None  # Content type → schema.
    statuses: frozenset[int]

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"


def operations(document: Mapping[str, Any]) -> list[Operation]:
    found = []
    for path, item in document["paths"].items():
        for method, op in item.items():
            content = (op.get("requestBody") or {}).get("content")
            body = {t: c["schema"] for t, c in content.items()} if content else None
            statuses = frozenset(int(code) for code in op["responses"])
            found.append(
                Operation(method.upper(), path, tuple(op.get("parameters", ())), body, statuses)
            )
    return found


def quote(text: str) -> str:
    return urllib.parse.quote(text.encode("utf-8", "surrogatepass"), safe="")


def path_segment(schemas: Schemas, name: str, schema: Schema, broken: bool) -> SearchStrategy[str]:
    """A path parameter on the wire: valid text; if ``broken``, raw bytes or bad escapes too."""
    valid = schemas.valid(schema, name).map(lambda v: quote(str(v)))
    if not broken:
        return valid
    return st.one_of(
        valid,
        st.binary(min_size=1, max_size=12).map(lambda b: urllib.parse.quote_from_bytes(b, "")),
        st.sampled_from(["%", "%zz", "%ED%A0%80", "%00", "..", ".", "%2F", "a%2Fb", "~"]),
    )


def query_value(schemas: Schemas, name: str, schema: Schema, broken: bool) -> SearchStrategy[str]:
    """A query parameter on the wire: a valid value; if ``broken``, maybe an invalid one."""
    valid = schemas.valid(schema, name).map(_query_text)
    if not broken:
        return valid
    return st.one_of(
        valid,
        schemas.invalid(schema).map(_query_text),
        ANY_TEXT.map(quote),
        st.sampled_from(ODD_QUERY_VALUES),
    )


def _query_text(value: Json) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return quote(value if isinstance(value, str) else json.dumps(value))


@st.composite
def query_string(draw: st.DrawFn, schemas: Schemas, params: Sequence[Schema], broken: bool) -> str:
    """Each query parameter present or not; if ``broken``, maybe an unknown one or one twice."""
    known = [p for p in params if p["in"] == "query"]
    pairs = [
        (quote(p["name"]), draw(query_value(schemas, p["name"], p["schema"], broken)))
        for p in known
        if draw(st.booleans())
    ]
    if broken and draw(one_in(3)):
        names = ANY_TEXT.map(quote)
        if known:
            names |= st.sampled_from([quote(p["name"]) for p in known])
        pairs.append((draw(names), draw(ANY_TEXT.map(quote))))
    return "&".join(f"{n}={v}" for n, v in pairs)


@st.composite
def body_for(
    draw: st.DrawFn, schemas: Schemas, op: Operation, broken: bool
) -> tuple[bytes, str | None, bool]:
    """(body, content type, certainly invalid) for ``op``: valid unless ``broken``."""
    if op.body is None:
        if not broken:
            return b"", None, False
        junk = draw(st.one_of(st.just(b""), st.binary(max_size=64)))
        return junk, draw(st.none() | st.sampled_from(CONTENT_TYPES)), False
    content_type, schema = draw(st.sampled_from(sorted(op.body.items())))
    kind = draw(st.sampled_from(["valid", "invalid", "json", "junk"])) if broken else "valid"
    must_refuse = False
    if kind == "junk":
        body = draw(
            st.binary(max_size=64) | deep_nesting() | st.sampled_from([b"", HUGE, *ODD_BODIES])
        )
    else:
        if kind == "valid":
            value = draw(schemas.valid(schema))
        elif kind == "invalid":
            value, must_refuse = draw(schemas.invalid_object(schema))
        else:
            value = draw(JUNK_JSON)
        body = _encode_as(content_type, value, draw(st.booleans()))
    if broken:
        content_type = draw(st.sampled_from([content_type, *CONTENT_TYPES]))
    return body, content_type or None, must_refuse


def _encode_as(content_type: str, value: Json, ascii_only: bool) -> bytes:
    if content_type == FORM_TYPE and isinstance(value, dict):
        fields = {k: v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
        return urllib.parse.urlencode(fields, errors="surrogatepass").encode()
    return encode_json(value, ascii_only)


@st.composite
def operation_request(
    draw: st.DrawFn, schemas: Schemas, op: Operation, auth: SearchStrategy[Mapping[str, str]]
) -> FuzzRequest:
    """A request for ``op``: well-formed three times in four, broken somewhere otherwise."""
    broken = draw(one_in(4))
    path = op.path
    for param in op.params:
        if param["in"] == "path":
            segment = draw(path_segment(schemas, param["name"], param["schema"], broken))
            path = path.replace("{" + param["name"] + "}", segment)
    query = draw(query_string(schemas, op.params, broken))
    body, content_type, must_refuse = draw(body_for(schemas, op, broken))
    body, headers, _ = draw(content_encoding(body))
    headers.update(draw(auth))
    if content_type is not None:
        headers["Content-Type"] = content_type
    method = draw(st.sampled_from(METHODS)) if broken and draw(st.booleans()) else op.method
    if method == "HEAD":  # Its answer has no body, so no parser error could be read back.
        body = b""
        headers.pop("Content-Encoding", None)
    same = method == op.method
    return FuzzRequest(
        method,
        path + (f"?{query}" if query else ""),
        headers,
        body,
        op.label if same else f"{method} on {op.label}",
        op.statuses if same else frozenset(),
        # Auth is checked before the body: a refusal is a 4xx whatever the token.
        must_refuse and same,
    )


JUNK_PREFIXES = (
    "/api/",
    "/api/jobs/",
    "/api/store/",
    "/webhooks/",
    "/ui/",
    "/ui/api/",
    "/ui/static/",
    "/",
)


@st.composite
def junk_request(draw: st.DrawFn, auth: SearchStrategy[Mapping[str, str]]) -> FuzzRequest:
    """A path no operation describes (the dashboard's, or none at all)."""
    segments = draw(st.lists(ANY_TEXT.map(quote), min_size=0, max_size=3))
    target = draw(st.sampled_from(JUNK_PREFIXES)) + "/".join(segments)
    method = draw(st.sampled_from(METHODS))
    body = b"" if method == "HEAD" else draw(st.just(b"") | st.binary(max_size=32))
    return FuzzRequest(method, target, dict(draw(auth)), body, "junk path")


def _get(*params: str, statuses: Sequence[str] = ("200",)) -> dict[str, Any]:
    parameters = [{"name": p, "in": "path", "schema": {"type": "string"}} for p in params]
    return {"get": {"parameters": parameters, "responses": {s: {} for s in statuses}}}


# Served by the public app but outside the API document: liveness.
UNLISTED_PATHS = {"/healthz": _get()}
# What the internal listener serves (no API document): the dashboard and the probes. The
# fuzzer holds no dashboard session: every dashboard page and call must answer 401.
INTERNAL_PATHS = {
    "/": _get(statuses=("200", "302", "401")),  # A redirect to /ui/, followed or not.
    "/ui/": _get(statuses=("401",)),
    "/ui/static/{name}": _get("name", statuses=("200", "401", "404")),
    "/ui/jobs/{namespace}/{name}": _get("namespace", "name", statuses=("401", "404")),
    "/ui/chains/{namespace}/{chainId}": _get("namespace", "chainId", statuses=("401", "404")),
    "/ui/api/jobs": _get(statuses=("401",)),
    "/ui/api/session": _get(statuses=("401",)),
    "/ui/api/events": _get(statuses=("401",)),
    "/ui/api/jobs/{namespace}/{name}": _get("namespace", "name", statuses=("401", "404")),
    "/ui/api/chains/{namespace}/{chainId}": _get("namespace", "chainId", statuses=("401", "404")),
    "/healthz": _get(),
    "/readyz": _get(),
    "/metrics": _get(),
}


def api_requests(
    document: Mapping[str, Any],
    auth: SearchStrategy[Mapping[str, str]],
    schemas: Schemas,
    unlisted: Mapping[str, Any] = UNLISTED_PATHS,
) -> SearchStrategy[FuzzRequest]:
    """Requests for every operation of ``document``, the app's other pages, and junk paths."""
    everything = {**document, "paths": {**document.get("paths", {}), **unlisted}}
    ops = [operation_request(schemas, op, auth) for op in operations(everything)]
    return st.one_of([*ops, junk_request(auth)])


# --------------------------------------------------------------------------- webhook

EVENTS = (
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "push",
    "create",
    "release",
    "ping",
    "workflow_run",
)
ACTIONS = ("opened", "edited", "closed", "labeled", "unlabeled", "created", "submitted")
ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR", "NONE", "owner", "")
LOGINS = ("alice", "mallory", "dependabot[bot]", "")


def _maybe(shaped: SearchStrategy[Json]) -> SearchStrategy[Json]:
    """A field as GitHub sends it, usually; anything at all, sometimes."""
    return shaped | shaped | shaped | JUNK_JSON


def _big_text(size: int) -> SearchStrategy[str]:
    """Text over a bound ``event_from_payload`` cuts at, now and then."""
    return ANY_TEXT | ANY_TEXT | ANY_TEXT | st.just("é" * size)


def github_payload() -> SearchStrategy[dict[str, Json]]:
    """A GitHub-shaped delivery body: real field names, values of any shape."""
    text = ANY_TEXT
    user = st.fixed_dictionaries(
        {}, optional={"login": _maybe(st.sampled_from(LOGINS) | text), "type": st.just("Bot")}
    )
    label = st.fixed_dictionaries({}, optional={"name": _maybe(st.sampled_from(["bug"]) | text)})
    labels = st.lists(_maybe(label), max_size=4) | st.just([{"name": "x"}] * 150)
    content = st.fixed_dictionaries(
        {},
        optional={
            "title": _maybe(_big_text(1000)),
            "body": _maybe(_big_text(40_000)),
            "number": _maybe(st.integers()),
            "author_association": _maybe(st.sampled_from(ASSOCIATIONS)),
            "labels": _maybe(labels),
            "html_url": _maybe(text),
            "user": _maybe(user),
        },
    )
    repository = st.fixed_dictionaries(
        {}, optional={"full_name": _maybe(st.sampled_from(["acme/app", "ACME/App"]) | text)}
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "action": _maybe(st.sampled_from(ACTIONS)),
            "issue": _maybe(content),
            "pull_request": _maybe(content),
            "comment": _maybe(content),
            "review": _maybe(content),
            "label": _maybe(label),
            "repository": _maybe(repository),
            "sender": _maybe(user),
            "author_association": _maybe(st.sampled_from(ASSOCIATIONS)),
            "head_commit": _maybe(st.fixed_dictionaries({"message": text})),
            "compare": _maybe(text),
            "zen": text,
        },
    )


# Deliveries the agents of test_api_fuzz.py's namespace start for (before mutation).
SCENARIOS = (
    ("issues", "opened"),
    ("issues", "labeled"),
    ("issue_comment", "created"),
    ("pull_request", "opened"),
    ("push", None),
    ("release", "published"),
)
# Where a near-match is broken: each path gets a value of any type.  Those an ignored
# agent's reason quotes back come first (hypothesis favours the first values).
MUTABLE = (
    ("repository", "full_name"),
    ("sender", "login"),
    ("comment", "author_association"),
    ("label", "name"),
    ("action",),
    ("issue",),
    ("issue", "author_association"),
    ("issue", "labels"),
    ("issue", "title"),
    ("label",),
    ("sender",),
    ("sender", "type"),
)


@st.composite
def near_match(draw: st.DrawFn) -> tuple[str, dict[str, Json]]:
    """(event, payload) that an agent starts for, with up to two fields broken."""
    event, action = draw(st.sampled_from(SCENARIOS))
    content = {
        "number": draw(st.integers(1, 10**6)),
        "title": draw(_big_text(1000)),
        "body": draw(_big_text(40_000)),
        "author_association": draw(st.sampled_from(ASSOCIATIONS)),
        "labels": [{"name": "bug"}],
        "html_url": "https://github.com/acme/app/issues/1",
    }
    payload: dict[str, Any] = {
        "action": action,
        "issue": content,
        "pull_request": content,
        "comment": {"body": draw(ANY_TEXT), "author_association": content["author_association"]},
        "label": {"name": "bug"},
        "repository": {"full_name": "acme/app"},
        "sender": {"login": draw(st.sampled_from(LOGINS)), "type": "User"},
    }
    mutations = (
        [] if draw(one_in(3)) else draw(st.lists(st.sampled_from(MUTABLE), min_size=1, max_size=2))
    )
    for path in mutations:
        _replace(payload, path, draw(_mostly(ODD_TEXT, JUNK_JSON)))
    return event, payload


def _replace(payload: dict[str, Json], path: tuple[str, ...], value: Json) -> None:
    parent = payload
    for key in path[:-1]:
        if not isinstance(parent.get(key), dict):
            return  # Already replaced by a broken value.
        parent = parent[key] = dict(parent[key])  # Shared sub-objects: copy before writing.
    parent[path[-1]] = value


@st.composite
def webhook_body(draw: st.DrawFn) -> tuple[bytes, str, bool, str | None]:
    """(body, the content type it is meant for, whether a JSON object, the event it fits)."""
    kind = draw(st.sampled_from(["json"] * 4 + ["form"] * 2 + ["junk-form", "junk"]))
    if kind in ("json", "form"):
        event, payload = draw(near_match() | st.tuples(st.none(), github_payload() | JUNK_JSON))
        raw = encode_json(payload, draw(st.booleans()))
        # A lone surrogate anywhere makes the payload malformed (400), like bad JSON.
        is_object = isinstance(payload, dict) and _valid_unicode(payload)
        if kind == "json":
            return raw, JSON_TYPE, is_object, event
        form = b"payload=" + urllib.parse.quote_plus(raw).encode()
        return form, FORM_TYPE, is_object, event
    if kind == "junk-form":
        pairs = st.lists(st.tuples(ANY_TEXT, ANY_TEXT), max_size=20)
        junk = draw(
            pairs.map(lambda p: urllib.parse.urlencode(p, errors="surrogatepass").encode())
            | st.sampled_from([b"payload=%ff%fe", b"payload", b"payload=&payload={}", b"%"])
        )
        return junk, FORM_TYPE, False, None
    junk = draw(st.binary(max_size=128) | deep_nesting() | st.just(b""))
    return junk, JSON_TYPE, False, None


def _valid_unicode(value: Json) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Job names derive from (hook id, delivery id, agent): small pools keep the jobs the
# fuzz creates few (a redelivery creates nothing new) while most deliveries still
# go through matching and the dedup path.
DELIVERY_IDS = tuple(f"fuzz-{n}" for n in range(40))
HOOK_IDS = ("4242", "7")
SIGNATURES = ("valid",) * 8 + ("upper", "padded", "other", "garbled", "sha1", "empty", "absent")


@st.composite
def _header(draw: st.DrawFn, valid: SearchStrategy[str]) -> str | None:
    """A header value: valid mostly, junk or absent sometimes."""
    return draw(HEADER_TEXT | st.none()) if draw(one_in(10)) else draw(valid)


def _signature(body: bytes, secret: str, kind: str) -> str | None:
    good = sign(body, secret)
    return {
        "valid": good,
        "upper": "sha256=" + good[7:].upper(),
        "padded": good + " ",
        "other": sign(body, secret + "-old"),
        "garbled": good[:-2] + "zz",
        "sha1": "sha1=" + good[7:47],
        "empty": "",
        "absent": None,
    }[kind]


@st.composite
def webhook_request(draw: st.DrawFn, path: str, secret: str) -> FuzzRequest:
    """A delivery to ``path``; delivery ids come from a small pool so few jobs are created."""
    body, meant_type, is_object, fits = draw(webhook_body())
    content_type = draw(st.sampled_from(CONTENT_TYPES)) if draw(one_in(8)) else meant_type
    signature = draw(st.sampled_from(SIGNATURES))
    event_names = st.sampled_from(EVENTS) | st.from_regex(r"[a-z_]{1,64}", fullmatch=True)
    if fits is not None and not draw(one_in(4)):
        event_names = st.just(fits)
    headers: dict[str, str | None] = {
        "X-GitHub-Event": draw(_header(event_names)),
        "X-GitHub-Delivery": draw(_header(st.sampled_from(DELIVERY_IDS))),
        "X-GitHub-Hook-ID": draw(_header(st.sampled_from(HOOK_IDS))),
        "X-Hub-Signature-256": _signature(body, secret, signature),
        "Content-Type": content_type or None,
        "User-Agent": draw(st.just("GitHub-Hookshot/fuzz") | HEADER_TEXT),
    }
    body, encoding, readable = draw(content_encoding(body))
    sent = {k: v for k, v in {**headers, **encoding}.items() if v is not None}
    method = draw(st.sampled_from(METHODS)) if draw(one_in(20)) else "POST"
    if method == "HEAD":  # Its answer has no body, so no parser error could be read back.
        body = b""
        sent.pop("Content-Encoding", None)
    well_formed = (
        readable
        and method == "POST"
        and sent.get("X-GitHub-Event") in EVENTS
        and sent.get("X-GitHub-Delivery") in DELIVERY_IDS
        and sent.get("X-GitHub-Hook-ID", HOOK_IDS[0]) in HOOK_IDS
        and content_type.partition(";")[0] == meant_type
    )
    signed = signature in ("valid", "upper", "padded")
    return FuzzRequest(
        method,
        path,
        sent,
        body,
        f"webhook {'signed' if signed else 'unsigned'}",
        must_refuse=well_formed and not signed,
        must_accept=well_formed and signed and is_object,
    )
