"""stop_tasks: a background task stops even when a library swallowed a cancel.

Aspects covered: a task that swallows its first cancels still ends; the cancel lost
by redis-py's sends on Python 3.11 (a client made by ``store.connecting``, as the
operator's) is really lost with a plain cancel on this interpreter, and never with
``stop_tasks``; exceptions of stopped tasks are retrieved, not raised.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from agentchain.cancelling import stop_tasks
from agentchain.store import connecting

ROUNDS = 20


async def test_a_task_that_swallows_cancels_still_stops() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed > 3:
                    raise

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(stop_tasks([task]), 5)
    assert task.cancelled() and swallowed == 4


async def test_exceptions_of_stopped_tasks_are_retrieved() -> None:
    async def broken() -> None:
        raise RuntimeError("boom")

    done = asyncio.create_task(broken())
    await asyncio.sleep(0)
    await stop_tasks([done])  # Neither raises nor leaves "exception never retrieved".
    assert done.done()


async def _cancel_loops(redis_url: str, stop_with_stop_tasks: bool) -> int:
    """How many of ROUNDS loops over a Redis script outlived one stop."""
    client = connecting.connect(redis_url)
    script = client.register_script("return redis.call('TIME')")
    lost = 0
    try:
        for i in range(ROUNDS):

            async def loop() -> None:
                while True:
                    await script()

            task = asyncio.create_task(loop())
            await asyncio.sleep((i % 10) / 2000)
            if stop_with_stop_tasks:
                await asyncio.wait_for(stop_tasks([task]), 30)  # A guard against a hang only.
                continue
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=0.2)
            if not done:
                lost += 1
                await stop_tasks([task])
    finally:
        await client.aclose()
    return lost


@pytest.mark.redis
async def test_redis_sends_lose_cancels_and_stop_tasks_does_not(redis_url: str) -> None:
    if sys.version_info < (3, 12):
        # The hazard itself, so this test fails if it is ever gone (and the module with it).
        assert await _cancel_loops(redis_url, stop_with_stop_tasks=False) > 0
    assert await _cancel_loops(redis_url, stop_with_stop_tasks=True) == 0
