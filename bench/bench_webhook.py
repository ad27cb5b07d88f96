"""Webhook 202 latency at 200 concurrent deliveries, against a bare aiohttp endpoint.

What is measured: the full ``POST /webhooks/github`` path of ``build_app`` — size
cap, HMAC check, JSON parse, listing AiAgents from the real API server, matching,
the Redis delivery claim and creating the root AgentJob in the real API server —
up to the 202 answer.  The chain run after it (the engine) is not part of it: the
endpoint only queues work as AgentJobs.  The baseline is a bare aiohttp handler
answering 202 with a small JSON body, served the same way (same process, same
event loop as the client, real TCP on loopback), in the same run.

Run: ``python -m bench.bench_webhook`` (starts the local control plane and Redis,
or uses the cluster named by KUBECONFIG).  Prints p50/p99 of both and the ratio;
the target is a p99 ratio ≤ 2.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import aiohttp
from aiohttp import web
from e2e.controlplane.cluster import cluster, make_workdir

from agentchain.engine.runtime import Runtime
from agentchain.kube import clients
from agentchain.settings import Settings
from agentchain.web.app import build_app
from agentchain.web.signatures import sign

REPO = Path(__file__).resolve().parents[1]
SECRET = "bench secret"
CONCURRENCY = 200
NAMESPACE = f"bench-{uuid.uuid4().hex[:6]}"


def delivery(number: int) -> tuple[bytes, dict[str, str]]:
    payload = {
        "action": "opened",
        "issue": {"number": number, "title": "t", "body": "b", "author_association": "OWNER"},
        "repository": {"full_name": "acme/app"},
        "sender": {"login": "alice", "type": "User"},
    }
    body = json.dumps(payload).encode()
    return body, {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "1",
        "X-Hub-Signature-256": sign(body, SECRET),
        "Content-Type": "application/json",
    }


async def bare(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response({"jobs": []}, status=202)


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    # A backlog above the burst size: otherwise SYN retries (1 s) dominate both p99s.
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4 * CONCURRENCY)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/webhooks/github"


async def burst(session: aiohttp.ClientSession, url: str, n: int, offset: int) -> list[float]:
    async def one(i: int) -> float:
        body, headers = delivery(offset + i)
        started = time.perf_counter()
        async with session.post(url, data=body, headers=headers) as response:
            await response.read()
            if response.status != 202:
                raise RuntimeError(f"{url}: {response.status} {await response.text()}")
        return time.perf_counter() - started

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def measure(url: str, offset: int) -> list[float]:
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:
        # Warm-up opens the keep-alive connections, so the measured burst is not
        # measuring TCP handshakes.
        await burst(session, url, CONCURRENCY, offset)
        return await burst(session, url, CONCURRENCY, offset + CONCURRENCY)


async def run(redis_url: str) -> None:
    # The operator's start-up handler gives Kubernetes calls 32 threads; do the same.
    asyncio.get_running_loop().set_default_executor(
        concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="kube")
    )
    settings = Settings(redis_url=redis_url, namespaces=(NAMESPACE,), webhook_secrets=(SECRET,))
    rt = Runtime.create(settings)
    bare_app = web.Application()
    bare_app.router.add_post("/webhooks/github", bare)
    results: dict[str, list[float]] = {}
    apps: list[tuple[str, web.Application, int]] = [
        ("bare aiohttp", bare_app, 0),
        ("agentchain webhook", build_app(rt, dashboard_enabled=False), 10_000),
    ]
    for name, app, offset in apps:
        runner, url = await serve(app)
        try:
            results[name] = await measure(url, offset)
        finally:
            await runner.cleanup()
    await rt.close()
    report(results)


def report(results: dict[str, list[float]]) -> None:
    print(f"{CONCURRENCY} concurrent deliveries (after a warm-up burst of as many), latency in ms:")
    for name, values in results.items():
        p50, p99 = percentile(values, 50) * 1e3, percentile(values, 99) * 1e3
        print(f"  {name:20s} p50 {p50:8.1f}  p99 {p99:8.1f}")
    base, ours = results["bare aiohttp"], results["agentchain webhook"]
    ratio = percentile(ours, 99) / percentile(base, 99)
    print(f"p99 ratio (webhook / bare): {ratio:.2f}  (target ≤ 2)")


def main(argv: list[str] | None = None) -> int:
    with cluster(make_workdir()) as info:
        info.kubectl("apply", "-f", str(REPO / "crds"))
        info.kubectl("wait", "--for=condition=Established", "crd/aiagents.labrats.work")
        info.kubectl("create", "namespace", NAMESPACE)
        seed = REPO / "config/samples/labrats.work_v1alpha1_aiagent_issue-fix-review.yaml"
        info.kubectl("-n", NAMESPACE, "apply", "-f", str(seed))
        os.environ["KUBECONFIG"] = str(info.kubeconfig)
        clients.api_client.cache_clear()
        asyncio.run(run(info.redis_url))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
