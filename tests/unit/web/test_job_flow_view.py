"""Flow control as the job API shows it (issue 16, "Visible everywhere").

Aspects covered:
* ``serializers.job_view``: seed 003's fields unchanged and in order, then what the
  AgentJob status records for flow control (``stoppedBy``, ``supersededBy``,
  ``approvedBy``, ``approvedAt``, ``attempt``, ``retryAt``, ``usage``), null when the
  status lacks them: a stopped, a superseded, an approved job, one with usage (in the
  chain budget's currency, USD without one) and one waiting for a retry;
* the OpenAPI ``Job`` schema names every field of the view, and each view above is
  valid against it (the API fuzz test checks answers against that document);
* over HTTP (in-process API server, real Redis): ``GET /api/jobs/{ns}/{name}`` and the
  listing show a job's usage in its first agent's budget currency;
  ``GET /api/chains/{ns}/{id}`` sums the usage its jobs reported (``usage``, as the
  dashboard's chain totals do), and reads no AiAgent when none reported any;
* a usage report (``POST .../usage``) moves ``agentchain_usage_tokens_total`` and
  ``agentchain_usage_cost_total`` and is then shown on the job.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from prometheus_client import REGISTRY

from agentchain import models
from agentchain.core.runtime import Runtime
from agentchain.settings import Settings
from agentchain.web import openapi, serializers
from tests.unit.fakeapi import OPERATOR_KEY, FakeApi, Obj, sealed
from tests.unit.hop.test_hop_write_order import agent, api, kubeconfig
from tests.unit.web.conftest import ADMIN_TOKEN, WEBHOOK_SECRET, Client

__all__ = ["api", "kubeconfig"]  # Fixtures.

NS = "team-a"
CHAIN = "c0ffee"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SEED_FIELDS = [
    *("id", "namespace", "type", "agentRole", "origin", "chainId", "chainDepth"),
    *("parentJobId", "chainPath", "delegation", "status", "phase", "reason", "message"),
    *("result", "resultTruncated", "resultSize", "exitCode", "createdAt", "startedAt"),
    *("completedAt", "next", "chainComplete"),
]
FLOW_FIELDS = [
    *("stoppedBy", "supersededBy", "approvedBy", "approvedAt", "attempt", "retryAt", "usage")
]
NOTHING: dict[str, Any] = dict.fromkeys(FLOW_FIELDS)


def job(name: str, path: list[str], **status: Any) -> Obj:
    annotations = {
        models.CHAIN_ID: CHAIN,
        models.CHAIN_DEPTH: str(len(path) - 1),
        models.CHAIN_PATH: json.dumps(path),
    }
    return sealed(
        {
            "apiVersion": "labrats.work/v1alpha1",
            "kind": "AgentJob",
            "metadata": {
                "name": name,
                "namespace": NS,
                "creationTimestamp": f"2026-01-01T00:00:0{len(path)}Z",
                "labels": {models.CHAIN_ID: CHAIN},
                "annotations": annotations,
            },
            "spec": {"agentRole": path[-1], "prompt": "go"},
            "status": {"chainId": CHAIN, "chainDepth": len(path) - 1, "chainPath": path, **status},
        }
    )


def flow(view: Obj) -> Obj:
    return {k: view[k] for k in FLOW_FIELDS}


STOPPED = job(
    "stopped",
    ["writer"],
    phase="Cancelled",
    reason="Stopped",
    message="Stopped by api: wrong issue",
    stoppedBy="api",
    attempt=1,
)
SUPERSEDED = job(
    "superseded",
    ["writer"],
    phase="Cancelled",
    reason="Superseded",
    message="Superseded by writer-new (a newer chain of its concurrency group).",
    stoppedBy="concurrency",
    supersededBy="writer-new",
)
APPROVED = job(
    "approved",
    ["writer"],
    phase="Running",
    approvedBy="github:octocat",
    approvedAt="2026-01-01T00:05:00+00:00",
    attempt=1,
)
USED = job("used", ["writer", "reviewer"], phase="Running", usage={"tokens": 1200, "cost": 0.03})
RETRYING = job(
    "retrying",
    ["writer"],
    phase="Pending",
    reason="Retrying",
    message="Attempt 1 failed; it starts in 30s",
    attempt=2,
    retryAt="2026-01-01T00:10:30+00:00",
)


def test_the_seed_fields_come_first_and_unchanged_then_flow_control() -> None:
    view = serializers.job_view(STOPPED)
    assert list(view) == SEED_FIELDS + FLOW_FIELDS
    assert (view["status"], view["phase"], view["reason"]) == ("cancelled", "Cancelled", "Stopped")
    assert view["message"] == "Stopped by api: wrong issue"
    assert flow(serializers.job_view(job("new", ["writer"]))) == NOTHING
    assert flow(serializers.job_view({"metadata": {"name": "bare"}, "spec": {}})) == NOTHING


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (STOPPED, {"stoppedBy": "api", "attempt": 1}),
        (SUPERSEDED, {"stoppedBy": "concurrency", "supersededBy": "writer-new"}),
        (
            APPROVED,
            {
                "approvedBy": "github:octocat",
                "approvedAt": "2026-01-01T00:05:00+00:00",
                "attempt": 1,
            },
        ),
        (USED, {"usage": {"tokens": 1200, "cost": 0.03, "currency": "USD"}}),
        (RETRYING, {"attempt": 2, "retryAt": "2026-01-01T00:10:30+00:00"}),
    ],
    ids=["stopped", "superseded", "approved", "usage", "retrying"],
)
def test_a_jobs_flow_control_state_is_in_its_view(obj: Obj, expected: Obj) -> None:
    assert flow(serializers.job_view(obj)) == {**NOTHING, **expected}


def test_usage_is_shown_in_the_currency_passed_and_never_invented() -> None:
    assert serializers.job_view(USED, "EUR")["usage"] == {
        "tokens": 1200,
        "cost": 0.03,
        "currency": "EUR",
    }
    assert serializers.job_view(STOPPED, "EUR")["usage"] is None
    turned = job("turned", ["writer"], phase="Running", usage={"tokens": 5, "cost": 0, "turns": 3})
    assert serializers.job_view(turned)["usage"] == {
        "tokens": 5,
        "cost": 0,
        "currency": "USD",
        "turns": 3,
    }
    split = {"tokens": 5, "cost": 0, "inputTokens": 4, "outputTokens": 1}
    splitting = job("split", ["writer"], phase="Running", usage=split)
    assert serializers.job_view(splitting)["usage"] == {**split, "currency": "USD"}
    jsonschema.validate(
        serializers.job_view(splitting), openapi.document()["components"]["schemas"]["Job"]
    )


def test_the_openapi_job_schema_names_every_field_and_fits_every_view() -> None:
    document = openapi.document()
    schema = document["components"]["schemas"]["Job"]
    assert list(schema["properties"]) == SEED_FIELDS + FLOW_FIELDS
    for obj in (STOPPED, SUPERSEDED, APPROVED, USED, RETRYING, job("new", ["writer"])):
        jsonschema.validate(serializers.job_view(obj, "EUR"), schema)


def test_a_chain_tree_sums_its_jobs_usage_in_the_currency_given() -> None:
    jobs = [
        job("root", ["writer"], phase="Succeeded", usage={"tokens": 5, "cost": 0.2}),
        job("kid", ["writer", "reviewer"], phase="Running", usage={"tokens": 7, "cost": 0.1}),
        job("other", ["writer", "other"], phase="Pending"),
    ]
    tree = serializers.chain_tree(CHAIN, NS, jobs, None, "EUR")
    assert tree["usage"] == {"tokens": 12, "cost": 0.3, "currency": "EUR", "reportedBy": 2}
    assert tree["roots"][0]["usage"] == {"tokens": 5, "cost": 0.2, "currency": "EUR"}
    assert serializers.chain_tree(CHAIN, NS, jobs[2:], None)["usage"] is None
    schema = openapi.document()["components"]["schemas"]["Chain"]
    jsonschema.validate(tree, schema)


# ----------------------------------------------------------------------- over HTTP


@pytest.fixture
def settings() -> Settings:
    """The web conftest's settings, serving one namespace (the fake API server answers
    namespaced paths only)."""
    return Settings(
        webhook_secrets=(WEBHOOK_SECRET,),
        admin_tokens=(ADMIN_TOKEN,),
        namespaces=(NS,),
        operator_key=(OPERATOR_KEY,),
    )


def seed(api: FakeApi, *, currency: str | None = "EUR") -> None:
    writer = agent("writer", "reviewer")
    if currency is not None:
        writer["spec"]["budget"] = {"currency": currency}
    api.put("aiagents", writer)
    api.put("aiagents", agent("reviewer"))
    api.put("agentjobs", job("root", ["writer"], phase="Succeeded", usage={"tokens": 5}))
    api.put("agentjobs", job("kid", ["writer", "reviewer"], phase="Running", attempt=1))


async def answer(response: Any) -> Any:
    assert response.status == 200, await response.text()
    return await response.json()


@pytest.mark.redis
async def test_a_job_shows_its_usage_in_its_chain_budgets_currency(
    api: FakeApi, client: Client
) -> None:
    seed(api)
    view = await answer(await client.get(f"/api/jobs/{NS}/root", headers=ADMIN))
    assert flow(view) == {**NOTHING, "usage": {"tokens": 5, "cost": 0.0, "currency": "EUR"}}
    listed = await answer(await client.get(f"/api/jobs?namespace={NS}", headers=ADMIN))
    usages = {item["id"]: item["usage"] for item in listed["items"]}
    assert usages == {"root": {"tokens": 5, "cost": 0.0, "currency": "EUR"}, "kid": None}


@pytest.mark.redis
async def test_a_chain_shows_its_usage_total(api: FakeApi, client: Client) -> None:
    seed(api)
    kid = job("kid", ["writer", "reviewer"], parentJobId="root", usage={"tokens": 7, "cost": 0.25})
    api.put("agentjobs", kid)
    tree = await answer(await client.get(f"/api/chains/{NS}/{CHAIN}", headers=ADMIN))
    assert tree["usage"] == {"tokens": 12, "cost": 0.25, "currency": "EUR", "reportedBy": 2}
    (root,) = tree["roots"]
    assert root["children"][0]["usage"] == {"tokens": 7, "cost": 0.25, "currency": "EUR"}


@pytest.mark.redis
async def test_a_chain_without_usage_reads_no_aiagent(api: FakeApi, client: Client) -> None:
    api.put("agentjobs", job("root", ["writer"], phase="Running"))
    tree = await answer(await client.get(f"/api/chains/{NS}/{CHAIN}", headers=ADMIN))
    assert tree["usage"] is None
    assert "aiagents" not in api.reads


@pytest.mark.redis
async def test_a_chain_without_a_budget_counts_in_usd(api: FakeApi, client: Client) -> None:
    seed(api, currency=None)
    tree = await answer(await client.get(f"/api/chains/{NS}/{CHAIN}", headers=ADMIN))
    assert tree["usage"] == {"tokens": 5, "cost": 0.0, "currency": "USD", "reportedBy": 1}


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.redis
async def test_a_usage_report_moves_the_usage_counters_and_shows_on_the_job(
    api: FakeApi, client: Client, runtime: Runtime
) -> None:
    seed(api)
    token = await runtime.tokens.issue(NS, "kid", "uid-kid", CHAIN, 600)
    tokens = ("agentchain_usage_tokens_total", {"namespace": NS, "agent": "reviewer"})
    cost = ("agentchain_usage_cost_total", {**tokens[1], "currency": "EUR"})
    before = sample(tokens[0], **tokens[1]), sample(cost[0], **cost[1])
    report = {"tokens": 300, "cost": 0.5}
    headers = {"Authorization": f"Bearer {token}"}
    body = await answer(
        await client.post(f"/api/jobs/{NS}/kid/usage", json=report, headers=headers)
    )
    assert body["currency"] == "EUR" and body["job"] == {"tokens": 300, "cost": 0.5}
    assert sample(tokens[0], **tokens[1]) == before[0] + 300
    assert sample(cost[0], **cost[1]) == pytest.approx(before[1] + 0.5)
    view = await answer(await client.get(f"/api/jobs/{NS}/kid", headers=ADMIN))
    assert view["usage"] == {"tokens": 300, "cost": 0.5, "currency": "EUR"}
