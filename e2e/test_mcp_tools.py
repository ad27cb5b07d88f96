"""``agentchain mcp``'s delegation and job tools on the real API server and Redis.

The server runs as the agent's CLI starts it (``e2e/mcpclient.py``), with a real
AgentJob's token, and behind it the job API in-process (the engine is not running:
the test ends the delegated job itself, as its pod would).  The store and anchor
tools need no API server and are ``tests/unit/runtimes/inpod/test_mcp_tools.py``.

Aspects covered:
* delegate with a wait: the call creates the delegated job in the caller's chain
  and returns when that job ends, with its result; job_status then reads it, and
  anchor_get reads (the absence of) another job of the chain's anchor;
* seed 000's refusals arrive as tool errors in the API's words: a loop (the caller
  itself), a target that does not accept the caller (403 NotAllowedFrom), an
  unknown agent; and a job of another chain is not the caller's to read;
* progress_note: the note becomes the job's own annotation (which the GitHub
  write-back renders); over 300 characters is the API's 422; the route takes only the
  job's own token (an admin is 403);
* from a job the operator really launched (acting as a GitHub App on the GitHub
  stand-in), with the token its pod got: github_token gives a fresh installation token
  of the job's scope, usable at GitHub, and a progress_note appears on the chain's
  issue comment, escaped (its mention and HTML inert).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentchain import models
from agentchain.core.runtime import Runtime
from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.githubloop import REPOSITORY, app_delivery, app_operator, install
from e2e.mcpclient import ok, pod_env, refused, server
from e2e.webharness import ADMIN, Client, agent_manifest, apply, kube, served

__all__ = ["kube"]

# The API runs in-process and the test ends the jobs itself; the session operator
# (which serves every namespace) would run them.
in_process = pytest.mark.usefixtures("operator_paused")


@pytest.fixture
def team(kube: ClusterInfo, namespace: str) -> str:
    apply(kube, namespace, agent_manifest("lead"))
    apply(kube, namespace, agent_manifest("helper", delegation={"allowedFrom": ["*"]}))
    apply(kube, namespace, agent_manifest("guarded", delegation={"allowedFrom": ["outsider"]}))
    return namespace


def api_host(kube: ClusterInfo) -> str:
    """Where the in-process job API listens: where the MCP server, in a pod, reaches it."""
    return kube.pod_host


async def start(client: Client, namespace: str, agent: str, name: str) -> dict[str, Any]:
    body = {"namespace": namespace, "agentRole": agent, "prompt": "go", "name": name}
    response = await client.post("/api/jobs", json=body, headers=ADMIN)
    assert response.status == 201, await response.text()
    job: dict[str, Any] = await response.json()
    return job


async def job_env(client: Client, rt: Runtime, job: dict[str, Any]) -> dict[str, str]:
    """The environment the job's pod would get: the API's URL and the job's own token."""
    ns, name, chain = job["namespace"], job["id"], job["chainId"]
    token = await rt.tokens.issue(ns, name, f"uid-{name}", chain, 600)
    return pod_env(str(client.make_url("")).rstrip("/"), token, ns, name, chain)


async def end_when_created(kube: ClusterInfo, client: Client, agent: str, result: str) -> str:
    """Wait for ``agent``'s job to appear, then end it as its pod would have."""
    while True:
        listed = await client.get(f"/api/jobs?agentRole={agent}", headers=ADMIN)
        items = (await listed.json())["items"]
        if items:
            break
        await asyncio.sleep(0.2)
    name: str = items[0]["id"]
    status = {"status": {"phase": "Succeeded", "exitCode": 0, "result": result}}
    await asyncio.to_thread(
        kube.kubectl,
        *("-n", items[0]["namespace"], "patch", "agentjob", name, "--subresource=status"),
        *("--type=merge", "-p", json.dumps(status)),
    )
    return name


@in_process
async def test_delegate_waits_for_the_delegated_jobs_result(kube: ClusterInfo, team: str) -> None:
    async with served(kube, team, host=api_host(kube)) as (client, rt):
        lead = await start(client, team, "lead", "lead-root")
        async with server(await job_env(client, rt, lead), kube) as tools:
            ending = asyncio.create_task(end_when_created(kube, client, "helper", "42 rows"))
            answer = await ok(
                tools, "delegate", agent="helper", task="count the rows", wait_seconds=60
            )
            child = await ending
            assert answer["id"] == child and answer["agentRole"] == "helper"
            assert answer["terminal"] is True and answer["created"] is True
            assert answer["status"] == "completed" and answer["result"] == "42 rows"
            assert answer["chainId"] == lead["chainId"]
            assert answer["parentJobId"] == lead["id"]

            status = await ok(tools, "job_status", job_id=child)
            assert status["status"] == "completed" and status["result"] == "42 rows"
            text = await refused(tools, "anchor_get", job_id=child)
            assert f"anchor not found: AgentJob {child} has written no anchor." in text

            # The same delegation again is the same job, not a second one.
            again = await ok(tools, "delegate", agent="helper", task="other words")
            assert again["id"] == child and again["created"] is False


