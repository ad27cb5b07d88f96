"""The OpenAPI 3.1 document of the webhook and the job API (``GET /api/openapi.json``).

Request schemas are generated from the same pydantic models the handlers
validate with (``schemas.py``), so the document cannot drift from what is
enforced; paths and responses are written here by hand, which keeps the
document readable and lets the fuzz tests derive requests from it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from agentchain.web.responses import json_response
from agentchain.web.schemas import (
    AdminJobRequest,
    DelegationRequest,
    StoreWrite,
    schema_of,
)

PATH = "/api/openapi.json"
VERSION = "0.1.0"

_ERROR = {"$ref": "#/components/responses/Error"}
_AUTH_ERRORS = {"401": _ERROR, "403": _ERROR}
_OBJECT = {"type": "object"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _param(name: str, where: str, schema: dict[str, Any], required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required or where == "path", "schema": schema}


_NS = _param("namespace", "path", {"type": "string"})
_NAME = _param("name", "path", {"type": "string"})
_CHAIN = _param("chainId", "path", {"type": "string"})
_KEY = _param("key", "path", {"type": "string"})
_TENANT = _param("tenant", "query", {"type": "string"})
_JOB = {"$ref": "#/components/schemas/Job"}

_JOB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "namespace": {"type": "string"},
        "type": {"type": ["string", "null"]},
        "agentRole": {"type": "string"},
        "chainId": {"type": ["string", "null"]},
        "chainDepth": {"type": ["integer", "null"]},
        "parentJobId": {"type": ["string", "null"]},
        "chainPath": {"type": "array", "items": {"type": "string"}},
        "status": {"enum": ["pending", "waiting", "running", "completed", "failed", "skipped"]},
        "phase": {"type": "string"},
        "reason": {"type": ["string", "null"]},
        "message": {"type": ["string", "null"]},
        "result": {"type": ["string", "null"]},
        "resultTruncated": {"type": ["boolean", "null"]},
        "exitCode": {"type": ["integer", "null"]},
        "createdAt": {"type": ["string", "null"]},
        "startedAt": {"type": ["string", "null"]},
        "completedAt": {"type": ["string", "null"]},
        "next": {"type": "array", "items": _OBJECT},
    },
}


def _paths() -> dict[str, Any]:
    list_params = [
        _param(n, "query", {"type": "string"})
        for n in ("chainId", "agentRole", "status", "namespace", "continue")
    ] + [_param("limit", "query", {"type": "integer", "minimum": 1, "maximum": 500})]
    wait = _param("wait", "query", {"type": "number", "minimum": 0, "maximum": 300})
    store_list = [_param("prefix", "query", {"type": "string"}), _TENANT]
    return {
        "/webhooks/github": {
            "post": {
                "summary": "GitHub webhook delivery (HMAC-SHA256 signed).",
                "security": [],
                "requestBody": {"content": {"application/json": {"schema": _OBJECT}}},
                "responses": {
                    "200": _json(_OBJECT, "ping, or nothing matched"),
                    "202": _json(_OBJECT, "AgentJobs created or already there"),
                    **{c: _ERROR for c in ("400", "401", "413", "415")},
                },
            }
        },
        "/api/jobs": {
            "get": {
                "summary": "Jobs, newest first (paginated with next).",
                "parameters": list_params,
                "responses": {"200": _json(_OBJECT), "422": _ERROR, **_AUTH_ERRORS},
            },
            "post": {
                "summary": "Manual run (admin token) or delegation (job token).",
                "parameters": [wait],
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "oneOf": [
                                    {"$ref": "#/components/schemas/AdminJobRequest"},
                                    {"$ref": "#/components/schemas/DelegationRequest"},
                                ]
                            }
                        }
                    }
                },
                "responses": {
                    "200": _json(_JOB, "the job already existed"),
                    "201": _json(_JOB, "created"),
                    "409": _ERROR,
                    "422": _ERROR,
                    **_AUTH_ERRORS,
                },
            },
        },
        "/api/jobs/{name}": _get([_NAME], _JOB),
        "/api/jobs/{namespace}/{name}": _get([_NS, _NAME], _JOB),
        "/api/jobs/{namespace}/{name}/output": _get([_NS, _NAME], _OBJECT),
        "/api/jobs/{namespace}/{name}/anchor": {
            **_get([_NS, _NAME], _OBJECT),
            "put": _op([_NS, _NAME], _OBJECT, body=_OBJECT, extra=("413", "422")),
        },
        "/api/chains/{namespace}/{chainId}": _get([_NS, _CHAIN], _OBJECT),
        "/api/chains/{namespace}/{chainId}/anchor": _get([_NS, _CHAIN], _OBJECT),
        "/api/store/{namespace}": _get([_NS, *store_list], _OBJECT),
        "/api/store/{namespace}/{key}": {
            **_get([_NS, _KEY, _TENANT], _OBJECT),
            "put": _op(
                [_NS, _KEY, _TENANT],
                _OBJECT,
                body={"$ref": "#/components/schemas/StoreWrite"},
                extra=("413", "422"),
            ),
            "delete": {
                "parameters": [_NS, _KEY, _TENANT],
                "responses": {"204": {"description": "deleted"}, "404": _ERROR, **_AUTH_ERRORS},
            },
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
        "responses": {"200": _json(schema), "404": _ERROR, **_AUTH_ERRORS},
    }
    op["responses"].update({code: _ERROR for code in extra})
    if body is not None:
        op["requestBody"] = {"content": {"application/json": {"schema": body}}}
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
                "AdminJobRequest": schema_of(AdminJobRequest),
                "DelegationRequest": schema_of(DelegationRequest),
                "StoreWrite": schema_of(StoreWrite),
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
