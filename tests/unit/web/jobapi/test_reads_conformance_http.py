"""The job API as its OpenAPI document says, over HTTP on real Redis (before Kubernetes).

Aspects covered:
- a 405 carries ``Allow``, listing the methods the path has (RFC 9110), on the job API
  and the webhook alike: on every path of the OpenAPI document, exactly the methods the
  document gives it (and ``HEAD`` beside a ``GET``);
- a JSON body is typed: the store refuses ``"persistent": "yes"`` and
  ``"ttlSeconds": "60"`` (422, nothing written), and takes ``"ttlSeconds": 60.0``;
  a usage report's ``tokens`` is JSON Schema's integer: ``1.0`` counts as 1, while
  ``1.5``, ``"1"`` and ``true`` are refused;
- the document marks the request bodies the handlers need as ``required`` (a stop,
  approval or rejection's is optional), and describes the webhook's headers with the
  patterns the webhook checks them against;
- its bounds are JSON Schema's words (``minimum``, not pydantic's ``ge``), and a
  delegation needs a non-empty prompt or task, as the handler does;
- with an admin token, a body that is a valid delegation (the document's other choice
  for ``POST /api/jobs``) is 403, not 422: only a job token delegates.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from agentchain.core.runtime import Runtime
from agentchain.web import openapi
from agentchain.web.hooks import webhook
from agentchain.web.requests import validate
from agentchain.web.responses import ApiError
from agentchain.web.schemas import UsageReport
from tests.unit.web.conftest import Client
from tests.unit.web.jobapi.test_reads_http import ADMIN, error, job_token


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("TRACE", "/api/store/team-a/k", {"DELETE", "GET", "HEAD", "PUT"}),
        ("PATCH", "/api/jobs", {"GET", "HEAD", "POST"}),
        ("DELETE", "/api/jobs/team-a/job-1/usage", {"POST"}),
        ("GET", "/webhooks/github", {"POST"}),
    ],
)
async def test_a_405_lists_the_allowed_methods(
    client: Client, method: str, path: str, allowed: set[str]
) -> None:
    response = await client.request(method, path, headers=ADMIN)
    await error(response, 405)
    assert set(response.headers["Allow"].split(", ")) == allowed


# A value for each of the document's path parameters.
_PARAMETERS = {"name": "job-1", "namespace": "team-a", "chainId": "c0ffee", "key": "k"}


@pytest.mark.parametrize(("path", "operations"), sorted(openapi.document()["paths"].items()))
async def test_every_documented_path_answers_405_with_its_methods(
    client: Client, path: str, operations: dict[str, Any]
) -> None:
    allowed = {method.upper() for method in operations}
    allowed |= {"HEAD"} if "GET" in allowed else set()
    url = re.sub(r"\{(\w+)\}", lambda m: _PARAMETERS[m.group(1)], path)
    response = await client.request("PATCH", url, headers=ADMIN)
    await error(response, 405)
    assert set(response.headers["Allow"].split(", ")) == allowed


@pytest.mark.parametrize(
    "body",
    [
        {"value": "v", "persistent": "yes"},
        {"value": "v", "persistent": 1},
        {"value": "v", "ttlSeconds": "60"},
        {"value": "v", "ttlSeconds": 60.5},
        {"value": "v", "ttlSeconds": True},
        {"value": 3},
    ],
)
async def test_a_store_write_of_the_wrong_type_is_422_and_writes_nothing(
    client: Client, runtime: Runtime, body: dict[str, Any]
) -> None:
    sent = await job_token(runtime)
    await error(await client.put("/api/store/notes/k", json=body, headers=sent), 422)
    assert await runtime.redis.keys("agentchain:ctx:entry:*") == []


async def test_an_integral_ttl_written_as_a_float_is_an_integer(
    client: Client, runtime: Runtime
) -> None:
    sent = await job_token(runtime)
    body = {"value": "v", "ttlSeconds": 60.0}
    response = await client.put("/api/store/notes/k", json=body, headers=sent)
    assert response.status == 200, await response.text()
    read = await (await client.get("/api/store/notes/k", headers=sent)).json()
    assert read["value"] == "v"


def test_usage_tokens_are_json_schema_integers() -> None:
    assert validate(UsageReport, {"tokens": 1.0, "cost": 2}).tokens == 1
    for wrong in (1.5, "1", True, float("inf")):
        with pytest.raises(ApiError) as raised:
            validate(UsageReport, {"tokens": wrong})
        assert raised.value.status == 422, wrong


async def test_the_document_marks_required_bodies_and_the_webhooks_headers(
    client: Client,
) -> None:
    doc = await (await client.get("/api/openapi.json")).json()
    optional = {"stop", "approve", "reject"}
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            if "requestBody" in op:
                wanted = path.rsplit("/", 1)[-1] not in optional
                assert op["requestBody"].get("required", False) is wanted, (method, path)
    headers = {p["name"]: p for p in doc["paths"]["/webhooks/github"]["post"]["parameters"]}
    assert {n for n, p in headers.items() if p["required"]} == {
        "X-GitHub-Event",
        "X-GitHub-Delivery",
        "X-Hub-Signature-256",
    }
    assert all(p["in"] == "header" for p in headers.values())
    assert headers["X-GitHub-Event"]["schema"]["pattern"] == webhook._EVENT_NAME.pattern
    assert headers["X-GitHub-Delivery"]["schema"]["pattern"] == webhook._HEADER_VALUE.pattern
    assert headers["X-GitHub-Hook-ID"]["schema"]["pattern"] == webhook._HEADER_VALUE.pattern


def _keywords(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        found = set(schema)
        for key, value in schema.items():
            if key != "properties":
                found |= _keywords(value)
            else:
                found |= {k for v in value.values() for k in _keywords(v)}
        return found
    if isinstance(schema, list):
        return {k for item in schema for k in _keywords(item)}
    return set()


async def test_the_documents_bounds_are_json_schema_words(client: Client) -> None:
    """Bounds written as pydantic's own ``ge``/``le`` would bind no client or validator."""
    doc = await (await client.get("/api/openapi.json")).json()
    assert not {"ge", "le", "gt", "lt"} & _keywords(doc)
    ttl = doc["components"]["schemas"]["StoreWrite"]["properties"]["ttlSeconds"]
    assert {"type": "integer", "minimum": 1, "maximum": 315360000} in ttl["anyOf"]
    delegation = doc["components"]["schemas"]["DelegationRequest"]
    assert [a["required"] for a in delegation["anyOf"]] == [["prompt"], ["task"]]


async def test_an_admin_sending_a_delegation_is_403_and_a_malformed_body_422(
    client: Client,
) -> None:
    delegation = {"agentRole": "ai-triage", "task": "help"}
    body = await error(await client.post("/api/jobs", json=delegation, headers=ADMIN), 403)
    assert "job token" in body["detail"]
    await error(await client.post("/api/jobs", json={"agentRole": "ai-triage"}, headers=ADMIN), 422)
