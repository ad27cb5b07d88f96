"""Serving ``build_app`` (and ``build_internal_app``) in-process against the session's
real API server and Redis.

The web layer's e2e tests (``test_api.py``, ``test_webhook.py``) share this: the
CRDs applied once per session, the product's Kubernetes client pointed at the
session's kubeconfig, and an app whose settings confine it to the test's
namespace (so agents of other tests never match its deliveries).  The operator
itself is not running here: these tests check what the endpoints create and
answer, not the chains the engine then runs.  The webhook's dispatcher does run
(it is part of the app): a test waits for it with :func:`drained` before counting
the AgentJobs a delivery queued, or serves with ``dispatch=False`` to play a
dispatcher that died before creating anything.  When the whole suite runs, the
session's operator (cluster-wide) drains webhook queues too; ``own_redis=True``
gives the app a Redis database of its own so that only the test's app acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agentchain.core.runtime import Runtime
from agentchain.kube import clients, resources
from agentchain.settings import Settings
from agentchain.store.deliveries import JobQueue
from agentchain.web import server
from agentchain.web.app import build_app, build_internal_app
from agentchain.web.hooks.signatures import sign
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

REPO = Path(__file__).resolve().parents[1]
SEED_AGENTS = REPO / "config/samples/labrats.work_v1alpha1_aiagent_issue-fix-review.yaml"
WEBHOOK_SECRET = "e2e webhook secret"
ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef"
# The session operator's too: it drains (cluster-wide) what these apps queue on /0.
OPERATOR_KEY = operating.OPERATOR_KEY
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# The Redis database of apps served with own_redis: the session operator uses /0.
OWN_REDIS_DB = 7
Client = TestClient[web.Request, web.Application]


@pytest.fixture(scope="session")
def kube(cluster_info: ClusterInfo) -> Iterator[ClusterInfo]:
    """CRDs applied and ``agentchain.kube`` talking to the session's cluster."""
    cluster_info.kubectl("apply", "-f", str(REPO / "crds"))
    operating.wait_established(cluster_info)
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(cluster_info.kubeconfig)
    clients.reset()
    yield cluster_info
    clients.reset()
    if previous is None:
        os.environ.pop("KUBECONFIG", None)
    else:
        os.environ["KUBECONFIG"] = previous


def apply(kube: ClusterInfo, namespace: str, manifest: str | Path) -> None:
    if isinstance(manifest, Path):
        kube.kubectl("-n", namespace, "apply", "-f", str(manifest))
    else:
        kube.kubectl("-n", namespace, "apply", "-f", "-", input=manifest)


def agent_manifest(name: str, **spec: Any) -> str:
    """A manual-only AiAgent named ``name``; ``spec`` adds fields (e.g. ``delegation``)."""
    return json.dumps(chaining.ai_agent(name, triggers=chaining.MANUAL, **spec))


def agentjobs(kube: ClusterInfo, namespace: str) -> list[dict[str, Any]]:
    """The jobs the webhook/API created: roots only.

    When the session operator runs (the full suite), it also runs these jobs
    and spawns their chain children; those are the chain's doing, not ours.
    """
    out = kube.kubectl("-n", namespace, "get", "agentjobs", "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return [i for i in items if (i.get("spec") or {}).get("origin") != "chain"]


async def job_uid(namespace: str, name: str) -> str:
    """The uid of AgentJob ``name``: what one run recorded (its output, its anchor) is
    keyed by it. Inside :func:`served`, whose client reads the test cluster."""
    obj = await resources.get(namespace, resources.AGENTJOBS, name)
    assert obj is not None, f"no AgentJob {namespace}/{name}"
    return str(obj["metadata"]["uid"])


@contextlib.asynccontextmanager
async def served(
    kube: ClusterInfo,
    namespace: str,
    *,
    dispatch: bool = True,
    own_redis: bool = False,
    host: str = "127.0.0.1",
) -> AsyncIterator[tuple[Client, Runtime]]:
    """The job API in-process on ``host`` (``kube.pod_host`` for a client in a pod)."""
    redis_url = kube.redis_url
    if own_redis:
        redis_url = f"{redis_url.rpartition('/')[0]}/{OWN_REDIS_DB}"
    settings = Settings(
        redis_url=redis_url,
        namespaces=(namespace,),
        webhook_secrets=(WEBHOOK_SECRET,),
        admin_tokens=(ADMIN_TOKEN,),
        operator_key=(OPERATOR_KEY,),
    )
    rt = Runtime.create(settings)
    try:
        app = build_app(rt, dispatch=dispatch)
        async with TestClient(OperatorTestServer(app, host=host)) as client:
            yield client, rt
    finally:
        await rt.close()


@contextlib.asynccontextmanager
async def served_internal(rt: Runtime) -> AsyncIterator[Client]:
    """The internal listener beside :func:`served`'s: metrics, probes, the dashboard (on)."""
    async with TestClient(OperatorTestServer(build_internal_app(rt, dashboard_enabled=True))) as c:
        yield c


async def ui_login(dashboard: Client) -> dict[str, str]:
    """Log ``dashboard`` (a :func:`served_internal` client) in; the headers a change needs."""
    host = f"{dashboard.host}:{dashboard.port}"
    origin = {"Origin": f"http://{host}", "Host": host}
    response = await dashboard.post("/ui/login", json={"token": ADMIN_TOKEN}, headers=origin)
    assert response.status == 200, await response.text()
    return {**origin, "X-CSRF-Token": (await response.json())["csrf"]}


class OperatorTestServer(TestServer):
    """aiohttp's test server running the app through the operator's own runner (as in
    production: JSON for HTTP parse errors, a hang-up does not cancel the handler)."""

    async def _make_runner(self, **kwargs: Any) -> web.BaseRunner:
        return server.Runner(self.app, **{**kwargs, "handler_cancellation": False})


async def drained(rt: Runtime, namespace: str, timeout: float = 60.0) -> None:
    """Wait until the webhook's queue for ``namespace`` is empty: every job created."""
    queue = JobQueue(rt.redis, (namespace,))
    deadline = time.monotonic() + timeout
    while (left := await queue.pending(namespace)) > 0:
        assert time.monotonic() < deadline, f"{left} queued job(s) still not created"
        await asyncio.sleep(0.1)


def issue_opened(number: int = 1, association: str = "OWNER") -> dict[str, Any]:
    return {
        "action": "opened",
        "issue": {
            # Unique like GitHub's: an identical signed body is one delivery, however sent.
            "id": uuid.uuid4().int >> 80,
            "number": number,
            "title": "Login fails with <script>alert(1)</script>",
            "body": "Steps to reproduce...",
            "author_association": association,
            "labels": [{"name": "bug"}],
            "html_url": f"https://github.com/acme/app/issues/{number}",
        },
        "repository": {"full_name": "acme/app"},
        "sender": {"login": "alice", "type": "User"},
    }


def signed(
    payload: dict[str, Any], event: str = "issues", delivery: str | None = None
) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "4242",
        "X-Hub-Signature-256": sign(body, WEBHOOK_SECRET),
        "Content-Type": "application/json",
    }
    return body, headers
