"""The OpenAPI 3.1 document of the webhook and the job API (``GET /api/openapi.json``).

Request bodies and query parameters are generated from the same pydantic models
the handlers validate with (``schemas.py``), so the document cannot drift from
what is enforced; paths and responses are written here by hand, which keeps the
document readable.  The fuzz tests (``e2e/test_api_fuzz.py``) derive their requests
from this document and check every answer's status against it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel

from agentchain.memory.anchors import JOB_ANCHOR_FIELDS, JOB_ANCHOR_MAX_BYTES
from agentchain.web.responses import json_response
from agentchain.web.schemas import (
    AdminJobRequest,
    AnswerHandover,
    DelegationRequest,
    JobQuery,
    ProgressNoteRequest,
    StopRequest,
    StoreQuery,
    StoreWrite,
    TenantQuery,
    UsageReport,
    WaitQuery,
    schema_of,
)

PATH = "/api/openapi.json"
VERSION = "0.1.0"

_ERROR = {"$ref": "#/components/responses/Error"}
# Every job API operation: a request the HTTP layer cannot read (400: a request line or
# header over 8 KiB, or a body cut short), no valid token (401), outside the token's scope
# (403), a query parameter or the body invalid (422), Redis or the Kubernetes API not
# answering (503).
_API_ERRORS = {code: _ERROR for code in ("400", "401", "403", "422", "503")}
_OBJECT = {"type": "object"}
_GITHUB_TOKEN = {
    "type": "object",
    "required": ["token", "expiresAt", "repository", "permissions"],
    "properties": {
        "token": {"type": "string"},
        "expiresAt": {"type": "string", "format": "date-time"},
        "repository": {"type": "string"},
        "permissions": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _param(name: str, where: str, schema: dict[str, Any], required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required or where == "path", "schema": schema}


_NS = _param("namespace", "path", {"type": "string"})
_NAME = _param("name", "path", {"type": "string"})
_CHAIN = _param("chainId", "path", {"type": "string"})
_KEY = _param("key", "path", {"type": "string"})
_JOB = {"$ref": "#/components/schemas/Job"}
_CHAIN_VIEW = {"$ref": "#/components/schemas/Chain"}

_NULLABLE_TEXT = {"type": ["string", "null"]}
_USAGE_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "description": "What the job's agent reported (status.usage), in the currency of its "
    "chain's budget (its first agent's; USD without one); null when it reported nothing.",
    "required": ["tokens", "cost", "currency"],
    "properties": {
        "tokens": {"type": "integer"},
        "cost": {"type": "number"},
        "currency": {"type": "string"},
        "turns": {"type": "integer", "description": "Agent turns, when its runtime counts them."},
        "inputTokens": {
            "type": "integer",
            "description": "Of tokens, the prompt's (cached input included), when its "
            "runtime splits them.",
        },
        "outputTokens": {
            "type": "integer",
            "description": "Of tokens, the model's output, when its runtime splits them.",
        },
    },
}
# Every field ``serializers.job_view`` returns (a unit test keeps the two the same).
_JOB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "namespace": {"type": "string"},
        "type": _NULLABLE_TEXT,
        "agentRole": {"type": "string"},
        "origin": _NULLABLE_TEXT,
        "chainId": _NULLABLE_TEXT,
        "chainDepth": {"type": ["integer", "null"]},
        "parentJobId": _NULLABLE_TEXT,
        "chainPath": {"type": "array", "items": {"type": "string"}},
        "delegation": {"type": "array", "items": _OBJECT},
        "status": {
            "enum": [
                *("pending", "waiting", "running", "completed", "failed", "skipped"),
                *("queued", "awaiting_approval", "cancelled"),
            ]
        },
        "phase": {"type": "string"},
        "reason": _NULLABLE_TEXT,
        "message": _NULLABLE_TEXT,
        "result": _NULLABLE_TEXT,
        "resultTruncated": {"type": ["boolean", "null"]},
        "resultSize": {"type": ["integer", "null"]},
        "exitCode": {"type": ["integer", "null"]},
        "createdAt": _NULLABLE_TEXT,
        "startedAt": _NULLABLE_TEXT,
        "completedAt": _NULLABLE_TEXT,
        "next": {"type": "array", "items": _OBJECT},
        "chainComplete": {"type": ["boolean", "null"]},
        "stoppedBy": {
            **_NULLABLE_TEXT,
            "description": "Who stopped it (api, annotation, github:<login>, budget, "
            "concurrency); why is in reason and message.",
        },
        "supersededBy": {
            **_NULLABLE_TEXT,
            "description": "The root job of the newer chain of its concurrency group.",
        },
        "approvedBy": {**_NULLABLE_TEXT, "description": "Who approved its start."},
        "approvedAt": {**_NULLABLE_TEXT, "format": "date-time"},
        "attempt": {"type": ["integer", "null"], "description": "Current attempt, from 1."},
        "retryAt": {
            **_NULLABLE_TEXT,
            "format": "date-time",
            "description": "When the next attempt starts (retry backoff).",
        },
        "usage": _USAGE_SCHEMA,
    },
}
_CHAIN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "chainId": {"type": "string"},
        "namespace": {"type": "string"},
        "jobCount": {"type": "integer"},
        "complete": {"type": "boolean"},
        "usage": {
            "type": ["object", "null"],
            "description": "The usage its jobs reported, summed, in the currency of its "
            "first agent's budget; null when none reported any.",
            "required": ["tokens", "cost", "currency", "reportedBy"],
            "properties": {
                "tokens": {"type": "integer"},
                "cost": {"type": "number"},
                "currency": {"type": "string"},
                "reportedBy": {"type": "integer", "description": "Jobs that reported."},
                "inputTokens": {
                    "type": "integer",
                    "description": "Input tokens of the jobs whose runtime splits its "
                    "tokens; absent when none does.",
                },
                "outputTokens": {"type": "integer", "description": "Their output tokens."},
                "splitBy": {"type": "integer", "description": "Jobs that reported a split."},
            },
        },
        "roots": {"type": "array", "items": _OBJECT, "description": "Jobs, with children."},
    },
}


def _job_anchor() -> dict[str, Any]:
    """The job anchor's shape, from the table ``memory/anchors.py`` validates with."""
    kinds: dict[type, dict[str, str]] = {str: {"type": "string"}, list: {"type": "array"}}
    return {
        "type": "object",
        "additionalProperties": False,
        "description": f"At most {JOB_ANCHOR_MAX_BYTES} bytes as compact JSON.",
        "properties": {
            name: {"anyOf": [kinds[t] for t in types]} if len(types) > 1 else kinds[types[0]]
            for name, types in JOB_ANCHOR_FIELDS.items()
        },
    }


