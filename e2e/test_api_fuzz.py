"""Fuzzing the HTTP surface with thousands of generated requests: never a 5xx.

Issue 5's done-criterion, against the real app on the session's API server and
Redis (``webharness.served``; the engine is not running).  Requests come from
``e2e/fuzzing.py``, with a fixed seed (``derandomize``) so CI is reproducible.

Aspects covered:
* every operation of the OpenAPI document the app serves (``/api/openapi.json``):
  path parameters, query parameters and JSON bodies valid and invalid per its
  schemas, junk bodies and content types, other methods, paths no route has; with
  an admin token, a live job token, the token of a job that no longer exists, a
  revoked one, garbage and none;
* ``POST /webhooks/github``: GitHub-shaped payloads with fields of any type, JSON
  and form-encoded, binary junk, broken headers; signed with the configured secret
  (so deliveries reach parsing and matching), with another secret, or unsigned;
* every answer: below 500; every error a JSON object with an ``error`` sentence;
  a status the document lists for the operation; a certainly invalid request
  (a body that is no object, an unknown field, a missing required one, a bad
  signature) refused; a signed, well-formed delivery accepted; nothing logged at
  ERROR (a background task's failure shows up there, not in the answer); and the
  server still answers ``/healthz`` and ``/readyz`` afterwards.

Size: ``AGENTCHAIN_FUZZ_CASES`` (default 8000, about a minute) requests in all, 60 % to the API and
40 % to the webhook.  The file runs before the session operator starts (it sorts
before ``test_chain*``), and the few AgentJobs it creates (job names and delivery
ids come from small pools) are never run.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from yarl import URL

from agentchain.core.runtime import Runtime
from agentchain.web.hooks import webhook
from agentchain.web.jobapi.reads import encode_cursor
from e2e import fuzzing
from e2e.controlplane.cluster import ClusterInfo
from e2e.webharness import (
    ADMIN,
    ADMIN_TOKEN,
    SEED_AGENTS,
    WEBHOOK_SECRET,
    Client,
    agent_manifest,
    agentjobs,
    apply,
    job_uid,
    kube,
    served,
    served_internal,
    signed,
)

__all__ = ["kube"]

CASES = int(os.environ.get("AGENTCHAIN_FUZZ_CASES", "8000"))
API_CASES = CASES * 3 // 5
WEBHOOK_CASES = CASES - API_CASES
# Agents whose triggers, filters and sender policies the fuzzed deliveries go through.
PICKY_AGENTS = """
apiVersion: labrats.work/v1alpha1
kind: AiAgent
metadata: {name: picky}
spec:
  triggerName: ai-picky
  eventTriggers:
    - source: github
      events: ["issues.labeled", "issue_comment.created", "pull_request", "ping"]
      filters: {label: bug, repository: acme/app}
  senderPolicy: {allowedAssociations: [OWNER, MEMBER], allowBots: true}
---
apiVersion: labrats.work/v1alpha1
kind: AiAgent
metadata: {name: pusher}
spec:
  triggerName: ai-pusher
  eventTriggers:
    - source: github
      events: ["push", "release.published", "create"]
      filters: {sender: alice}
---
apiVersion: labrats.work/v1alpha1
kind: AiAgent
metadata: {name: sleeper}
spec:
  triggerName: ai-sleeper
  enabled: false
  eventTriggers: [{source: github, events: ["issues"]}]
