"""Checks of every exchange against the providers' official Python SDKs' own types.

Requests are checked against the SDKs' parameter ``TypedDict``s (e.g.
``anthropic.types.beta.MessageCreateParams``) and what the stand-in sends against their
response models (``BetaRawMessageStreamEvent``, ``openai.types.responses.ResponseStreamEvent``,
...), with pydantic ``TypeAdapter``s. Two things pydantic does not do by itself are done
here, so that a typo is caught rather than ignored:

- the SDKs type lists as ``Iterable[...]``, which pydantic validates lazily; the result is
  walked to the end, so every element is validated;
- a ``TypedDict`` drops keys it does not declare and an SDK model keeps them as extras; a
  key the chosen type does not declare is reported as unknown.

Building an adapter for a large union takes seconds, so each is built once per process.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import warnings
from collections.abc import Iterator
from typing import Any

import pydantic
from pydantic import TypeAdapter

# kind -> (module, name) of the SDK type it is checked against.
SDK_TYPES = {
    "anthropic.request": ("anthropic.types.beta", "MessageCreateParams"),
    "anthropic.event": ("anthropic.types.beta", "BetaRawMessageStreamEvent"),
    "anthropic.message": ("anthropic.types.beta", "BetaMessage"),
    "anthropic.error": ("anthropic.types", "ErrorResponse"),
    "responses.request": ("openai.types.responses", "ResponseCreateParams"),
    "responses.event": ("openai.types.responses", "ResponseStreamEvent"),
    "chat.request": ("openai.types.chat", "CompletionCreateParams"),
    "chat.chunk": ("openai.types.chat", "ChatCompletionChunk"),
    "chat.completion": ("openai.types.chat", "ChatCompletion"),
    "openai.error": ("openai.types.shared", "ErrorObject"),
    "gemini.request": ("e2e.models.gemini_types", "GenerateContentRequest"),
    "gemini.chunk": ("google.genai.types", "GenerateContentResponse"),
    "gemini.error": ("e2e.models.gemini_types", "ErrorResponse"),
}


@functools.cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    module, name = SDK_TYPES[kind]
    return TypeAdapter(getattr(importlib.import_module(module), name))


def _materialize(value: Any) -> Any:
    """``value`` with every lazily validated iterable consumed (validating its elements)."""
    if isinstance(value, pydantic.BaseModel):
        return value
    if isinstance(value, dict):
        return {key: _materialize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_materialize(item) for item in value]
    if isinstance(value, Iterator):
        return [_materialize(item) for item in value]
    return value


# Keys whose value the SDKs type as an open mapping (a JSON Schema, a tool's input,
# free metadata): pydantic may match it to a typed member of the union that drops the
# rest, so keys under them are not compared.
OPEN_KEYS = frozenset({"input_schema", "parameters", "schema", "input", "metadata"})


def _dropped(given: Any, kept: Any, where: str) -> Iterator[str]:
    """Keys of ``given`` that validation did not keep: unknown to the type it matched."""
    if isinstance(given, dict) and isinstance(kept, dict):
        for key, item in given.items():
            if key not in kept:
                yield f"{where}.{key}: not a field of the SDK's type"
            elif key not in OPEN_KEYS:
                yield from _dropped(item, kept[key], f"{where}.{key}")
    elif isinstance(given, list) and isinstance(kept, list) and len(given) == len(kept):
        for index, (item, kept_item) in enumerate(zip(given, kept, strict=True)):
            yield from _dropped(item, kept_item, f"{where}[{index}]")


def _extras(model: Any, where: str) -> Iterator[str]:
    """Fields an SDK model kept as extras (its models accept unknown fields)."""
    if isinstance(model, pydantic.BaseModel):
        for key in model.model_extra or {}:
            yield f"{where}.{key}: not a field of the SDK's {type(model).__name__}"
        for name in type(model).model_fields:
            yield from _extras(getattr(model, name), f"{where}.{name}")
    elif isinstance(model, list | tuple):
        for index, item in enumerate(model):
            yield from _extras(item, f"{where}[{index}]")
    elif isinstance(model, dict):
        for key, item in model.items():
            yield from _extras(item, f"{where}.{key}")


# Fields a pinned CLI sends that its provider's SDK does not declare (yet): accepted, by
# exact path, with the reason. ``tests`` check each is still missing from the SDK type, so
# the list shrinks when the SDKs catch up.
KNOWN_EXTRAS: dict[str, dict[str, str]] = {
    "responses.request": {
        "$.client_metadata": "codex sends its own metadata (codex 0.169; SDK openai 3.57)",
    },
}


def _relevant(errors: list[Any]) -> list[str]:
    """The errors of the union members whose ``type`` matched, if any did.

    A union of events or blocks fails on every member; only the members that agree on
    the ``type`` tag say what is wrong with the value.
    """
    tagged_off = {
        e["loc"][0]
        for e in errors
        if len(e["loc"]) == 2 and e["loc"][1] == "type" and e["type"] == "literal_error"
    }
    kept = [e for e in errors if not e["loc"] or e["loc"][0] not in tagged_off] or errors
    return [f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in kept]


def problems(kind: str, value: Any) -> list[str]:
    """What is wrong with ``value`` as the SDK type ``kind`` names; empty if it conforms.

    Kinds: the keys of ``SDK_TYPES``.
    """
    with warnings.catch_warnings():
        # The SDKs' TypedDicts that allow extra items warn when pydantic builds them.
        warnings.simplefilter("ignore")
        adapter = _adapter(kind)
    try:
        kept = _materialize(adapter.validate_python(value))
    except pydantic.ValidationError as error:
        return _relevant(error.errors())[:20]
    unknown = (
        _extras(kept, "$") if isinstance(kept, pydantic.BaseModel) else _dropped(value, kept, "$")
    )
    allowed = KNOWN_EXTRAS.get(kind, {})
    return list(itertools.islice((p for p in unknown if p.split(":", 1)[0] not in allowed), 20))
