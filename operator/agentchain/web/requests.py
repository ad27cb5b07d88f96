"""Turning query strings and JSON bodies into validated models, or a 422.

Every API input goes through a pydantic model (the same models ``openapi.py``
describes), so a malformed request is a 422 naming the fields, never a 500.
Validation errors are reported without the offending input: it may be large
or hostile, and a client already has it.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from agentchain.web import intake
from agentchain.web.responses import ApiError

log = logging.getLogger(__name__)

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


# A ``\uD800``-``\uDFFF`` escape: only then can the decoded JSON hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def loads_unicode(raw: bytes | bytearray) -> Any:
    """``raw`` as JSON whose strings are all valid Unicode (``ValueError`` otherwise).

    JSON may escape a lone surrogate (``"\ud800"``), which Python decodes to a
    string that cannot be encoded as UTF-8: it would fail later, far from the
    input, wherever the text is written to Redis or to a response.  RFC 8259
    leaves such strings undefined and I-JSON (RFC 7493) forbids them; so do we.
    """
    # Strict UTF-8 (RFC 8259): json.loads(bytes) would decode with "surrogatepass" and
    # let a raw, unescaped surrogate through.
    value = json.loads(raw.decode("utf-8-sig"))
    if _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError("a string holds an unpaired UTF-16 surrogate") from exc
    return value


async def read_json(request: web.Request) -> Any:
    """The body as JSON (aiohttp's ``client_max_size`` bounds it: 413 past 1 MiB)."""
    intake.refuse_encoded(request)
    try:
        raw = await request.read()
    except ConnectionError:
        log.info("%s %s: client closed the connection mid-body", request.method, request.path)
        raise intake.incomplete() from None
    try:
        return loads_unicode(raw)
    except (ValueError, RecursionError) as exc:
        raise ApiError(422, "invalid body", f"The body must be JSON: {exc}.") from exc


def validate(model: type[M], data: Any) -> M:
    """``data`` (an already-read JSON body) as ``model``, or a 422.

    Strictly: a JSON body has types, so ``"yes"`` is no boolean and ``"60"`` no integer,
    as the schema in the OpenAPI document says (a query string, all text, is parsed
    leniently instead).  An integral number such as ``1.0`` is an integer, as JSON
    Schema counts it (``schemas.JsonInteger``).
    """
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as exc:
        raise _invalid("body", exc) from exc


async def parse_body(model: type[M], request: web.Request) -> M:
    return validate(model, await read_json(request))
