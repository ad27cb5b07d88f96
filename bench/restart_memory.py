"""What a restart's memory is made of: the operator's watches and indexes alone, traced.

``python bench/restart_memory.py --namespace NS`` (``KUBECONFIG`` names the cluster,
e.g. a ``bench_scale.py`` cluster while it runs, or any cluster with a backlog)

Runs the operator's own AgentJob, batch Job and pod watches (``handlers.watches``, the
same consumers, trims and order) on a runtime whose stores are never used, with the
engine's work discarded instead of run, until the three initial lists are in; then
prints what ``tracemalloc`` finds allocated by them, by file and line, and the RSS
growth. That is the part of the operator's memory that grows with the backlog; the
rest is the process itself (``bench_scale.py``'s baseline row: the operator after one
chain).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import redis.asyncio as aioredis

from agentchain.core.runtime import Runtime
from agentchain.handlers import watches
from agentchain.handlers.ordering import Work
from agentchain.kube import clients
from agentchain.settings import Settings
from bench import harness


def _discard(key: object, work: Work) -> None:
    """The engine's work is not run: only what the watches keep is measured."""


async def measure(namespace: str, top: int, trace: bool) -> None:
    settings = Settings(namespaces=(namespace,), resync_seconds=30)
    rt = Runtime.from_client(settings, aioredis.Redis())
    before_rss = harness.ProcSample.of(os.getpid()).rss_mib
    if trace:  # Its own bookkeeping weighs on the RSS: read RSS from a run without it.
        tracemalloc.start(5)
    started = tracemalloc.take_snapshot() if trace else None
    running = watches.start(rt)
    running.dispatcher.submit = _discard  # type: ignore[method-assign]
    async with asyncio.timeout(600):
        while not rt.unsettled.backlog.listed:
            await asyncio.sleep(0.1)
    listed = tracemalloc.take_snapshot() if trace else None
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    await running.stop()
    await clients.close()
    after = harness.ProcSample.of(os.getpid())
    print(f"unsettled AgentJobs kept whole: {len(rt.unsettled)}")
    print(f"RSS {before_rss:.1f} -> {after.rss_mib:.1f} MiB (peak {after.peak_mib:.1f});")
    if listed is None or started is None:
        return
    print(f"traced: peak {peak:.1f} MiB; held after the lists, by line:")
    for stat in listed.compare_to(started, "lineno")[:top]:
        print(f"  {stat.size_diff / 2**20:7.2f} MiB  {stat.count_diff:8d} blocks  {stat.traceback}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--trace", action="store_true", help="tracemalloc (inflates RSS)")
    args = parser.parse_args(argv)
    asyncio.run(measure(args.namespace, args.top, args.trace))
    return 0


if __name__ == "__main__":
    sys.exit(main())
