"""The job API's auth, store and anchor endpoints over HTTP, on real Redis (no Kubernetes).

Aspects covered:
* 401 without a token, with an unknown token, with a revoked job token; the OpenAPI
  document is public and is OpenAPI 3.1;
* a job token is refused (403) outside its namespace and chain before anything is read;
* store: the writer is the token's job, tenants never see each other, admins name the
  tenant (422 without), 413 with size and limit, 422 for bad keys, delete then 404,
  recent and literal-prefix listings;
* anchors: only the job's own token may write (403 for other jobs and admins), 413 with
  size and limit, 422 for unknown fields; a chain's team anchor is chain-scoped;
* ``POST /api/jobs``: invalid bodies 422 and a job token naming a namespace 403,
  before any Kubernetes call.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentchain.core.runtime import Runtime
from agentchain.memory.anchors import JOB_ANCHOR_MAX_BYTES
from agentchain.memory.contexts import MAX_VALUE_BYTES
from tests.unit.web.conftest import ADMIN_TOKEN, Client

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def job_token(rt: Runtime, tenant: str = "team-a", job: str = "job-1") -> dict[str, str]:
    token = await rt.tokens.issue(tenant, job, f"uid-{job}", f"chain-of-{job}", 600)
    return {"Authorization": f"Bearer {token}"}


async def error(response: Any, status: int) -> dict[str, Any]:
    assert response.status == status, await response.text()
    body: dict[str, Any] = await response.json()
    assert set(body) >= {"error", "detail"}
    return body


# --------------------------------------------------------------------------- authentication


@pytest.mark.parametrize(
    "header", [None, "Bearer", "Bearer nope", "Basic abc", f"Token {ADMIN_TOKEN}"]
)
async def test_no_valid_token_is_401(client: Client, header: str | None) -> None:
    sent = {} if header is None else {"Authorization": header}
    await error(await client.get("/api/jobs", headers=sent), 401)


async def test_a_revoked_job_token_is_401(client: Client, runtime: Runtime) -> None:
    sent = await job_token(runtime)
    assert (await client.get("/api/store/notes", headers=sent)).status == 200
    await runtime.tokens.revoke("team-a", "job-1", "uid-job-1")
    await error(await client.get("/api/store/notes", headers=sent), 401)


async def test_openapi_document_is_public(client: Client) -> None:
    response = await client.get("/api/openapi.json")
    assert response.status == 200
    doc = await response.json()
    assert doc["openapi"].startswith("3.1")
    assert "/api/jobs" in doc["paths"] and "/webhooks/github" in doc["paths"]


# --------------------------------------------------------------------------- job token scope


@pytest.mark.parametrize(
    "path",
    [
        "/api/jobs?namespace=team-b",
        "/api/jobs?chainId=someone-elses",
        "/api/jobs/team-b/job-9",
        "/api/jobs/team-b/job-9/output",
        "/api/chains/team-b/chain-of-job-1",
        "/api/chains/team-a/another-chain",
        "/api/chains/team-a/another-chain/anchor",
        "/api/store/notes?tenant=team-b",
    ],
)
async def test_job_token_is_403_outside_its_scope(
    client: Client, runtime: Runtime, path: str
) -> None:
    await error(await client.get(path, headers=await job_token(runtime)), 403)


# --------------------------------------------------------------------------- store


async def test_store_records_the_token_job_as_writer(client: Client, runtime: Runtime) -> None:
    sent = await job_token(runtime)
    put = await client.put("/api/store/notes/auth", json={"value": "uses JWT"}, headers=sent)
    assert put.status == 200
    got = await (await client.get("/api/store/notes/auth", headers=sent)).json()
    assert got["value"] == "uses JWT" and got["writer"] == "job-1"
    assert got["expiresAt"] is not None  # write-and-extend with the 90-day default


async def test_tenants_never_see_each_other(client: Client, runtime: Runtime) -> None:
    mine, theirs = await job_token(runtime), await job_token(runtime, "team-b", "job-2")
    await client.put("/api/store/notes/k", json={"value": "a's"}, headers=mine)
    await error(await client.get("/api/store/notes/k", headers=theirs), 404)
    listed = await (await client.get("/api/store/notes", headers=theirs)).json()
    assert listed["items"] == []
    admin = await client.get("/api/store/notes/k?tenant=team-a", headers=ADMIN)
    assert (await admin.json())["value"] == "a's"
    await error(await client.get("/api/store/notes/k", headers=ADMIN), 422)


async def test_store_size_and_key_errors(client: Client, runtime: Runtime) -> None:
    sent = await job_token(runtime)
    big = {"value": "x" * (MAX_VALUE_BYTES + 1)}
    body = await error(await client.put("/api/store/notes/big", json=big, headers=sent), 413)
    assert body["size"] == MAX_VALUE_BYTES + 1 and body["limit"] == MAX_VALUE_BYTES
    long_key = "k" * 600
    await error(
        await client.put(f"/api/store/notes/{long_key}", json={"value": "v"}, headers=sent), 422
    )
    await error(await client.put("/api/store/notes/k", json={"valu": "v"}, headers=sent), 422)
    await error(await client.put("/api/store/notes/k", data=b"{", headers=sent), 422)


async def test_store_delete_list_and_literal_prefix(client: Client, runtime: Runtime) -> None:
    sent = await job_token(runtime)
    for key in ("module:auth", "module:pay", "mod*le:x", "other"):
        await client.put(
            f"/api/store/mem/{key}", json={"value": key, "ttlSeconds": 60}, headers=sent
        )
    prefixed = await (await client.get("/api/store/mem?prefix=module:", headers=sent)).json()
    assert [e["key"] for e in prefixed["items"]] == ["module:auth", "module:pay"]
    recent = await (await client.get("/api/store/mem?recent=2", headers=sent)).json()
    assert [e["key"] for e in recent["items"]] == ["other", "mod*le:x"]
    assert (await client.delete("/api/store/mem/other", headers=sent)).status == 204
    await error(await client.delete("/api/store/mem/other", headers=sent), 404)


# --------------------------------------------------------------------------- anchors


async def test_only_the_job_itself_writes_its_anchor(client: Client, runtime: Runtime) -> None:
    path = "/api/jobs/team-a/job-1/anchor"
    anchor = {"task": "fix login", "status": "running", "decisions": ["use JWT"]}
    own = await client.put(path, json=anchor, headers=await job_token(runtime))
    assert own.status == 200 and (await own.json())["size"] > 0
    other = await job_token(runtime, "team-a", "job-2")
    await error(await client.put(path, json=anchor, headers=other), 403)
    await error(await client.put(path, json=anchor, headers=ADMIN), 403)
    got = await client.get(path, headers=await job_token(runtime))
    assert (await got.json())["anchor"] == anchor


async def test_anchor_size_and_shape_errors(client: Client, runtime: Runtime) -> None:
    path, sent = "/api/jobs/team-a/job-1/anchor", await job_token(runtime)
    big = {"task": "x" * JOB_ANCHOR_MAX_BYTES}
    body = await error(await client.put(path, json=big, headers=sent), 413)
    assert body["limit"] == JOB_ANCHOR_MAX_BYTES and body["size"] > JOB_ANCHOR_MAX_BYTES
    await error(await client.put(path, json={"secret": 1}, headers=sent), 422)
    await error(await client.put(path, json=[1], headers=sent), 422)


async def test_team_anchor_is_chain_scoped(client: Client, runtime: Runtime) -> None:
    await runtime.anchors.update_team_anchor("team-a", "chain-of-job-1", lambda a: {"jobs": []})
    sent = await job_token(runtime)
    ok = await client.get("/api/chains/team-a/chain-of-job-1/anchor", headers=sent)
    assert (await ok.json())["anchor"] == {"jobs": []}
    await error(await client.get("/api/chains/team-a/nope/anchor", headers=ADMIN), 404)


# --------------------------------------------------------------------------- POST /api/jobs


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"namespace": "team-a"},
        {"namespace": "Team A", "agentRole": "ai-triage"},
        {"namespace": "team-a", "agentRole": "ai-triage", "surprise": 1},
        {"namespace": "team-a", "agentRole": "ai-triage", "prompt": "x" * 70_000},
        [],
    ],
)
async def test_admin_post_invalid_bodies_are_422(client: Client, body: object) -> None:
    await error(await client.post("/api/jobs", json=body, headers=ADMIN), 422)


async def test_post_wait_over_the_limit_is_422(client: Client) -> None:
    body = {"namespace": "team-a", "agentRole": "ai-triage"}
    await error(await client.post("/api/jobs?wait=301", json=body, headers=ADMIN), 422)


async def test_job_token_cannot_post_into_a_namespace(client: Client, runtime: Runtime) -> None:
    body = {"namespace": "team-b", "agentRole": "ai-triage", "prompt": "x"}
    await error(await client.post("/api/jobs", json=body, headers=await job_token(runtime)), 403)


async def test_delegation_needs_a_task(client: Client, runtime: Runtime) -> None:
    body = {"agentRole": "ai-reviewer"}
    await error(await client.post("/api/jobs", json=body, headers=await job_token(runtime)), 422)
