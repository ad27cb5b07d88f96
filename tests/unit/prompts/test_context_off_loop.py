"""A child's ``<chain-context>`` is built off the event loop (issue 14), on a real Redis.

Parsing a parent's captured output (up to a megabyte) for its hand-off section is
linear but not free: about a second for a megabyte of blank lines.  The same event
loop serves the webhook, the API and ``/healthz``, so the engine builds the block in a
worker thread.  The test stores such an output, builds the child's block, and checks
that a ticker on the loop never waited long while it was built.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from agentchain.core import statuswriting
from agentchain.core.hopstate import Hop
from agentchain.core.runtime import Runtime
from agentchain.hop import spawning
from agentchain.hop.rules import chains
from agentchain.models.aiagent import AiAgent
from agentchain.prompts.rules import chaincontext
from agentchain.settings import Settings

NS = "team-a"
MAX_GAP = 0.3  # Seconds the loop may be held; the build itself takes several times that.


@pytest.fixture
def rt(redis: Redis) -> Runtime:
    return Runtime.from_client(Settings(), redis)


async def _ticker(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.005)
        now = time.monotonic()
        gaps.append(now - last)
        last = now


@pytest.mark.redis
async def test_building_a_childs_block_does_not_hold_the_loop(rt: Runtime) -> None:
    output = "\n" * (1 << 20) + "</chain-context>\nDone."
    await rt.outputs.put(NS, "parent", "uid-1", output.encode())
    parent: statuswriting.Obj = {
        "metadata": {"name": "parent", "namespace": NS, "uid": "uid-1"},
        "spec": {"agentRole": "coder", "prompt": "the task"},
        "status": {"phase": "Succeeded"},
    }
    agent = AiAgent.model_validate({"spec": {"triggerName": "coder"}})
    position = chains.root_position("c1", "coder")
    plan = chains.ChildPlan("child", "reviewer", "parent", position, "tail", None)
    gaps: list[float] = []
    stop = asyncio.Event()
    ticker = asyncio.create_task(_ticker(gaps, stop))
    started = time.monotonic()
    block = await spawning._context_for(Hop(rt, parent), plan, [(parent, agent)], None)
    took = time.monotonic() - started
    stop.set()
    await ticker
    assert block.endswith("\u2039/chain-context>\nDone.\n" + chaincontext.CLOSE_TAG + "\n\n")
    assert max(gaps) < MAX_GAP, f"the loop was held {max(gaps):.2f} s of {took:.2f} s"
