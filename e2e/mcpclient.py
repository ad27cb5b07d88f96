"""``agentchain mcp`` as an agent's CLI starts it: a subprocess spoken to over stdio.

The MCP SDK's own client starts ``python -m agentchain mcp`` with the environment an
agent's pod gets, so the tests exercise the real server, its real transport and the
real job API behind it. When agents run in containers (the real node) the server is the
e2e agent image's ``agentchain mcp`` in an idle pod of that image, spoken to through
``kubectl exec -i`` (its stdio are the exec's), so the job API behind it must listen
where pods reach it (``ClusterInfo.pod_host``).

Enter :func:`server` in the test itself, not in a fixture: anyio's task groups must be
left in the task that entered them, which a fixture's teardown is not.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, TextContent

import agentchain
from e2e.controlplane.cluster import ClusterInfo
from e2e.runtime_node import exec_argv, idle_pod

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


def server(env: dict[str, str], info: ClusterInfo | None = None) -> Client:
    """A client of ``agentchain mcp`` run with ``env``: this checkout's as a host process
    (the unit tests', which name no cluster), else the e2e agent image's in a pod of
    ``info``'s cluster, where agents run."""
    if info is None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "agentchain", "mcp"], env=env
        )
        return Client(params, read_timeout_seconds=120)
    pod = idle_pod(info, "mcp-server", info.agent_image)
    in_pod = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    exe, *args = exec_argv(info, pod, in_pod, "agentchain", "mcp")
    return Client(StdioServerParameters(command=exe, args=args), read_timeout_seconds=120)


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
