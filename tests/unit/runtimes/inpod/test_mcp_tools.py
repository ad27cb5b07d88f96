"""``agentchain mcp`` as an agent's CLI meets it: a subprocess spoken to over stdio.

Each test starts the real server (``python -m agentchain mcp``) with the MCP SDK's own
stdio client, and behind it the real job API (``build_app``, served on a socket) on a
real Redis, reached with a job token as the pod's environment gives it.  No
Kubernetes: the tools tested here answer without the API server (delegation and
reading other jobs are ``e2e/test_mcp_tools.py``).

Aspects covered:
* the server lists every tool, each with a description, and refuses to start
  without the pod's environment (exit 2, the missing variables named);
* the store: set with a TTL (exact expiry), set-and-extend (90 days), touch (read and
  extend), get, and query by prefix, with keys that hold ``/``, ``?`` and spaces;
  the writer is the job, from its token; a value over 256 KiB and an absent entry
  are tool errors carrying the API's message and status;
* anchors: the job writes and reads its own, over 2 KB is refused (413), the team
  anchor reads what the operator keeps and is a clear error before there is one;
* a GitHub token without an App is the API's 404 as a tool error;
* a review goes to the job API as the block's object (multi-line comments too), whose
  refusal of what is not a review is the tool's error, reason included;
* no authority beyond the token: once the token is revoked every tool is refused
  (401), and an unreachable API is a tool error, never a crash of the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from e2e import mcpclient
from e2e.mcpclient import SOURCE, ok, refused, server
from mcp import Client

from agentchain.core.runtime import Runtime
from agentchain.memory import anchors
from tests.unit.web.conftest import Client as HttpClient

pytestmark = pytest.mark.redis

NAMESPACE = "team-a"
JOB = "ai-coder-1"
UID = "uid-ai-coder-1"
CHAIN = "chain-1"
TOOLS = {
    "delegate",
    "job_status",
    "store_get",
    "store_set",
    "store_set_and_extend",
    "store_touch",
    "store_query",
    "anchor_get",
    "anchor_set",
    "team_anchor_get",
    "github_token",
    "progress_note",
    "review",
}
DAY = 24 * 3600


def pod_env(api_url: str, token: str) -> dict[str, str]:
    return mcpclient.pod_env(api_url, token, NAMESPACE, JOB, CHAIN)


@pytest.fixture
async def token(runtime: Runtime) -> str:
    return await runtime.tokens.issue(NAMESPACE, JOB, UID, CHAIN, 600)


@pytest.fixture
def job_server(client: HttpClient, token: str) -> Client:
    """The server as the job's pod starts it (entered in the test: anyio's task groups
    must be left in the task that entered them, which a fixture's teardown is not)."""
    return server(pod_env(str(client.make_url("")).rstrip("/"), token))


async def test_every_tool_is_listed_with_a_description(job_server: Client) -> None:
    async with job_server as tools:
        listed = (await tools.list_tools()).tools
        assert {t.name for t in listed} == TOOLS
        for tool in listed:
            assert tool.description and len(tool.description) > 80, tool.name


