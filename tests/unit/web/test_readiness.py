"""``/readyz`` on a replica: what it can serve, and which role it has (issue 20).

Aspects covered: every replica serves, leader or not, so the role is reported in the
body and is never a readiness criterion (a follower with Redis and the API server
answering is ready, like the leader); without a role source (tests, other launchers)
the body has no ``role``; Redis failing makes either role unready, saying which check;
a replica draining after SIGTERM (``stopping``) is unready whatever its checks say.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.kube import clients
from agentchain.web import app
from agentchain.web.app import build_internal_app
from tests.unit.web.conftest import serving


@pytest.fixture(autouse=True)
def no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No API server here: the kubernetes check fails alike for every role."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    clients.reset()


@pytest.mark.parametrize("role", ["leader", "follower"])
async def test_the_role_is_reported_never_required(runtime: Runtime, role: str) -> None:
    async with serving(build_internal_app(runtime, role=lambda: role)) as client:
        response = await client.get("/readyz")
        body = await response.json()
    assert body["role"] == role
    assert body["checks"]["redis"] == "ok"
    # Readiness is the checks alone: the same answer for a leader and a follower.
    assert body["ready"] is (response.status == 200) is (body["checks"]["kubernetes"] == "ok")


async def test_without_a_role_source_none_is_reported(runtime: Runtime) -> None:
    async with serving(build_internal_app(runtime)) as client:
        body = await (await client.get("/readyz")).json()
    assert "role" not in body


async def test_a_follower_without_redis_is_not_ready(runtime: Runtime) -> None:
    dead: Redis = Redis.from_url("redis://127.0.0.1:1/0")
    broken = Runtime.from_client(runtime.settings, dead)
    try:
        async with serving(build_internal_app(broken, role=lambda: "follower")) as client:
            response = await client.get("/readyz")
            body = await response.json()
    finally:
        await dead.aclose()
    assert response.status == 503 and body["ready"] is False
    assert body["checks"]["redis"].startswith("failed") and body["role"] == "follower"


async def test_a_draining_replica_is_unready_whatever_its_checks(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def reachable() -> None:
        return None

    monkeypatch.setattr(app, "_kube_reachable", reachable)
    for role, status in (("follower", 200), ("stopping", 503)):
        said = functools.partial(str, role)
        async with serving(build_internal_app(runtime, role=said)) as client:
            response = await client.get("/readyz")
            body = await response.json()
        assert (response.status, body["role"], body["ready"]) == (status, role, status == 200)
        assert body["checks"] == {"redis": "ok", "kubernetes": "ok"}
