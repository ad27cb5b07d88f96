"""A stand-in model server for tests: the Anthropic and OpenAI APIs, scripted per test.

``ModelStandIn`` (``server.py``) serves on 127.0.0.1 from a daemon thread; a test
scripts its answers (``script.py``: ``text``, ``tool``, ``failure``) and reads what it
was asked. Every request and answer is validated against the official SDKs' types
(``validation.py``). The agent CLIs it is meant for are fetched by e2e/setup.sh
(``images/versions.env``, the pins the reference images build from); ``fixtures.py``
finds them and the fixture that fails a test on a violation. See README.md.
"""

from e2e.models.script import (
    MCP_AGENTCHAIN,
    Failure,
    Reply,
    ToolCall,
    failure,
    mcp_tool,
    text,
    tool,
)
from e2e.models.server import DEFAULT_API_KEY, Exchange, ModelStandIn

__all__ = [
    "DEFAULT_API_KEY",
    "MCP_AGENTCHAIN",
    "Exchange",
    "Failure",
    "ModelStandIn",
    "Reply",
    "ToolCall",
    "failure",
    "mcp_tool",
    "text",
    "tool",
]