def _query(model: type[BaseModel]) -> list[dict[str, Any]]:
    """A query model's fields as optional query parameters (a query string is never null)."""
    params = []
    for name, field in schema_of(model)["properties"].items():
        [schema] = [s for s in field.get("anyOf", [field]) if s.get("type") != "null"]
        schema = {k: v for k, v in schema.items() if k not in ("title", "description")}
        if field.get("default") is not None:
            schema["default"] = field["default"]
        param = _param(name, "query", schema)
        if "description" in field:
            param["description"] = field["description"]
        params.append(param)
    return params


_FORM = {"type": "object", "properties": {"payload": {"type": "string"}}}
# What GitHub sends with every delivery (web/hooks/webhook.py checks them before the body): a
# missing or malformed event or delivery id is a 400, a missing signature a 401.
_WEBHOOK_HEADERS = [
    {
        **_param(
            "X-GitHub-Event", "header", {"type": "string", "pattern": r"^[a-z][a-z0-9_]{0,63}$"}
        ),
        "required": True,
        "description": "The event's name (issues, issue_comment, ping, ...).",
    },
    {
        **_param(
            "X-GitHub-Delivery",
            "header",
            {"type": "string", "pattern": r"^[A-Za-z0-9._:-]{1,128}$"},
        ),
        "required": True,
        "description": "The delivery's id; a delivery is deduplicated by it and by its body.",
    },
    {
        **_param(
            "X-Hub-Signature-256", "header", {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"}
        ),
        "required": True,
        "description": "HMAC-SHA256 of the body under the webhook secret (401 without it).",
    },
    {
        **_param(
            "X-GitHub-Hook-ID", "header", {"type": "string", "pattern": r"^[A-Za-z0-9._:-]{1,128}$"}
        ),
        "description": "The hook's id, part of the AgentJob names.",
    },
]


def _paths() -> dict[str, Any]:
    tenant = _query(TenantQuery)
    return {
        "/webhooks/github": {
            "post": {
                "summary": "GitHub webhook delivery (HMAC-SHA256 signed).",
                "security": [],
                "parameters": _WEBHOOK_HEADERS,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": _OBJECT},
                        "application/x-www-form-urlencoded": {"schema": _FORM},
                    },
                },
                "responses": {
                    "200": _json(_OBJECT, "ping, or nothing matched"),
                    "202": _json(_OBJECT, "AgentJobs created or already there"),
                    # 408: the body did not arrive in time; 503: Redis down, or too many
                    # bodies in flight (with Retry-After).
                    **{c: _ERROR for c in ("400", "401", "408", "413", "415", "503")},
                },
            }
        },
        "/api/jobs": {
            "get": {
                "summary": "Jobs, newest first (paginated with next).",
                "parameters": _query(JobQuery),
                "responses": {"200": _json(_OBJECT), **_API_ERRORS},
            },
            "post": {
                "summary": "Manual run (admin token) or delegation (job token).",
                "parameters": _query(WaitQuery),
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "oneOf": [
                                    {"$ref": "#/components/schemas/AdminJobRequest"},
                                    {"$ref": "#/components/schemas/DelegationRequest"},
                                ]
                            }
                        }
                    },
                },
                "responses": {
                    "200": _json(_JOB, "the job already existed"),
                    "201": _json(_JOB, "created"),
                    "400": _ERROR,  # A body cut short (the client closed mid-body).
                    "404": _ERROR,  # A delegating job that no longer exists.
                    # A delegation refused (loop, depth); an agentRole two AiAgents share.
                    "409": _ERROR,
                    "413": _ERROR,
                    "415": _ERROR,  # A Content-Encoding: bodies are never decompressed.
                    "429": _ERROR,  # ?wait= beyond the token's concurrent waits.
                    **_API_ERRORS,
                },
            },
        },
        "/api/jobs/{name}": {"get": _op([_NAME], _JOB, extra=("409",))},  # Name ambiguous.
        "/api/jobs/{namespace}/{name}": _get([_NS, _NAME], _JOB),
        "/api/jobs/{namespace}/{name}/output": _get([_NS, _NAME], _OBJECT),
        "/api/jobs/{namespace}/{name}/anchor": {
            **_get([_NS, _NAME], _OBJECT),
            "put": _op([_NS, _NAME], _OBJECT, body={"$ref": "#/components/schemas/JobAnchor"}),
        },
        "/api/chains/{namespace}/{chainId}": _get([_NS, _CHAIN], _CHAIN_VIEW),
        "/api/chains/{namespace}/{chainId}/anchor": _get([_NS, _CHAIN], _OBJECT),
        "/api/jobs/{namespace}/{name}/stop": {"post": _stop([_NS, _NAME])},
        "/api/chains/{namespace}/{chainId}/stop": {"post": _stop([_NS, _CHAIN])},
        "/api/jobs/{namespace}/{name}/approve": {"post": _stop([_NS, _NAME], "Approve")},
        "/api/jobs/{namespace}/{name}/reject": {"post": _stop([_NS, _NAME], "Reject")},
        "/api/jobs/{namespace}/{name}/progress": {
            "put": _op(
                [_NS, _NAME], _OBJECT, body={"$ref": "#/components/schemas/ProgressNoteRequest"}
            )
        },
        "/api/jobs/{namespace}/{name}/answer": {
            "put": {
                **_op(
                    [_NS, _NAME],
                    _OBJECT,
                    body={"$ref": "#/components/schemas/AnswerHandover"},
                    extra=("409",),  # Another answer for the attempt, or it was captured.
                ),
                "summary": "Hand over the job's final answer (its own job token), once per "
                "attempt: its output, instead of its pod's log.",
            }
        },
        "/api/jobs/{namespace}/{name}/review": {
            "put": {
                **_op([_NS, _NAME], _OBJECT, body=_OBJECT, extra=("409",)),  # It ended.
                "summary": "Send the job's pull request review (its own job token): the "
                "agentchain-review block's JSON object, posted when the job succeeds.",
            }
        },
        "/api/jobs/{namespace}/{name}/usage": {
            "post": _op([_NS, _NAME], _OBJECT, body={"$ref": "#/components/schemas/UsageReport"})
        },
        "/api/store/{namespace}": _get([_NS, *_query(StoreQuery)], _OBJECT),
        "/api/store/{namespace}/{key}": {
            **_get([_NS, _KEY, *_query(StoreQuery)], _OBJECT),
            "put": _op(
                [_NS, _KEY, *tenant],
                _OBJECT,
                body={"$ref": "#/components/schemas/StoreWrite"},
            ),
            "delete": {
                "parameters": [_NS, _KEY, *tenant],
                "responses": {"204": {"description": "deleted"}, "404": _ERROR, **_API_ERRORS},
            },
        },
        "/api/github/token": {
            "post": {
                "summary": "A fresh GitHub installation token for the calling job (its own job "
                "token only), with the repository and permissions fixed at its launch.",
                "responses": {
                    "200": _json(_GITHUB_TOKEN),
                    # No App configured, or the job's agent declares no permissions.
                    "404": _ERROR,
                    "429": _ERROR,  # Past 24 tokens for the job (each lives an hour).
                    "502": _ERROR,  # GitHub refused (NotInstalled, PermissionMissing, ...).
                    **_API_ERRORS,  # 503: GitHub unreachable or rate-limited.
                },
            }
        },
    }


