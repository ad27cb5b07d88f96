"""``POST /webhooks/github`` over HTTP, with the queue on real Redis and no Kubernetes.

Aspects covered (no Kubernetes needed: every case answers before the API server, or
the AiAgent listing and the AgentJob create are replaced by in-memory fakes):
* ``ping`` with a valid signature → 200 ``{"pong": true}``, JSON or form-encoded;
* missing or invalid ``X-GitHub-Event`` / ``X-GitHub-Delivery`` → 400;
* missing, bad or wrong-secret signature → 401; secrets and signatures never logged;
* content type other than JSON / form → 415; malformed JSON, a non-object payload or a
  form without ``payload`` → 400;
* size cap: a declared ``Content-Length`` over the cap → 413 before any body byte is
  sent; a chunked body growing past the cap → 413 while traced memory stays bounded;
* every error is JSON ``{"error", "detail"}``; deliveries are counted by result;
* fail closed: without a secret ``build_app`` raises ``WebhookNotConfigured``, and
  ``webhook=False`` serves a 503 at the webhook path while the rest stays up;
* the queue: a matched delivery → 202 with the job ``created`` (newly accepted) before
  any AgentJob exists, then the dispatcher creates it and empties the queue; a
  redelivery → ``duplicate``, queued again, found existing; 40 deliveries list the
  AiAgents once; Redis down → 503 and nothing queued; a delivery no replica confirmed
  (``webhook_min_replicas``) → 503, its redelivery recognised and its job created once;
* the dispatcher: a refused job (422) is dropped and counted, once; a transient
  failure (500) is retried after a back-off and then created.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import tracemalloc
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import ClientError, ClientResponse
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from agentchain import models
from agentchain.core.runtime import Runtime
from agentchain.github import roundrecords
from agentchain.github.rules.matching import AgentCandidate
from agentchain.kube import apierrors as kube_errors
from agentchain.models.aiagent import AiAgentSpec
from agentchain.settings import Settings
from agentchain.store.deliveries import JobQueue, QueuedJob
from agentchain.web import listing
from agentchain.web.app import WebhookNotConfigured, build_app
from agentchain.web.hooks import jobqueue
from agentchain.web.hooks.signatures import sign
from tests.unit.web.conftest import SMALL_CAP, WEBHOOK_SECRET, Client, make_runtime, serving

PATH = "/webhooks/github"
PING = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()


def headers(body: bytes, event: str = "ping", **extra: str) -> dict[str, str]:
    base = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "X-GitHub-Hook-ID": "1",
        "X-Hub-Signature-256": sign(body, WEBHOOK_SECRET),
        "Content-Type": "application/json",
    }
    base.update(extra)
    return {k: v for k, v in base.items() if v != "-"}


def delivered(result: str) -> float:
    value = REGISTRY.get_sample_value("agentchain_webhook_deliveries_total", {"result": result})
    return value or 0.0


async def assert_error(response: ClientResponse, status: int) -> dict[str, object]:
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    body = await response.json()
    assert isinstance(body["error"], str) and isinstance(body["detail"], str)
    return dict(body)


# --------------------------------------------------------------------------- accepted


async def test_ping_is_answered(client: Client) -> None:
    before = delivered("accepted")
    response = await client.post(PATH, data=PING, headers=headers(PING))
    assert response.status == 200
    assert (await response.json())["pong"] is True
    assert delivered("accepted") == before + 1


async def test_form_encoded_ping_is_answered(client: Client) -> None:
    body = urllib.parse.urlencode({"payload": PING.decode()}).encode()
    form = headers(body, **{"Content-Type": "application/x-www-form-urlencoded"})
    response = await client.post(PATH, data=body, headers=form)
    assert response.status == 200
    assert (await response.json())["pong"] is True


# --------------------------------------------------------------------------- 400 / 401 / 415


@pytest.mark.parametrize(
    "change",
    [
        {"X-GitHub-Event": "-"},
        {"X-GitHub-Delivery": "-"},
        {"X-GitHub-Event": "Issues; rm -rf"},
        {"X-GitHub-Delivery": "x" * 200},
        {"X-GitHub-Hook-ID": "../../etc"},
    ],
    ids=["no-event", "no-delivery", "bad-event", "long-delivery", "bad-hook-id"],
)
async def test_missing_or_invalid_headers_are_400(client: Client, change: dict[str, str]) -> None:
    before = delivered("invalid")
    response = await client.post(PATH, data=PING, headers=headers(PING, **change))
    await assert_error(response, 400)
    assert delivered("invalid") == before + 1


@pytest.mark.parametrize(
    "signature",
    ["-", "", sign(PING, "wrong secret"), "sha1=" + sign(PING, WEBHOOK_SECRET)[7:]],
    ids=["missing", "empty", "wrong-secret", "sha1"],
)
async def test_bad_signatures_are_401_and_never_logged(
    client: Client, signature: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    before = delivered("unauthorized")
    sent = headers(PING, **{"X-Hub-Signature-256": signature})
    response = await client.post(PATH, data=PING, headers=sent)
    await assert_error(response, 401)
    assert delivered("unauthorized") == before + 1
    assert WEBHOOK_SECRET not in caplog.text
    if signature not in ("", "-"):
        assert signature not in caplog.text


async def test_a_changed_body_is_401(client: Client) -> None:
    sent = headers(PING)
    response = await client.post(PATH, data=PING.replace(b"awesome", b"awesome!"), headers=sent)
    await assert_error(response, 401)


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "-"])
async def test_other_content_types_are_415(client: Client, content_type: str) -> None:
    sent = headers(PING, **{"Content-Type": content_type})
    response = await client.post(PATH, data=PING, headers=sent)
    await assert_error(response, 415)


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe", b"[" * 100_000],
    ids=["broken", "array", "string", "not-utf8", "deeply-nested"],
)
async def test_malformed_json_is_400(client: Client, body: bytes) -> None:
    response = await client.post(PATH, data=body, headers=headers(body))
    await assert_error(response, 400)


@pytest.mark.parametrize("body", [b"other=1", b"payload=%7Bbroken", b"\xff=1"])
async def test_malformed_forms_are_400(client: Client, body: bytes) -> None:
    form = headers(body, **{"Content-Type": "application/x-www-form-urlencoded"})
    response = await client.post(PATH, data=body, headers=form)
    await assert_error(response, 400)


# --------------------------------------------------------------------------- size cap


async def raw_request(client: Client, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``head`` (and ``body``) on a fresh socket; the status and the response bytes."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    try:
        writer.write(head + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(65536), timeout=5)
    finally:
        writer.close()
    return int(answer.split(b" ", 2)[1]), answer


async def test_declared_content_length_over_cap_is_413_before_the_body(client: Client) -> None:
    before = delivered("too_large")
    sent = headers(PING)
    lines = [f"POST {PATH} HTTP/1.1", f"Host: {client.host}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in sent.items()]
    lines.append(f"Content-Length: {26 * 1024 * 1024}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    # No body byte is sent: the answer must not wait for the 26 MB it was promised.
    status, answer = await raw_request(client, head)
    assert status == 413
    assert b'"error"' in answer
    assert delivered("too_large") == before + 1


async def chunks(total: int, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    block = b"x" * size  # One buffer reused, so the sender allocates nothing per chunk.
    sent = 0
    while sent < total:
        yield block
        sent += size


async def test_chunked_body_over_cap_is_413_with_bounded_memory(client: Client) -> None:
    sent = headers(PING)  # The signature cannot match; the cap must trip first.
    tracemalloc.start()
    try:
        try:
            response = await client.post(PATH, data=chunks(26 * 1024 * 1024), headers=sent)
            status = response.status
            await assert_error(response, 413)
        except ClientError as exc:  # pragma: no cover - depends on socket timing
            pytest.fail(f"the server closed the upload without a 413 answer: {exc!r}")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 413
    # The cap is 1 MiB: the server holds at most cap + one chunk of body, far below 26 MB.
    assert peak < 4 * SMALL_CAP, f"peak traced memory {peak} bytes"


async def test_body_at_the_cap_is_read(redis: Redis) -> None:
    settings = Settings(webhook_secrets=(WEBHOOK_SECRET,), webhook_max_bytes=len(PING))
    app = build_app(make_runtime(redis, settings))
    async with serving(app) as c:
        ok = await c.post(PATH, data=PING, headers=headers(PING))
        assert ok.status == 200
        longer = PING + b" "
        too_long = await c.post(PATH, data=longer, headers=headers(longer))
        await assert_error(too_long, 413)


# --------------------------------------------------------------------------- fail closed


@pytest.mark.parametrize("secrets", [(), ("",)], ids=["none", "empty"])
def test_no_secret_refuses_to_build(redis: Redis, secrets: tuple[str, ...]) -> None:
    settings = Settings(webhook_secrets=secrets)
    with pytest.raises(WebhookNotConfigured, match="no GitHub webhook secret"):
        build_app(make_runtime(redis, settings))


async def test_webhook_off_answers_503_and_the_rest_stays_up(
    redis: Redis, with_settings: Callable[..., Settings]
) -> None:
    rt = make_runtime(redis, with_settings(webhook_secrets=()))
    async with serving(build_app(rt, webhook=False)) as c:
        await assert_error(await c.post(PATH, data=PING, headers=headers(PING)), 503)
        assert (await c.get("/healthz")).status == 200
        assert (await c.get("/api/openapi.json")).status == 200


# --------------------------------------------------------------------------- the queue

NAMESPACE = "team-a"
TRIAGE = AiAgentSpec.model_validate(
    {"triggerName": "ai-triage", "eventTriggers": [{"source": "github", "events": ["issues"]}]}
)
ISSUE = json.dumps(
    {
        "action": "opened",
        "issue": {"number": 7, "title": "t", "author_association": "OWNER"},
        "repository": {"full_name": "acme/app"},
        "sender": {"login": "alice", "type": "User"},
    }
).encode()


def dispatched(result: str) -> float:
    value = REGISTRY.get_sample_value("agentchain_webhook_jobs_total", {"result": result})
    return value or 0.0


class FakeKube:
    """The AiAgent listing and the AgentJob create, in memory; ``fail`` scripts refusals."""

    def __init__(self) -> None:
        self.listings = 0
        self.jobs: dict[str, dict[str, object]] = {}
        self.creates = 0
        self.fail: list[int] = []

    async def agents(self, namespaces: object) -> dict[str, list[AgentCandidate]]:
        self.listings += 1
        return {NAMESPACE: [AgentCandidate("issue-triage", TRIAGE)]}

    async def create(self, job: QueuedJob) -> str:
        self.creates += 1
        if self.fail:
            code = self.fail.pop(0)
            raise kube_errors.from_status(code, {"kind": "Status", "code": code})
        if job.key in self.jobs:
            return "existed"
        self.jobs[job.key] = job.body
        return "created"


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube()
    monkeypatch.setattr(listing, "agents_by_namespace", fake.agents)
    monkeypatch.setattr(jobqueue, "_create", fake.create)
    return fake


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def drained(redis: Redis) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await JobQueue(redis, (NAMESPACE,)).pending(NAMESPACE) == 0

    return check


def issue_headers(delivery: str = "d-1") -> dict[str, str]:
    return headers(ISSUE, "issues", **{"X-GitHub-Delivery": delivery})


async def test_a_delivery_is_queued_then_created_by_the_dispatcher(
    client: Client, kube: FakeKube, redis: Redis
) -> None:
    before = dispatched("created"), dispatched("existed")
    response = await client.post(PATH, data=ISSUE, headers=issue_headers())
    assert response.status == 202, await response.text()
    answer = await response.json()
    [job] = answer["jobs"]
    assert answer["duplicate"] is False
    assert (job["namespace"], job["agent"], job["created"]) == (NAMESPACE, "ai-triage", True)
    await eventually(drained(redis))
    assert list(kube.jobs) == [f"{NAMESPACE}/{job['name']}"]
    meta = kube.jobs[f"{NAMESPACE}/{job['name']}"]["metadata"]
    assert isinstance(meta, dict) and (meta["name"], meta["namespace"]) == (job["name"], NAMESPACE)
    again = await (await client.post(PATH, data=ISSUE, headers=issue_headers())).json()
    assert again["duplicate"] is True
    assert [(j["name"], j["created"]) for j in again["jobs"]] == [(job["name"], False)]
    await eventually(drained(redis))
    assert kube.creates == 2 and len(kube.jobs) == 1
    assert (dispatched("created"), dispatched("existed")) == (before[0] + 1, before[1] + 1)


async def test_a_burst_lists_the_agents_once(client: Client, kube: FakeKube, redis: Redis) -> None:
    # Distinct events: an identical signed body is one delivery whatever its headers say.
    bodies = [ISSUE.replace(b'"number": 7', f'"number": {n}'.encode()) for n in range(40)]
    answers = await asyncio.gather(
        *(
            client.post(
                PATH, data=body, headers=headers(body, "issues", **{"X-GitHub-Delivery": f"d-{n}"})
            )
            for n, body in enumerate(bodies)
        )
    )
    assert {a.status for a in answers} == {202}
    assert kube.listings == 1
    await eventually(drained(redis))
    assert len(kube.jobs) == 40


async def test_redis_down_is_503_and_nothing_is_queued(
    settings: Settings, kube: FakeKube, redis: Redis
) -> None:
    dead: Redis = Redis.from_url("redis://127.0.0.1:1/0")
    before = delivered("unavailable")
    try:
        app = build_app(make_runtime(dead, settings))
        async with serving(app) as c:
            response = await c.post(PATH, data=ISSUE, headers=issue_headers())
            body = await assert_error(response, 503)
            assert "nothing was queued" in str(body["detail"])
    finally:
        await dead.aclose()  # type: ignore[attr-defined,unused-ignore]
    assert delivered("unavailable") == before + 1
    assert await redis.dbsize() == 0 and kube.creates == 0


async def test_a_refused_job_is_dropped_once_and_counted(
    client: Client, kube: FakeKube, redis: Redis
) -> None:
    kube.fail = [422]
    before = dispatched("failed")
    assert (await client.post(PATH, data=ISSUE, headers=issue_headers())).status == 202
    await eventually(drained(redis))
    await asyncio.sleep(0.1)  # Nothing retries it.
    assert kube.creates == 1 and kube.jobs == {}
    assert dispatched("failed") == before + 1


async def test_a_transient_failure_is_retried_after_a_back_off(
    client: Client, kube: FakeKube, redis: Redis
) -> None:
    kube.fail = [500]
    before = dispatched("retried")
    started = time.monotonic()
    assert (await client.post(PATH, data=ISSUE, headers=issue_headers())).status == 202
    await eventually(drained(redis))
    assert time.monotonic() - started >= 0.8 * jobqueue.RETRY_MIN_SECONDS
    assert kube.creates == 2 and len(kube.jobs) == 1
    assert dispatched("retried") == before + 1


async def test_a_delivery_no_replica_confirmed_is_503_and_a_redelivery_is_recognised(
    settings: Settings, kube: FakeKube, redis: Redis
) -> None:
    # This Redis has no replica: WAIT gives up after the timeout with none.
    waiting = settings.model_copy(
        update={"webhook_min_replicas": 1, "webhook_replica_timeout_ms": 200}
    )
    before = delivered("unreplicated")
    async with serving(build_app(make_runtime(redis, waiting))) as c:
        response = await c.post(PATH, data=ISSUE, headers=issue_headers())
        body = await assert_error(response, 503)
        assert "0 of 1 Redis replica(s) confirmed" in str(body["detail"])
        again = await c.post(PATH, data=ISSUE, headers=issue_headers())
        assert again.status == 202 and (await again.json())["duplicate"] is True
        await eventually(drained(redis))
    assert delivered("unreplicated") == before + 1
    # Queued on the primary all the same, and created once: a create tried again (a
    # drain's claim that lapsed on a loaded machine) finds the job by its key.
    assert len(kube.jobs) == 1 and kube.creates >= 1


async def test_redis_down_while_a_follow_up_round_is_planned_is_503(
    settings: Settings, kube: FakeKube, redis: Redis
) -> None:
    """A failing check on a pull request is looked up in Redis before the delivery is
    recorded (whose pull request it is): Redis down there is the same clean 503."""
    dead: Redis = Redis.from_url("redis://127.0.0.1:1/0")
    failing = {
        "action": "completed",
        "check_run": {
            "id": 5,
            "name": "tests",
            "conclusion": "failure",
            "pull_requests": [{"number": 7, "base": {"repo": {"name": "app"}}}],
        },
        "repository": {"full_name": "octo/app"},
        "installation": {"id": 1},
    }
    body = json.dumps(failing).encode()
    before = delivered("unavailable")
    try:
        app = build_app(make_runtime(dead, settings))
        async with serving(app) as c:
            response = await c.post(PATH, data=body, headers=headers(body, "check_run"))
            answer = await assert_error(response, 503)
            assert "nothing was queued" in str(answer["detail"])
    finally:
        await dead.aclose()  # type: ignore[attr-defined,unused-ignore]
    assert delivered("unavailable") == before + 1
    assert await redis.dbsize() == 0 and kube.creates == 0


async def test_a_failing_check_queues_one_round_whose_title_is_never_formatted(
    client: Client, runtime: Runtime, kube: FakeKube, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing check on a pull request a chain opened queues a root AgentJob of the
    chain's opted-in agent, labelled with the chain it continues; CI's text in the check's
    name (braces included) is joined into the title as it is, never formatted."""
    developer = AiAgentSpec.model_validate(
        {"triggerName": "dev", "github": {"followUps": {"checks": True}}}
    )

    async def agents(namespaces: object) -> dict[str, list[AgentCandidate]]:
        return {NAMESPACE: [AgentCandidate("developer", developer)]}

    monkeypatch.setattr(listing, "agents_by_namespace", agents)
    await roundrecords.record_pull(redis, runtime.operator_keys, "octo/app", 7, NAMESPACE, "c1")
    await runtime.chains.record_hop(
        NAMESPACE,
        "c1",
        job_name="dev-1",
        agent="dev",
        phase="Succeeded",
        decision="none",
        detail="",
    )
    failing = {
        "action": "completed",
        "check_run": {
            "id": 5,
            "name": "build {matrix.os} {0} {}",
            "conclusion": "failure",
            "output": {"title": "{0.__class__}", "summary": "s", "text": "t"},
            "pull_requests": [{"number": 7, "base": {"repo": {"name": "app"}}}],
        },
        "repository": {"full_name": "octo/app"},
        "installation": {"id": 1},
    }
    body = json.dumps(failing).encode()
    sent = headers(body, "check_run", **{"X-GitHub-Delivery": "check-1"})
    response = await client.post(PATH, data=body, headers=sent)
    assert response.status == 202, await response.text()
    [job] = (await response.json())["jobs"]
    assert job["agent"] == "dev"
    await eventually(drained(redis))
    queued = kube.jobs[f"{NAMESPACE}/{job['name']}"]
    meta, spec = queued["metadata"], queued["spec"]
    assert isinstance(meta, dict) and isinstance(spec, dict)
    assert meta["labels"][models.CONTINUES] == "c1"
    event = spec["event"]
    assert event["title"] == "Checks failed on pull request #7: build {matrix.os} {0} {}"
    assert (event["continues"], event["round"], event["number"]) == ("c1", 1, 7)
    assert "title:\n{0.__class__}" in event["body"]