@in_process
async def test_delegation_refusals_are_tool_errors(kube: ClusterInfo, team: str) -> None:
    async with served(kube, team, host=api_host(kube)) as (client, rt):
        lead = await start(client, team, "lead", "lead-root")
        other = await start(client, team, "helper", "other-root")
        async with server(await job_env(client, rt, lead), kube) as tools:
            loop = await refused(tools, "delegate", agent="lead", task="me again")
            assert "Agent 'lead' already in delegation chain" in loop
            assert "(HTTP 409, reason AlreadyInChain)" in loop, loop
            guarded = await refused(tools, "delegate", agent="guarded", task="let me in")
            assert "forbidden: " in guarded and "(HTTP 403, reason NotAllowedFrom)" in guarded
            unknown = await refused(tools, "delegate", agent="nobody", task="hello?")
            assert f"unknown agent: No AiAgent with triggerName nobody in namespace {team}" in (
                unknown
            )
            foreign = await refused(tools, "job_status", job_id=other["id"])
            assert "(HTTP 403)" in foreign, foreign
        listed = await client.get("/api/jobs", headers=ADMIN)
        roles = sorted(j["agentRole"] for j in (await listed.json())["items"])
        assert roles == ["helper", "lead"], "a refused delegation created a job"


@in_process
async def test_progress_note_is_the_jobs_own_annotation(kube: ClusterInfo, team: str) -> None:
    async with served(kube, team, host=api_host(kube)) as (client, rt):
        lead = await start(client, team, "lead", "lead-root")
        async with server(await job_env(client, rt, lead), kube) as tools:
            noted = await ok(tools, "progress_note", note="tests pass, now the docs")
            assert noted == {
                "id": "lead-root",
                "namespace": team,
                "note": "tests pass, now the docs",
            }
            long = await refused(tools, "progress_note", note="x" * 301)
            assert "(HTTP 422)" in long, long
        got = await asyncio.to_thread(
            kube.kubectl, "-n", team, "get", "agentjob", "lead-root", "-o", "json"
        )
        annotations = json.loads(got.stdout)["metadata"]["annotations"]
        assert annotations[models.PROGRESS_NOTE] == "tests pass, now the docs"
        path = f"/api/jobs/{team}/lead-root/progress"
        admin = await client.put(path, json={"note": "not mine"}, headers=ADMIN)
        assert admin.status == 403, await admin.text()


async def test_github_token_and_progress_note_from_a_launched_job(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    tmp_path: Path,
) -> None:
    installed = install(github, tmp_path)
    agent = chaining.agent("tok", "--no-context", "--sleep", "30", github="issues.opened")
    agent["spec"]["github"] = {"permissions": {"issues": "write"}}
    with app_operator(operator, cluster_info, namespace, installed) as op:
        chaining.apply(cluster_info, namespace, agent)
        payload = app_delivery("issues", "opened", installed.installation.id)
        status, answer = delivering.send(op, *delivering.signed(op.webhook_secret, payload))
        assert status == 202, answer
        job = launched(cluster_info, namespace)
        meta = job["metadata"]
        token = chaining.job_secret(cluster_info, namespace, job)["token"]
        env = pod_env(op.url, token, namespace, meta["name"], job["status"]["chainId"])
        try:
            async with server(env, cluster_info) as tools:
                fresh = await ok(tools, "github_token")
                await ok(tools, "progress_note", note="tests pass, @octocat <b>look</b>")
        except Exception as exc:  # The operator's log says whether the pod's request came.
            raise AssertionError(
                f"{exc!r}\n--- the operator's log:\n{op.log_text()[-10000:]}"
            ) from exc
        assert fresh["repository"] == REPOSITORY
        assert fresh["permissions"] == {"issues": "write"}
        assert github.token_usable(fresh["token"])
        shown = f"- tok ({meta['name']}): tests pass, @\u200boctocat &lt;b&gt;look&lt;/b&gt;"

        def noted() -> bool:
            return any(shown in c.body for c in installed.comments())

        operating.wait_until(noted, timeout=60, what="the note on the chain's comment")


def launched(info: ClusterInfo, namespace: str) -> dict[str, Any]:
    """The delivery's job, once the operator launched it (its Secret holds the token)."""
    found: list[dict[str, Any]] = []

    def started() -> bool:
        items = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
        found[:] = [i for i in items if (i.get("status") or {}).get("jobName")]
        return bool(found)

    operating.wait_until(started, timeout=120, what="the job to launch")
    return found[0]
