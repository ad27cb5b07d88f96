"""With the ``OTEL_*`` variables unset, tracing costs nothing (``traces/recording``).

Aspects covered:
- a fresh operator process with no ``OTEL_*`` variables builds no exporter: the engine's
  start-up gets no exporter task, the OTLP exporter's module is never even imported, and
  recording a span writes nothing to Redis; the same process with an endpoint set does
  start one (so the check can tell the two apart).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from redis.asyncio import Redis

import agentchain
from agentchain.store import keys

pytestmark = pytest.mark.redis
SOURCE = os.path.dirname(os.path.dirname(agentchain.__file__))
PROBE = """
import asyncio, json, sys
from redis.asyncio import Redis
from agentchain.traces.recording import Traces
from agentchain.traces.rules import spans

async def main():
    redis = Redis.from_url(sys.argv[1])
    traces = Traces(redis)
    task = traces.start_exporting()
    await traces.record(spans.root_span("c1", "root", 1, 2))
    await asyncio.sleep(0.2)  # Long enough for a started exporter to build its exporter.
    keys = await redis.keys(sys.argv[2] + "trace:*")
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await redis.aclose()
    loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry.exporter"))
    print(json.dumps({"task": task is not None, "keys": len(keys), "loaded": loaded}))

asyncio.run(main())
"""


def _probe(redis_url: str, extra: dict[str, str]) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = SOURCE
    done = subprocess.run(
        [sys.executable, "-c", PROBE, redis_url, keys.ROOT_PREFIX],
        env=env | extra,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def test_without_otel_variables_no_exporter_is_built(redis: Redis, redis_url: str) -> None:
    off = _probe(redis_url, {})
    assert off == {"task": False, "keys": 0, "loaded": []}, off
    on = _probe(redis_url, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert on["task"] is True and on["keys"] != 0 and on["loaded"], on