"""


@pytest.fixture
def seeded(kube: ClusterInfo, namespace: str) -> str:
    apply(kube, namespace, SEED_AGENTS)
    apply(kube, namespace, PICKY_AGENTS)
    for name in ("ai-a", "ai-b"):
        apply(kube, namespace, agent_manifest(name))
    return namespace


# A body its Content-Encoding does not decode: aiohttp logs these at ERROR itself, from
# its HTTP parser (answering 400 before the app runs) or while draining a body the app
# did not read (after the answer went out).  The client's fault, and no 5xx.
CLIENT_BODY_ERRORS = (HttpProcessingError, RequestPayloadError)


@pytest.fixture
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    yield
    errors = [
        r
        for r in caplog.records
        if r.levelno >= logging.ERROR
        and not (r.exc_info and isinstance(r.exc_info[1], CLIENT_BODY_ERRORS))
    ]
    assert not errors, "\n".join(r.getMessage() for r in errors[:5])


async def send(client: Client, request: fuzzing.FuzzRequest) -> tuple[int, str, bytes]:
    """Sent byte for byte: no re-quoting of the target, no automatic Content-Type."""
    url = URL(str(client.make_url("")).rstrip("/") + request.target, encoded=True)
    async with client.session.request(
        request.method,
        url,
        headers=dict(request.headers),
        data=io.BytesIO(request.body),
        allow_redirects=False,
        skip_auto_headers=("Content-Type",),
    ) as response:
        return response.status, response.content_type, await response.read()


async def fuzz(
    client: Client,
    requests: SearchStrategy[fuzzing.FuzzRequest],
    cases: int,
    accepted: set[str] | None = None,
) -> Counter[str]:
    """Send ``cases`` drawn requests (hypothesis runs in a thread, the app in this loop).

    ``accepted`` collects the AgentJobs (``namespace/name``) webhook answers name.
    """
    loop = asyncio.get_running_loop()
    seen: Counter[str] = Counter()

    @settings(
        max_examples=cases,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        # No shrinking: each step is a real request, and the failing one is printed whole.
        phases=[Phase.explicit, Phase.generate],
    )
    @given(requests)
    def case(request: fuzzing.FuzzRequest) -> None:
        future = asyncio.run_coroutine_threadsafe(send(client, request), loop)
        status, content_type, body = future.result(timeout=60)
        seen[f"{request.label} {status}"] += 1
        request.check(status, content_type, body)
        if accepted is not None and status in (200, 202) and request.method == "POST":
            answer = json.loads(body)
            accepted.update(f"{j['namespace']}/{j['name']}" for j in answer.get("jobs", ()))

    await asyncio.to_thread(case)
    response = await client.get("/healthz")
    assert response.status == 200, await response.text()
    return seen


def report(title: str, seen: Counter[str], capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\n[fuzz] {title}: {sum(seen.values())} requests")
        for key, count in sorted(seen.items()):
            print(f"[fuzz]   {count:5d}  {key}")


async def setup_targets(client: Client, rt: Runtime, namespace: str) -> dict[str, Any]:
    """A job with a token, output, anchors and a store entry, so reads can find things."""
    body = {"namespace": namespace, "agentRole": "ai-a", "prompt": "fuzz", "name": "fuzz"}
    response = await client.post("/api/jobs", json=body, headers=ADMIN)
    assert response.status == 201, await response.text()
    job = await response.json()
    chain = job["chainId"]
    token = await rt.tokens.issue(namespace, "fuzz", "uid-fuzz", chain, 600)
    ghost = await rt.tokens.issue(namespace, "ghost", "uid-ghost", "chain-of-ghost", 600)
    revoked = await rt.tokens.issue(namespace, "gone", "uid-gone", "chain-of-gone", 600)
    await rt.tokens.revoke(namespace, "gone", "uid-gone")
    uid = await job_uid(namespace, "fuzz")
    await rt.outputs.put(namespace, "fuzz", uid, b"fuzz output\n")
    await rt.anchors.put_job_anchor(namespace, "fuzz", uid, {"task": "fuzz"})
    await rt.contexts.upsert(namespace, "notes", "k", "v", writer="admin", ttl_seconds=600)
    return {"chain": chain, "tokens": [token, ghost, revoked]}


def api_hints(namespace: str, chain: str) -> tuple[fuzzing.Hints, fuzzing.Hints]:
    """Values the app knows, mixed into the drawn ones; ``?wait=`` kept short."""
    likely = {
        "namespace": st.sampled_from([namespace] * 3 + ["notes", "memory:coder", "default"]),
        "tenant": st.just(namespace),
        "name": st.sampled_from(["fuzz", "fuzz", "ghost", "fuzz-1"]),
        "chainId": st.sampled_from([chain, "chain-of-ghost"]),
        "agentRole": st.sampled_from(["ai-a", "ai-b", "ai-triage", "ai-nobody"]),
        "key": st.sampled_from(["k", "a/b", "k k"]),
        "prefix": st.sampled_from(["", "k"]),
        "status": st.sampled_from(["pending", "Running", "completed", "bogus"]),
        "continue": st.just(encode_cursor(("2030-01-01T00:00:00Z", namespace, "zzz"))),
        # A store value over its 256 KiB limit now and then (413 with size and limit).
        "value": st.one_of(fuzzing.ANY_TEXT, fuzzing.ANY_TEXT, st.just("v" * (256 * 1024 + 1))),
    }
    return likely, {"wait": st.sampled_from([0, 0.05])}


async def test_openapi_operations_never_get_a_5xx(
    kube: ClusterInfo, seeded: str, capsys: pytest.CaptureFixture[str], no_errors_logged: None
) -> None:
    async with served(kube, seeded) as (client, rt):
        targets = await setup_targets(client, rt, seeded)
        document = await (await client.get("/api/openapi.json")).json()
        live, ghost, revoked = ({"Authorization": f"Bearer {t}"} for t in targets["tokens"])
        # Hypothesis favours the first value: about 45 % admin, 30 % live, 25 % the rest.
        auth = fuzzing.weighted(
            [
                (4, ADMIN),
                (8, live),
                (1, ghost),
                (1, revoked),
                (1, {"Authorization": f"bearer {ADMIN_TOKEN}"}),
                (1, {"Authorization": "Bearer"}),
                (1, {"Authorization": "Bearer nope"}),
                (1, {"Authorization": f"Basic {ADMIN_TOKEN}"}),
                (1, {"Authorization": "Bearer " + "x" * 5000}),
                (1, {}),
            ]
        )
        likely, only = api_hints(seeded, targets["chain"])
        schemas = fuzzing.Schemas(document, likely, only)
        seen = await fuzz(client, fuzzing.api_requests(document, auth, schemas), API_CASES)
        # The internal listener: dashboard pages and probes (no API document, no auth).
        internal_requests = fuzzing.api_requests(
            {"paths": {}}, auth, schemas, unlisted=fuzzing.INTERNAL_PATHS
        )
        async with served_internal(rt) as internal:
            seen_inside = await fuzz(internal, internal_requests, API_CASES // 4)
            for path in ("/healthz", "/readyz"):
                response = await internal.get(path)
                assert response.status == 200, await response.text()
    report("OpenAPI operations", seen, capsys)
    report("internal listener", seen_inside, capsys)
    assert sum(seen.values()) >= API_CASES * 0.9


async def test_webhook_deliveries_never_get_a_5xx(
    kube: ClusterInfo, seeded: str, capsys: pytest.CaptureFixture[str], no_errors_logged: None
) -> None:
    accepted: set[str] = set()
    async with served(kube, seeded) as (client, _):
        requests = fuzzing.webhook_request(webhook.PATH, WEBHOOK_SECRET)
        seen = await fuzz(client, requests, WEBHOOK_CASES, accepted)
        # Whether the webhook creates its jobs before answering or after: all get created.
        await asyncio.to_thread(wait_for_jobs, kube, seeded, accepted)
    report(f"webhook deliveries ({len(accepted)} AgentJobs accepted)", seen, capsys)
    assert sum(seen.values()) >= WEBHOOK_CASES * 0.9
    if WEBHOOK_CASES >= 1000:  # Smaller runs may well match nothing.
        assert accepted, "no fuzzed delivery matched an agent"


def wait_for_jobs(kube: ClusterInfo, namespace: str, keys: set[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        names = {f"{namespace}/{j['metadata']['name']}" for j in agentjobs(kube, namespace)}
        if keys <= names:
            return
        assert time.monotonic() < deadline, f"never created: {sorted(keys - names)[:10]}"
        time.sleep(0.5)


async def test_lone_surrogates_in_a_delivery_are_refused_as_malformed(
    kube: ClusterInfo, seeded: str
) -> None:
    """Found by the fuzz: a reason quoting a payload's lone surrogate was a 500.  Such
    text is now refused at the door, so it never reaches a job spec, Redis or a reason."""
    payload = {
        "action": "labeled",
        "issue": {"author_association": "OWNER", "labels": [{"name": "bug"}]},
        "label": {"name": "bug"},
        "repository": {"full_name": "acme/\ud800"},
        "sender": {"login": "alice"},
    }
    body, headers = signed(payload)  # json.dumps escapes the surrogate: "\ud800".
    assert b"\\ud800" in body
    async with served(kube, seeded) as (client, _):
        response = await client.post(webhook.PATH, data=body, headers=headers)
        assert response.status == 400, await response.text()
        answer = await response.json()
    assert answer["error"] == "malformed payload" and "surrogate" in answer["detail"]


async def test_odd_json_and_query_values_never_get_a_5xx(
    kube: ClusterInfo, seeded: str, no_errors_logged: None
) -> None:
    """Every odd body to every operation with a body, every odd value to every parameter."""
    async with served(kube, seeded) as (client, rt):
        targets = await setup_targets(client, rt, seeded)
        document = await (await client.get("/api/openapi.json")).json()
        live = {"Authorization": f"Bearer {targets['tokens'][0]}"}
        sent = 0
        for op in fuzzing.operations(document):
            path = op.path.replace("{namespace}", seeded).replace("{name}", "fuzz")
            path = path.replace("{key}", "k").replace("{chainId}", targets["chain"])
            bodies = fuzzing.ODD_BODIES if op.body else (b"",)
            queries = [
                f"{p['name']}={v}"
                for p in op.params
                if p["in"] == "query"
                for v in fuzzing.ODD_QUERY_VALUES
            ]
            for auth in (ADMIN, live):
                for body in bodies:
                    for query in queries or [""]:
                        tenant = f"tenant={seeded}&" if auth is ADMIN else ""
                        request = fuzzing.FuzzRequest(
                            op.method,
                            f"{path}?{tenant}{query}",
                            {**auth, "Content-Type": "application/json"},
                            body,
                            op.label,
                            op.statuses,
                        )
                        request.check(*await send(client, request))
                        sent += 1
    assert sent > 500
