"""Stop claims and chain stops against a real Redis (flow/stoprecords.py).

Aspects covered:
- a stop claims an attempt that has no recorded ending: the record (output, capture
  with the stop) is stored as the natural capture would be, with the output TTL;
- a natural ending recorded first wins: the claim answers it and changes nothing;
- a second stop of the same attempt answers the first one (the first writer wins);
- an earlier attempt's ending does not hold a later attempt's stop back;
- another object of the same name (another uid) claims its own attempt, not the old one's;
- many claims racing with one natural capture: exactly one ending is stored;
- a chain stop is recorded once, read back, and per tenant.
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from agentchain.flow.stoprecords import StopStore
from agentchain.store import keys
from agentchain.store.outputs import Capture, OutputRecord, OutputStore, captured

pytestmark = pytest.mark.redis
T = "team-a"
UID = "uid-1"


def _stop_record(attempt: int, by: str = "api", text: bytes = b"so far") -> OutputRecord:
    capture = Capture(
        attempt, None, "pod-1", False, stop={"by": by, "reason": "", "successor": None}
    )
    return captured(text, capture=capture)


async def test_a_stop_claims_an_attempt_without_an_ending(redis: Redis) -> None:
    stops, outputs = StopStore(redis), OutputStore(redis)
    assert await stops.claim(T, "job-1", UID, _stop_record(1)) is None
    record = await outputs.get(T, "job-1", UID)
    assert record is not None and record.text == "so far"
    assert record.capture is not None and record.capture.stop == {
        "by": "api",
        "reason": "",
        "successor": None,
    }
    ttl = await redis.ttl(keys.output(T, "job-1", UID))
    assert 0 < ttl <= keys.OUTPUT_TTL_SECONDS


async def test_a_natural_end_recorded_first_wins(redis: Redis) -> None:
    stops, outputs = StopStore(redis), OutputStore(redis)
    await outputs.put(T, "job-2", UID, b"done", capture=Capture(1, 0, "pod-1", False))
    won = await stops.claim(T, "job-2", UID, _stop_record(1))
    assert won == Capture(1, 0, "pod-1", False)
    record = await outputs.get(T, "job-2", UID)
    assert record is not None and record.text == "done" and record.capture == won


async def test_the_first_stop_of_an_attempt_wins(redis: Redis) -> None:
    stops = StopStore(redis)
    assert await stops.claim(T, "job-3", UID, _stop_record(1, "api")) is None
    won = await stops.claim(T, "job-3", UID, _stop_record(1, "annotation"))
    assert won is not None and won.stop is not None and won.stop["by"] == "api"


async def test_an_earlier_attempts_end_does_not_hold_a_stop_back(redis: Redis) -> None:
    stops, outputs = StopStore(redis), OutputStore(redis)
    await outputs.put(T, "job-4", UID, b"failed", capture=Capture(1, 3, "pod-1", False))
    assert await stops.claim(T, "job-4", UID, _stop_record(2)) is None
    record = await outputs.get(T, "job-4", UID)
    assert record is not None and record.capture is not None and record.capture.attempt == 2


async def test_the_previous_objects_ending_does_not_answer_a_new_ones_stop(
    redis: Redis,
) -> None:
    stops, outputs = StopStore(redis), OutputStore(redis)
    await outputs.put(T, "same", "uid-first", b"FIRST RUN", capture=Capture(1, 0, "p", False))
    assert await stops.claim(T, "same", "uid-second", _stop_record(1)) is None


async def test_racing_stops_store_exactly_one_ending(redis: Redis) -> None:
    stops = StopStore(redis)
    answers = await asyncio.gather(
        *(stops.claim(T, "job-5", UID, _stop_record(1, f"s{i}")) for i in range(20))
    )
    winners = [a for a in answers if a is None]
    assert len(winners) == 1
    firsts = {a.stop["by"] for a in answers if a is not None and a.stop is not None}
    assert len(firsts) == 1


async def test_a_chain_stop_is_recorded_once_per_tenant(redis: Redis) -> None:
    stops = StopStore(redis)
    assert await stops.chain_stopped(T, "c1") is None
    assert await stops.stop_chain(T, "c1", "api", "why") is True
    assert await stops.stop_chain(T, "c1", "annotation", "again") is False
    assert await stops.chain_stopped(T, "c1") == {"by": "api", "reason": "why", "successor": None}
    assert await stops.chain_stopped("team-b", "c1") is None
    assert 0 < await redis.ttl(keys.chain_stop(T, "c1")) <= keys.CHAIN_TTL_SECONDS