def test_without_the_pods_environment_it_does_not_start() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": SOURCE, "AGENT_TOKEN": "x"}
    done = subprocess.run(
        [sys.executable, "-m", "agentchain", "mcp"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "AGENT_API_URL, AGENT_NAMESPACE, AGENT_JOB, AGENT_CHAIN_ID not set" in done.stderr


async def test_store_set_get_touch_and_query(job_server: Client) -> None:
    async with job_server as tools:
        now = time.time()
        key = "db/orders? index tip"
        short = await ok(tools, "store_set", namespace="perf", key=key, value="v1", ttl_seconds=60)
        assert short["key"] == key and short["writer"] == JOB
        assert now + 50 < short["expiresAt"] < now + 70
        got = await ok(tools, "store_get", namespace="perf", key=key)
        assert got["value"] == "v1" and got["expiresAt"] == short["expiresAt"]
        touched = await ok(tools, "store_touch", namespace="perf", key=key)
        assert touched["expiresAt"] > now + 89 * DAY
        lasting = await ok(
            tools, "store_set_and_extend", namespace="perf", key="db/pool", value="v2"
        )
        assert lasting["expiresAt"] > now + 89 * DAY
        await ok(tools, "store_set", namespace="perf", key="cache", value="v3", ttl_seconds=60)
        found = await ok(tools, "store_query", namespace="perf", prefix="db/")
        assert sorted(e["key"] for e in found["items"]) == ["db/orders? index tip", "db/pool"]
        recent = await ok(tools, "store_query", namespace="perf", limit=1)
        assert [e["key"] for e in recent["items"]] == ["cache"]


async def test_store_refusals_carry_the_apis_message(job_server: Client) -> None:
    async with job_server as tools:
        big = "x" * (256 * 1024 + 1)
        text = await refused(tools, "store_set_and_extend", namespace="perf", key="k", value=big)
        assert text.endswith(f"(HTTP 413, size {len(big)}, limit {256 * 1024})"), text
        assert "too large" in text
        absent = await refused(tools, "store_get", namespace="perf", key="nothing")
        assert "entry not found: No live entry 'nothing' in 'perf'. (HTTP 404)" in absent
        touched = await refused(tools, "store_touch", namespace="perf", key="nothing")
        assert "(HTTP 404)" in touched


async def test_own_anchor_is_written_read_and_bounded(job_server: Client) -> None:
    async with job_server as tools:
        assert "anchor not found" in await refused(tools, "anchor_get")
        anchor = {"task": "fix the login", "progress": ["reproduced"], "keyFacts": ["uses JWT"]}
        written = await ok(
            tools,
            "anchor_set",
            task="fix the login",
            progress=["reproduced"],
            key_facts=["uses JWT"],
        )
        assert written["anchor"] == anchor and written["size"] > 0
        assert (await ok(tools, "anchor_get"))["anchor"] == anchor
        # A call that names no known field (a typo) would wipe it: refused instead.
        empty = await refused(tools, "anchor_set", goal="a field anchors do not have")
        assert "names none of its fields" in empty
        text = await refused(tools, "anchor_set", status="y" * anchors.JOB_ANCHOR_MAX_BYTES)
        assert "(HTTP 413" in text and f"limit {anchors.JOB_ANCHOR_MAX_BYTES}" in text
        assert (await ok(tools, "anchor_get"))["anchor"] == anchor


async def test_team_anchor_is_read_once_the_operator_keeps_one(
    job_server: Client, runtime: Runtime
) -> None:
    async with job_server as tools:
        before = await refused(tools, "team_anchor_get")
        assert f"anchor not found: Chain {CHAIN} has no team anchor. (HTTP 404)" in before
        await runtime.anchors.update_team_anchor(NAMESPACE, CHAIN, lambda _: {"done": ["triage"]})
        got = await ok(tools, "team_anchor_get")
        assert got == {"chainId": CHAIN, "namespace": NAMESPACE, "anchor": {"done": ["triage"]}}


async def test_github_token_without_an_app_is_the_apis_refusal(job_server: Client) -> None:
    async with job_server as tools:
        text = await refused(tools, "github_token")
        assert text.endswith(
            ": no github token: the operator has no GitHub App configured"
            " (docs/github.md) (HTTP 404)"
        ), text


async def test_a_review_is_the_apis_to_judge(job_server: Client) -> None:
    comment = {"path": "a.py", "start_line": 4, "line": 4, "body": "Range of one?"}
    async with job_server as tools:
        text = await refused(tools, "review", verdict="comment", comments=[comment])
        assert "Not a review: comment 1: start_line must be a line number before line" in text
        assert "(HTTP 422)" in text


async def test_a_revoked_token_can_do_nothing(job_server: Client, runtime: Runtime) -> None:
    async with job_server as tools:
        await ok(tools, "store_set_and_extend", namespace="perf", key="k", value="v")
        await runtime.tokens.revoke(NAMESPACE, JOB, UID)
        for tool, arguments in [
            ("store_get", {"namespace": "perf", "key": "k"}),
            ("anchor_set", {"status": "done"}),
            ("team_anchor_get", {}),
            ("delegate", {"agent": "ai-reviewer", "task": "review"}),
            ("review", {"verdict": "approve"}),
        ]:
            text = await refused(tools, tool, **arguments)
            assert "unauthorized" in text and "(HTTP 401)" in text, (tool, text)


async def test_an_unreachable_api_is_a_tool_error(token: str) -> None:
    async with server(pod_env("http://127.0.0.1:9", token)) as mcp:
        text = await refused(mcp, "store_get", namespace="perf", key="k")
        assert "did not answer" in text
        # The server lives on: the next call is answered too.
        assert "did not answer" in await refused(mcp, "anchor_get")
        assert json.dumps(text)  # One line of plain text for the model.
