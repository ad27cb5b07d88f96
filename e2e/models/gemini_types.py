"""The Gemini API's request body, from the ``google-genai`` SDK's own types.

The SDK has no type for the REST body itself: it builds it from ``GenerateContentParameters``
(snake_case) as camelCase JSON. Each field of the body is one of the SDK's models, which
accept their camelCase aliases and forbid fields they do not declare; this ``TypedDict``
names them, so a body key the API does not take is reported too (``validation.py``).
The error body is Google's documented envelope, which the SDK's ``errors.APIError``
reads: ``{"error": {"code", "message", "status"}}``.
"""

from __future__ import annotations

from google.genai import types
from typing_extensions import TypedDict


class GenerateContentRequest(TypedDict, total=False):
    contents: list[types.Content]
    systemInstruction: types.Content
    tools: list[types.Tool]
    toolConfig: types.ToolConfig
    generationConfig: types.GenerationConfig
    safetySettings: list[types.SafetySetting]
    cachedContent: str


class ErrorStatus(TypedDict):
    code: int
    message: str
    status: str


class ErrorResponse(TypedDict):
    error: ErrorStatus
