"""``agentchain mcp`` as an agent's CLI starts it: a subprocess spoken to over stdio.

The MCP SDK's own client starts ``python -m agentchain mcp`` with the environment an
agent's pod gets, so the tests exercise the real server, its real transport and the
real job API behind it.  Enter :func:`server` in the test itself, not in a fixture:
anyio's task groups must be left in the task that entered them, which a fixture's
teardown is not.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, TextContent

import agentchain

# The package of the checkout that runs the tests, whichever it is.
SOURCE = str(Path(agentchain.__file__).resolve().parents[1])


def pod_env(api_url: str, token: str, namespace: str, job: str, chain_id: str) -> dict[str, str]:
    return {
        "AGENT_API_URL": api_url,
        "AGENT_TOKEN": token,
        "AGENT_NAMESPACE": namespace,
        "AGENT_JOB": job,
        "AGENT_CHAIN_ID": chain_id,
        "PYTHONPATH": SOURCE,
    }


def server(env: dict[str, str]) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "agentchain", "mcp"], env=env
    )
    return Client(params, read_timeout_seconds=120)


def text_of(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


async def ok(mcp: Client, tool: str, **arguments: Any) -> Any:
    """The tool's structured answer; fails the test on a tool error."""
    result = await mcp.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


async def refused(mcp: Client, tool: str, **arguments: Any) -> str:
    """The text of the tool's error; fails the test when the call succeeded."""
    result = await mcp.call_tool(tool, arguments)
    assert result.is_error, f"{tool} was not refused: {text_of(result)}"
    return text_of(result)
