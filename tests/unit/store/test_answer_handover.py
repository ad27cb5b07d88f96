"""A hop whose attempt's answer was handed over through the job API, against the
in-process API server and a real Redis.

Aspects covered:
- with the answer handed over for the attempt that ended, the hop reads no ``pods/log``
  and the child's ``<chain-context>`` carries exactly the answer, not the log;
- without one (a ``command`` agent), or with one for another attempt, the log is read
  as before;
- a crash before any of the hop's writes, after the answer was stored, replays to the
  same end as an uninterrupted hop, still without a log read;
- the store's rules: once per attempt (the same answer again is accepted, another is
  refused), attempts only move forward, and the size it says is kept.
"""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.kube import apierrors
from agentchain.store.answers import Answer, AnswerStore, HandedOver
from tests.unit.fakeapi import LOG, FakeApi
from tests.unit.hop.test_hop_write_order import (
    NS,
    SETTINGS,
    api,
    hop,
    kubeconfig,
    seed,
    state,
)

__all__ = ["api", "kubeconfig"]

ANSWER = "The answer, and only the answer.\n"


async def hand_over(api: FakeApi, redis: Redis, text: str = ANSWER, attempt: int = 1) -> None:
    uid = api.objects[("agentjobs", "p")]["metadata"]["uid"]
    done = await AnswerStore(redis).hand_over(
        NS, "p", uid, Answer(attempt, text, len(text.encode()))
    )
    assert done is HandedOver.STORED


def child_context(api: FakeApi) -> str:
    (child,) = [o for o in api.of("agentjobs") if o["metadata"]["name"] != "p"]
    return str(child["spec"]["chainContext"])


@pytest.mark.redis
async def test_a_handed_over_answer_is_the_output_and_no_log_is_read(
    api: FakeApi, redis: Redis
) -> None:
    seed(api)
    await hand_over(api, redis)
    await hop(redis)
    assert api.logs == []
    context = child_context(api)
    assert ANSWER in context and LOG.decode() not in context
    parent = api.objects[("agentjobs", "p")]["status"]
    assert (parent["phase"], parent["result"]) == ("Succeeded", ANSWER)
    uid = api.objects[("agentjobs", "p")]["metadata"]["uid"]
    record = await Runtime.from_client(SETTINGS, redis).outputs.get(NS, "p", uid)
    assert record is not None and record.text == ANSWER and record.capture is not None
    assert await redis.keys("agentchain:answer:*") == []  # The output record holds it now.


@pytest.mark.redis
async def test_without_a_handed_over_answer_the_log_is_read(api: FakeApi, redis: Redis) -> None:
    seed(api)
    await hop(redis)
    assert api.logs == ["p-pod"]
    assert LOG.decode() in child_context(api)


@pytest.mark.redis
async def test_an_answer_for_another_attempt_is_not_this_attempts_output(
    api: FakeApi, redis: Redis
) -> None:
    seed(api)
    await hand_over(api, redis, attempt=2)
    await hop(redis)
    assert api.logs == ["p-pod"]
    assert ANSWER not in child_context(api)


@pytest.mark.redis
async def test_a_crash_after_the_answer_replays_to_the_same_end(api: FakeApi, redis: Redis) -> None:
    seed(api)
    await hand_over(api, redis)
    await hop(redis)
    expected, writes = state(api), len(api.writes)
    for crash_at in range(writes):
        await redis.flushdb()
        api.objects.clear()
        api.writes.clear()
        seed(api)
        await hand_over(api, redis)
        api.fail_at = crash_at
        with pytest.raises(apierrors.Forbidden):
            await hop(redis)
        api.fail_at = None
        await hop(redis)
        assert state(api) == expected, f"crashed before write {crash_at}"
        assert ANSWER in child_context(api)
    assert api.logs == []


@pytest.mark.redis
async def test_an_answer_is_handed_over_once_per_attempt(redis: Redis) -> None:
    store = AnswerStore(redis)

    async def put(text: str, attempt: int, size: int | None = None) -> HandedOver:
        answer = Answer(attempt, text, size if size is not None else len(text))
        return await store.hand_over(NS, "p", "uid-1", answer)

    assert await put("first", 1) is HandedOver.STORED
    assert await put("first", 1) is HandedOver.SAME  # A runner's retry.
    assert await put("other", 1) is HandedOver.REFUSED
    assert await put("first", 1, size=99) is HandedOver.REFUSED  # Another claimed size.
    assert await put("second", 2, size=10) is HandedOver.STORED
    assert await put("late", 1) is HandedOver.REFUSED
    assert await store.get(NS, "p", "uid-1", 1) is None
    assert await store.get(NS, "p", "uid-1", 2) == Answer(2, "second", 10)
