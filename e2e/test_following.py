"""A follower's dashboard feed (``web/dashboard/following.py``) against the real API server.

A follower runs no kopf, so its open dashboard pages are fed by a watch of its own.
Aspects covered: an AgentJob created in a served namespace reaches a subscriber of the
follower's ``Runtime.feed``; cancelling the feed (the replica starts to lead) ends it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.kube import clients
from agentchain.settings import Settings
from agentchain.web.dashboard import following
from e2e import chaining
from e2e.controlplane.cluster import ClusterInfo


@pytest.fixture
async def admin_client(cluster_info: ClusterInfo) -> AsyncIterator[None]:
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(cluster_info.kubeconfig)
    clients.reset()
    try:
        yield
    finally:
        await clients.close()
        clients.reset()
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous


@pytest.mark.usefixtures("admin_client", "installed")
async def test_a_followers_pages_see_agentjob_changes(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    redis: Redis = Redis.from_url(cluster_info.redis_url)
    runtime = Runtime.from_client(Settings(namespaces=(namespace,)), redis)
    task = asyncio.create_task(following.feed(runtime, runtime.settings.namespaces))
    try:
        with runtime.feed.subscribe() as page:
            await asyncio.sleep(1.0)  # The watch is open.
            job = chaining.root_job("followed", "nobody-home")
            await asyncio.to_thread(chaining.apply, cluster_info, namespace, job)
            change = await asyncio.wait_for(page.queue.get(), 30)
            assert (change.namespace, change.name, change.deleted) == (
                namespace,
                "followed",
                False,
            )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        task.cancel()
        await redis.aclose()
