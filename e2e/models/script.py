"""What a test scripts the stand-in model to answer, one answer per model request.

``Reply`` is a turn of the model: text and/or tool calls, with the token counts it
reports. ``Failure`` is a provider error: its HTTP status and message, in each provider's
own error body (``ERROR_TYPES``), with an optional ``retry-after`` header.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MCP_AGENTCHAIN = "mcp__agentchain"
"""The namespace both CLIs give ``agentchain mcp``'s tools (the server is ``agentchain``)."""


@dataclass(frozen=True)
class ToolCall:
    """A tool the model calls; ``call_id`` is generated when empty.

    ``namespace`` is a group of tools, as codex lists an MCP server's (a Responses API
    ``namespace`` tool): the Responses API calls ``name`` in it, the APIs without
    namespaces call ``<namespace>__<name>``, which is how Claude Code names an MCP
    server's tools, so one script calls the same MCP tool through either CLI.
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""
    namespace: str = ""

    @property
    def flat_name(self) -> str:
        """The name where tools have no namespaces (Anthropic, Chat Completions)."""
        return f"{self.namespace}__{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Reply:
    """A model turn: ``text`` (may be empty when it only calls tools) and ``tool_calls``."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 100
    output_tokens: int = 20


@dataclass(frozen=True)
class Failure:
    """A provider error: ``status`` with the provider's error body and ``message``."""

    status: int
    message: str = ""
    retry_after: float | None = None


Answer = Reply | Failure

# status -> (Anthropic error type, OpenAI error type, OpenAI error code), as the
# providers document them for these statuses.
# status -> Google's canonical status name, as the Gemini API's error body gives it.
GOOGLE_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
ERROR_TYPES: dict[int, tuple[str, str, str | None]] = {
    400: ("invalid_request_error", "invalid_request_error", None),
    401: ("authentication_error", "invalid_request_error", "invalid_api_key"),
    403: ("permission_error", "invalid_request_error", None),
    404: ("not_found_error", "invalid_request_error", "model_not_found"),
    413: ("request_too_large", "invalid_request_error", None),
    429: ("rate_limit_error", "requests", "rate_limit_exceeded"),
    500: ("api_error", "server_error", None),
    503: ("api_error", "server_error", None),
    529: ("overloaded_error", "server_error", None),
}
DEFAULT_MESSAGES = {
    401: "invalid x-api-key",
    429: "Number of requests has exceeded your rate limit.",
    500: "Internal server error",
    529: "Overloaded",
}


def text(value: str, input_tokens: int = 100, output_tokens: int = 20) -> Reply:
    return Reply(text=value, input_tokens=input_tokens, output_tokens=output_tokens)


def tool(
    name: str, arguments: dict[str, Any] | None = None, text: str = "", namespace: str = ""
) -> Reply:
    return Reply(text=text, tool_calls=(ToolCall(name, dict(arguments or {}), "", namespace),))


def mcp_tool(name: str, arguments: dict[str, Any] | None = None, text: str = "") -> Reply:
    """A call of one of ``agentchain mcp``'s tools, as either CLI lists it."""
    return tool(name, arguments, text, MCP_AGENTCHAIN)


def failure(status: int, message: str = "", retry_after: float | None = 0) -> Failure:
    return Failure(status, message or DEFAULT_MESSAGES.get(status, "error"), retry_after)
