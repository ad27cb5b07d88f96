"""Turning query strings and JSON bodies into validated models, or a 422.

Every API input goes through a pydantic model (the same models ``openapi.py``
describes), so a malformed request is a 422 naming the fields, never a 500.
Validation errors are reported without the offending input: it may be large
or hostile, and a client already has it.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from agentchain.web.responses import ApiError

M = TypeVar("M", bound=BaseModel)


def _invalid(what: str, exc: ValidationError) -> ApiError:
    errors = json.loads(exc.json(include_url=False, include_input=False, include_context=False))
    fields = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ())) or what}: {e.get('msg')}" for e in errors
    )
    return ApiError(422, f"invalid {what}", fields, errors=errors)


def parse_query(model: type[M], request: web.Request) -> M:
    try:
        return model.model_validate(dict(request.query))
    except ValidationError as exc:
        raise _invalid("query", exc) from exc


async def read_json(request: web.Request) -> Any:
    """The body as JSON (aiohttp's ``client_max_size`` bounds it: 413 past 1 MiB)."""
    raw = await request.read()
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ApiError(422, "invalid body", "The body must be JSON.") from exc


def validate(model: type[M], data: Any) -> M:
    """``data`` (an already-read JSON body) as ``model``, or a 422."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _invalid("body", exc) from exc


async def parse_body(model: type[M], request: web.Request) -> M:
    return validate(model, await read_json(request))
