"""Serving ``build_app`` in-process against the session's real API server and Redis.

The web layer's e2e tests (``test_api.py``, ``test_webhook.py``) share this: the
CRDs applied once per session, the product's Kubernetes client pointed at the
session's kubeconfig, and an app whose settings confine it to the test's
namespace (so agents of other tests never match its deliveries).  The operator
itself is not running here: these tests check what the endpoints create and
answer, not the chains the engine then runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agentchain.engine.runtime import Runtime
from agentchain.kube import clients
from agentchain.settings import Settings
from agentchain.web.app import build_app
from agentchain.web.signatures import sign
from e2e.controlplane.cluster import ClusterInfo

REPO = Path(__file__).resolve().parents[1]
SEED_AGENTS = REPO / "config/samples/labrats.work_v1alpha1_aiagent_issue-fix-review.yaml"
WEBHOOK_SECRET = "e2e webhook secret"
ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
Client = TestClient[web.Request, web.Application]


@pytest.fixture(scope="session")
def kube(cluster_info: ClusterInfo) -> Iterator[ClusterInfo]:
    """CRDs applied and ``agentchain.kube`` talking to the session's cluster."""
    cluster_info.kubectl("apply", "-f", str(REPO / "crds"))
    cluster_info.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/agentjobs.labrats.work",
        "crd/aiagents.labrats.work",
    )
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(cluster_info.kubeconfig)
    clients.api_client.cache_clear()
    yield cluster_info
    clients.api_client.cache_clear()
    if previous is None:
        os.environ.pop("KUBECONFIG", None)
    else:
        os.environ["KUBECONFIG"] = previous


def apply(kube: ClusterInfo, namespace: str, manifest: str | Path) -> None:
    if isinstance(manifest, Path):
        kube.kubectl("-n", namespace, "apply", "-f", str(manifest))
    else:
        kube.kubectl("-n", namespace, "apply", "-f", "-", input=manifest)


def agent_manifest(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "labrats.work/v1alpha1",
            "kind": "AiAgent",
            "metadata": {"name": name},
            "spec": {"triggerName": name, "eventTriggers": [{"source": "manual"}]},
        }
    )


def agentjobs(kube: ClusterInfo, namespace: str) -> list[dict[str, Any]]:
    """The jobs the webhook/API created: roots only.

    When the session operator runs (the full suite), it also runs these jobs
    and spawns their chain children; those are the chain's doing, not ours.
    """
    out = kube.kubectl("-n", namespace, "get", "agentjobs", "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return [i for i in items if (i.get("spec") or {}).get("origin") != "chain"]


@contextlib.asynccontextmanager
async def served(kube: ClusterInfo, namespace: str) -> AsyncIterator[tuple[Client, Runtime]]:
    settings = Settings(
        redis_url=kube.redis_url,
        namespaces=(namespace,),
        webhook_secrets=(WEBHOOK_SECRET,),
        admin_tokens=(ADMIN_TOKEN,),
    )
    rt = Runtime.create(settings)
    try:
        async with TestClient(TestServer(build_app(rt, dashboard_enabled=True))) as client:
            yield client, rt
    finally:
        await rt.close()


def issue_opened(number: int = 1, association: str = "OWNER") -> dict[str, Any]:
    return {
        "action": "opened",
        "issue": {
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