def _op(
    params: list[dict[str, Any]],
    schema: dict[str, Any],
    *,
    body: dict[str, Any] | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "parameters": params,
        "responses": {"200": _json(schema), "404": _ERROR, **_API_ERRORS},
    }
    op["responses"].update({code: _ERROR for code in extra})
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        op["responses"]["400"] = _ERROR  # A body cut short (the client closed mid-body).
        op["responses"]["413"] = _ERROR  # Over the body cap, or a store value over its limit.
        op["responses"]["415"] = _ERROR  # A Content-Encoding: bodies are never decompressed.
    return op


def _stop(params: list[dict[str, Any]], verb: str = "Stop") -> dict[str, Any]:
    """A stop, approval or rejection (admin token): 202 once asked, 409 when the job had
    already ended; the body's reason is shown on the job."""
    op = _op(params, _OBJECT, body={"$ref": "#/components/schemas/StopRequest"}, extra=("409",))
    op["summary"] = f"{verb} (admin token), with an optional reason."
    op["requestBody"]["required"] = False
    op["responses"]["202"] = op["responses"].pop("200")
    op["responses"]["202"]["description"] = "asked to stop"
    return op


def _get(params: list[dict[str, Any]], schema: dict[str, Any]) -> dict[str, Any]:
    return {"get": _op(params, schema)}


def document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "agentchain job API", "version": VERSION},
        "security": [{"bearer": []}],
        "paths": _paths(),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Job": _JOB_SCHEMA,
                "Chain": _CHAIN_SCHEMA,
                "AdminJobRequest": schema_of(AdminJobRequest),
                "DelegationRequest": schema_of(DelegationRequest),
                "StoreWrite": schema_of(StoreWrite),
                "StopRequest": schema_of(StopRequest),
                "UsageReport": schema_of(UsageReport),
                "ProgressNoteRequest": schema_of(ProgressNoteRequest),
                "AnswerHandover": schema_of(AnswerHandover),
                "JobAnchor": _job_anchor(),
                "Error": {
                    "type": "object",
                    "required": ["error", "detail"],
                    "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
                },
            },
            "responses": {
                "Error": _json({"$ref": "#/components/schemas/Error"}, "error"),
            },
        },
    }


async def serve_document(request: web.Request) -> web.Response:
    return json_response(document())


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, serve_document)
