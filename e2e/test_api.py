"""The job API against the real API server and Redis (the engine is not running).

Aspects covered:
* admin ``POST /api/jobs`` creates a root AgentJob (201; the same name again → 200) and
  seed 003's example queries answer with its fields (``?chainId=``, ``?agentRole=``,
  ``/api/jobs/{id}``), ``?status=`` by seed value, newest-first keyset pagination;
* a job token reads its own chain, is 403 on another chain's jobs and 401 once revoked;
* delegation with a job token: a delegated AgentJob (origin delegation, parent, depth,
  snapshot); 409 with seed 000's exact messages for a loop and for depth; ``?wait=``
  returns when the job turns terminal; the chain tree shows parent and child;
* output: 404 with a reason until captured, then the full text; the dashboard (on the
  internal listener only, behind its login) serves it as plain text under a sandbox CSP
  and sends its security headers;
* the dashboard's chain of a completed chain (its final step records no agent)
  answers 200, not 500.

Fuzzing every route (thousands of requests, never a 5xx) is ``test_api_fuzz.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from e2e.controlplane.cluster import ClusterInfo
from e2e.webharness import (
    ADMIN,
    SEED_AGENTS,
    Client,
    agent_manifest,
    apply,
    job_uid,
    kube,
    served,
    served_internal,
    ui_login,
)

__all__ = ["kube"]


@pytest.fixture
def seeded(kube: ClusterInfo, namespace: str) -> str:
    apply(kube, namespace, SEED_AGENTS)
    apply(kube, namespace, agent_manifest("ai-a"))
    # Unlinked agents: each accepts delegations from any agent (test_authz.py covers who may).
    for name in ("ai-b", "ai-c", "ai-d", "ai-e"):
        apply(kube, namespace, agent_manifest(name, delegation={"allowedFrom": ["*"]}))
    return namespace


async def start(client: Client, namespace: str, agent: str, **extra: Any) -> dict[str, Any]:
    body = {"namespace": namespace, "agentRole": agent, "prompt": "do it", **extra}
    response = await client.post("/api/jobs", json=body, headers=ADMIN)
    assert response.status in (200, 201), await response.text()
    job: dict[str, Any] = await response.json()
    return job


async def token_for(rt: Any, job: dict[str, Any]) -> dict[str, str]:
    token = await rt.tokens.issue(
        job["namespace"], job["id"], f"test-{job['id']}", job["chainId"], 600
    )
    return {"Authorization": f"Bearer {token}"}


async def get(client: Client, path: str, headers: dict[str, str]) -> Any:
    response = await client.get(path, headers=headers)
    assert response.status == 200, f"{path}: {response.status} {await response.text()}"
    return await response.json()


@pytest.mark.usefixtures("operator_paused")  # A running engine would spawn job-1's child.
async def test_admin_post_and_seed_003_queries(kube: ClusterInfo, seeded: str) -> None:
    async with served(kube, seeded) as (client, _):
        job = await start(client, seeded, "ai-developer", type="implement-issue", name="job-1")
        assert job["created"] is True and job["status"] == "pending"
        assert job["chainDepth"] == 0 and job["chainPath"] == ["ai-developer"]
        again = await client.post(
            "/api/jobs",
            json={"namespace": seeded, "agentRole": "ai-developer", "name": "job-1"},
            headers=ADMIN,
        )
        assert again.status == 200
        chain = await get(client, f"/api/jobs?chainId={job['chainId']}", ADMIN)
        assert [j["id"] for j in chain["items"]] == ["job-1"]
        by_role = await get(client, "/api/jobs?agentRole=ai-developer", ADMIN)
        assert [j["id"] for j in by_role["items"]] == ["job-1"]
        one = await get(client, "/api/jobs/job-1", ADMIN)
        assert one["type"] == "implement-issue" and one["parentJobId"] is None
        assert set(one) >= {"id", "agentRole", "chainId", "chainDepth", "chainPath", "status"}
        # An operator from an earlier test may be running job-1 meanwhile.  Asked in
        # the order a job moves through, one of the answers must hold it.
        found = []
        for wanted in ("pending", "running", "completed"):
            listed = await get(client, f"/api/jobs?status={wanted}", ADMIN)
            assert {j["status"] for j in listed["items"]} <= {wanted}, listed
            found += [wanted for j in listed["items"] if j["id"] == "job-1"]
        assert found, "job-1 is in none of pending, running, completed"
        failed = await get(client, "/api/jobs?status=failed", ADMIN)
        assert failed["items"] == []
        unknown = await client.post(
            "/api/jobs", json={"namespace": seeded, "agentRole": "ai-nobody"}, headers=ADMIN
        )
        assert unknown.status == 422


async def test_pagination_is_newest_first_without_repeats(kube: ClusterInfo, seeded: str) -> None:
    async with served(kube, seeded) as (client, _):
        for n in range(5):
            await start(client, seeded, "ai-a", name=f"page-{n}")
            await asyncio.sleep(1.1)  # creationTimestamp has one-second resolution.
        seen: list[str] = []
        cursor: str | None = None
        while True:
            query = "/api/jobs?limit=2" + (f"&continue={cursor}" if cursor else "")
            page = await get(client, query, ADMIN)
            seen += [j["id"] for j in page["items"]]
            cursor = page["next"]
            if cursor is None:
                break
    assert seen == [f"page-{n}" for n in reversed(range(5))]


async def test_job_token_scope_and_revocation(kube: ClusterInfo, seeded: str) -> None:
    async with served(kube, seeded) as (client, rt):
        mine = await start(client, seeded, "ai-a", name="mine")
        other = await start(client, seeded, "ai-b", name="other")
        token = await token_for(rt, mine)
        listed = await get(client, "/api/jobs", token)
        assert [j["id"] for j in listed["items"]] == ["mine"]
        assert (await client.get(f"/api/jobs/{seeded}/other", headers=token)).status == 403
        cross = await client.get(f"/api/jobs?chainId={other['chainId']}", headers=token)
        assert cross.status == 403
        assert (
            await client.get(f"/api/chains/{seeded}/{other['chainId']}", headers=token)
        ).status == 403
        await rt.tokens.revoke(seeded, "mine", "test-mine")
        assert (await client.get(f"/api/jobs/{seeded}/mine", headers=token)).status == 401
        posted = await client.post(
            "/api/jobs", json={"agentRole": "ai-b", "task": "x"}, headers=token
        )
        assert posted.status == 401


async def delegate(client: Client, token: dict[str, str], target: str) -> Any:
    return await client.post("/api/jobs", json={"agentRole": target, "task": "help"}, headers=token)


async def test_delegation_snapshot_loop_and_depth(kube: ClusterInfo, seeded: str) -> None:
    async with served(kube, seeded) as (client, rt):
        job = await start(client, seeded, "ai-a", name="root")
        hops = []
        for target in ("ai-b", "ai-c", "ai-d"):
            response = await delegate(client, await token_for(rt, job), target)
            assert response.status == 201, await response.text()
            child = await response.json()
            assert child["origin"] == "delegation" and child["parentJobId"] == job["id"]
            assert child["chainId"] == job["chainId"]
            assert child["chainDepth"] == job["chainDepth"] + 1
            hops.append({"source": job["agentRole"], "target": target})
            assert child["delegation"] == hops
            job = child
        token = await token_for(rt, job)
        loop = await delegate(client, token, "ai-b")
        assert loop.status == 409
        assert (await loop.json())["error"] == "Agent 'ai-b' already in delegation chain"
        deep = await delegate(client, token, "ai-e")
        assert deep.status == 409
        assert (await deep.json())["error"] == "Maximum delegation depth reached"
        tree = await get(client, f"/api/chains/{seeded}/{job['chainId']}", ADMIN)
        assert tree["roots"][0]["id"] == "root"
        assert tree["roots"][0]["children"][0]["agentRole"] == "ai-b"


@pytest.mark.usefixtures("operator_paused")
async def test_delegation_wait_returns_when_the_job_ends(kube: ClusterInfo, seeded: str) -> None:
    async with served(kube, seeded) as (client, rt):
        caller = await start(client, seeded, "ai-a", name="caller")
        token = await token_for(rt, caller)
        post = asyncio.create_task(
            client.post("/api/jobs?wait=60", json={"agentRole": "ai-b", "task": "t"}, headers=token)
        )
        name = None
        while name is None:
            await asyncio.sleep(0.2)
            items = (await get(client, "/api/jobs?agentRole=ai-b", ADMIN))["items"]
            name = items[0]["id"] if items else None
        status = json.dumps({"status": {"phase": "Succeeded", "exitCode": 0, "result": "ok"}})
        await asyncio.to_thread(
            kube.kubectl,
            "-n",
            seeded,
            "patch",
            "agentjob",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        )
        response = await post
        answer = await response.json()
        assert response.status == 201
        assert answer["terminal"] is True and answer["status"] == "completed"
        assert answer["result"] == "ok"


async def test_output_and_dashboard(kube: ClusterInfo, seeded: str) -> None:
    async with served(kube, seeded) as (client, rt):
        job = await start(client, seeded, "ai-a", name="out", prompt="<b>x</b>")
        path = f"/api/jobs/{seeded}/out/output"
        missing = await client.get(path, headers=ADMIN)
        assert missing.status == 404 and (await missing.json())["reason"] == "NotCaptured"
        uid = await job_uid(seeded, "out")
        await rt.outputs.put(seeded, "out", uid, b"line one\n<script>alert(1)</script>\n")
        captured = await get(client, path, ADMIN)
        assert captured["output"].startswith("line one") and captured["truncated"] is False
        async with served_internal(rt) as dashboard:
            assert (await dashboard.get(f"/ui/api/jobs/{seeded}/out")).status == 401
            await ui_login(dashboard)
            detail = await (await dashboard.get(f"/ui/api/jobs/{seeded}/out")).json()
            assert detail["job"]["chainId"] == job["chainId"] and detail["output"]["available"]
            page = await dashboard.get(f"/ui/api/jobs/{seeded}/out/output")
            assert page.status == 200 and page.content_type == "text/plain"
            assert "<script>alert(1)</script>" in await page.text()  # Text, never HTML.
            assert "sandbox" in page.headers["Content-Security-Policy"]
            assert page.headers["X-Content-Type-Options"] == "nosniff"
            chain = await dashboard.get(f"/ui/api/chains/{seeded}/{job['chainId']}")
            assert chain.status == 200
            assert (await dashboard.get(f"/ui/api/jobs?namespace={seeded}")).status == 200
        assert (await client.get(f"/ui/jobs/{seeded}/out")).status == 404  # Not GitHub's side.


async def test_a_completed_chains_page_renders(kube: ClusterInfo, seeded: str) -> None:
    """Issue 15: every completed chain's page answered 500 (``next.agent`` of the last step)."""
    async with served(kube, seeded) as (client, rt):
        job = await start(client, seeded, "ai-a", name="done")
        final = {"action": "none", "message": "the chain ends here"}
        status = {"phase": "Succeeded", "exitCode": 0, "next": [final], "chainComplete": True}
        await asyncio.to_thread(
            kube.kubectl,
            "-n",
            seeded,
            "patch",
            "agentjob",
            "done",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )
        await rt.chains.mark_complete(seeded, job["chainId"], "succeeded", "done")
        async with served_internal(rt) as dashboard:
            await ui_login(dashboard)
            page = await dashboard.get(f"/ui/api/chains/{seeded}/{job['chainId']}")
            layout = await page.json()
        assert page.status == 200, layout
        assert layout["complete"] is True and layout["outcome"] == "succeeded"
        assert layout["nodes"]["done"]["endings"][0]["action"] == "none"
