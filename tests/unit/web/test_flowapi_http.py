"""Who may stop jobs and chains through the job API (web/flowapi.py), before Kubernetes.

Aspects covered:
- no token, or an invalid one: 401 on both stop routes;
- a job token may stop nothing, not even its own job or chain: 403 before any read;
- a body that is not the documented StopRequest (unknown field, reason too long, not
  JSON) is a 422 before anything is asked to stop;
- both routes are in the OpenAPI document with their 202 and 409 answers;
- usage reports: only the job's own token (403 for another job's or an admin's), and a
  malformed report is a 422 that counts nothing;
- progress notes: only the job's own token (403 for another job's or an admin's); an
  empty, overlong or malformed note is a 422 (all answered before Kubernetes).
"""

from __future__ import annotations

import pytest

from agentchain.engine.runtime import Runtime
from tests.unit.web.conftest import Client
from tests.unit.web.test_api_http import ADMIN, error, job_token

JOB = "/api/jobs/team-a/job-1/stop"
CHAIN = "/api/chains/team-a/chain-of-job-1/stop"


@pytest.mark.parametrize("path", [JOB, CHAIN])
@pytest.mark.parametrize("header", [None, "Bearer nope"])
async def test_a_stop_without_a_valid_token_is_401(
    client: Client, path: str, header: str | None
) -> None:
    headers = {"Authorization": header} if header else {}
    await error(await client.post(path, json={}, headers=headers), 401)


@pytest.mark.parametrize("path", [JOB, CHAIN])
async def test_a_job_token_stops_nothing_not_even_its_own_job(
    client: Client, runtime: Runtime, path: str
) -> None:
    body = await error(await client.post(path, json={}, headers=await job_token(runtime)), 403)
    assert "admin" in body["detail"]


@pytest.mark.parametrize("path", [JOB, CHAIN])
@pytest.mark.parametrize(
    "body",
    [b'{"why": "x"}', b'{"reason": "' + b"x" * 201 + b'"}', b"{", b'{"reason": 3}', b"null"],
)
async def test_a_bad_stop_body_is_422_before_anything_is_read(
    client: Client, path: str, body: bytes
) -> None:
    headers = {**ADMIN, "Content-Type": "application/json"}
    await error(await client.post(path, data=body, headers=headers), 422)


async def test_the_stop_routes_are_documented(client: Client) -> None:
    doc = await (await client.get("/api/openapi.json")).json()
    for path in ("/api/jobs/{namespace}/{name}/stop", "/api/chains/{namespace}/{chainId}/stop"):
        answers = doc["paths"][path]["post"]["responses"]
        assert {"202", "401", "403", "404", "409", "422"} <= set(answers), path
    assert doc["components"]["schemas"]["StopRequest"]["properties"]["reason"]["maxLength"] == 200


USAGE = "/api/jobs/team-a/job-1/usage"


async def test_only_the_job_itself_reports_its_usage(client: Client, runtime: Runtime) -> None:
    other = await job_token(runtime, "team-a", "job-2")
    await error(await client.post(USAGE, json={"tokens": 1}, headers=other), 403)
    await error(await client.post(USAGE, json={"tokens": 1}, headers=ADMIN), 403)
    await error(await client.post(USAGE, json={"tokens": 1}), 401)


@pytest.mark.parametrize(
    "body",
    [
        {"tokens": -1},
        {"cost": -0.5},
        {"cost": "1"},
        {"spent": 3},
        {"tokens": 10**13},
        {"turns": -1},
        {"turns": 1.5},
    ],
)
async def test_a_bad_usage_report_is_422_and_counts_nothing(
    client: Client, runtime: Runtime, body: dict[str, object]
) -> None:
    await error(await client.post(USAGE, json=body, headers=await job_token(runtime)), 422)
    assert await runtime.redis.keys("agentchain:flow:usage:*") == []


NOTE = "/api/jobs/team-a/job-1/progress"


async def test_only_the_job_itself_leaves_its_progress_note(
    client: Client, runtime: Runtime
) -> None:
    other = await job_token(runtime, "team-a", "job-2")
    await error(await client.put(NOTE, json={"note": "hi"}, headers=other), 403)
    await error(await client.put(NOTE, json={"note": "hi"}, headers=ADMIN), 403)
    await error(await client.put(NOTE, json={"note": "hi"}), 401)


@pytest.mark.parametrize(
    "body", [{"note": ""}, {"note": "x" * 301}, {"note": 3}, {"text": "hi"}, {"note": "a", "b": 1}]
)
async def test_a_bad_progress_note_is_422(
    client: Client, runtime: Runtime, body: dict[str, object]
) -> None:
    await error(await client.put(NOTE, json=body, headers=await job_token(runtime)), 422)
