"""Captured job output against a real Redis (SPEC §2).

Aspects covered:
- round trip of a small output: text, full size, not truncated, capture time;
- over 1 MiB: the last 1 MiB is kept, the first bytes kept as ``head``, cut on UTF-8
  boundaries (property-based for the cutting helpers), ``truncated`` and ``full_size``,
  also when the caller could only read the tail and passes the real size;
- output that is not UTF-8 is kept with replacement characters, not refused;
- "could not be captured" is a visible reason, not an empty string;
- expiry set to a week, and a re-capture leaves no stale field behind; tenant isolation;
- the ending (attempt, exit code, pod, deadline) is stored with the output in one write
  and read back alone; a re-capture without one drops the old ending;
- records are per AgentJob incarnation: another uid under the same name (deleted and
  created again) finds no capture, and a key without a uid is refused.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis

from agentchain.store import keys
from agentchain.store.outputs import (
    OUTPUT_HEAD_BYTES,
    OUTPUT_MAX_BYTES,
    Capture,
    OutputStore,
    utf8_head,
    utf8_tail,
)

T = "team-a"
UID = "uid-1"


@pytest.fixture
def store(redis: Redis) -> OutputStore:
    return OutputStore(redis)


@pytest.mark.redis
async def test_small_output_round_trips(store: OutputStore) -> None:
    before = time.time()
    written = await store.put(T, "job-1", UID, "Verdict: ok ✓\n".encode())
    read = await store.get(T, "job-1", UID)
    assert read == written
    assert read.text == "Verdict: ok ✓\n" and read.head == read.text
    assert read.full_size == len("Verdict: ok ✓\n".encode())
    assert not read.truncated and read.available
    assert before <= read.captured_at <= time.time()


@pytest.mark.redis
async def test_missing_output_is_none(store: OutputStore) -> None:
    assert await store.get(T, "never-ran", UID) is None


@pytest.mark.redis
async def test_large_output_keeps_the_end_on_a_character_boundary(store: OutputStore) -> None:
    # 3-byte characters so that 1 MiB (not a multiple of 3) falls inside one of them.
    output = b"START" + "€".encode() * (OUTPUT_MAX_BYTES // 3 + 1000) + b"THE END"
    record = await store.put(T, "big", UID, output)
    assert record.truncated and record.full_size == len(output)
    raw = record.text.encode()
    assert len(raw) <= OUTPUT_MAX_BYTES and OUTPUT_MAX_BYTES - len(raw) < 3
    assert record.text.endswith("€THE END") and "\ufffd" not in record.text
    assert record.head.startswith("START€") and len(record.head.encode()) <= OUTPUT_HEAD_BYTES
    assert await store.get(T, "big", UID) == record


@pytest.mark.redis
async def test_a_tail_read_by_the_caller_records_the_real_size(store: OutputStore) -> None:
    record = await store.put(T, "tail", UID, b"...the end", full_size=5_000_000)
    assert (record.text, record.full_size, record.truncated) == ("...the end", 5_000_000, True)
    assert record.head == ""
    assert await store.get(T, "tail", UID) == record


@pytest.mark.redis
async def test_non_utf8_output_is_kept_with_replacements(store: OutputStore) -> None:
    record = await store.put(T, "bin", UID, b"ok \xff\xfe end")
    assert record.text == "ok \ufffd\ufffd end"


@pytest.mark.redis
async def test_uncapturable_output_is_a_visible_reason(store: OutputStore) -> None:
    await store.put_unavailable(T, "gone", UID, "pod deleted before its log could be read")
    record = await store.get(T, "gone", UID)
    assert record is not None and not record.available
    assert record.unavailable_reason == "pod deleted before its log could be read"


@pytest.mark.redis
async def test_output_expires_after_a_week_and_recapture_replaces_all(
    store: OutputStore, redis: Redis
) -> None:
    await store.put_unavailable(T, "job", UID, "log endpoint failed")
    await store.put(T, "job", UID, b"second try")
    record = await store.get(T, "job", UID)
    assert record is not None and record.available and record.text == "second try"
    ttl = await redis.ttl(keys.output(T, "job", UID))
    assert keys.OUTPUT_TTL_SECONDS - 5 < ttl <= keys.OUTPUT_TTL_SECONDS


@pytest.mark.redis
async def test_the_ending_is_stored_with_the_output(store: OutputStore) -> None:
    assert await store.get_capture(T, "job", UID) is None
    ended = Capture(attempt=2, exit_code=3, pod="job-a2-x1", deadline=False)
    await store.put(T, "job", UID, b"failed twice", capture=ended)
    assert await store.get_capture(T, "job", UID) == ended
    record = await store.get(T, "job", UID)
    assert record is not None and record.capture == ended and record.text == "failed twice"

    lost = Capture(attempt=3, exit_code=None, pod=None, deadline=True)
    await store.put_unavailable(T, "job", UID, "deadline exceeded", capture=lost)
    assert await store.get_capture(T, "job", UID) == lost

    unprepared = Capture(attempt=4, exit_code=None, pod=None, deadline=False, prepare_exit=4)
    await store.put_unavailable(T, "job", UID, "clone refused", capture=unprepared)
    assert await store.get_capture(T, "job", UID) == unprepared

    await store.put(T, "job", UID, b"no ending")  # A whole-hash replace: nothing stale left.
    assert await store.get_capture(T, "job", UID) is None


@pytest.mark.redis
async def test_outputs_are_per_tenant(store: OutputStore) -> None:
    await store.put("team-a", "job", UID, b"a")
    assert await store.get("team-b", "job", UID) is None


@given(text=st.text(max_size=40), limit=st.integers(min_value=0, max_value=120))
def test_utf8_cuts_never_split_a_character(text: str, limit: int) -> None:
    data = text.encode()
    head, tail = utf8_head(data, limit), utf8_tail(data, limit)
    assert data.startswith(head.decode().encode()) and data.endswith(tail.decode().encode())
    assert len(head) <= limit and len(tail) <= limit
    # At most one character (≤ 3 bytes short of the limit) is given up at the cut.
    assert min(len(data), limit) - len(head) <= 3
    assert min(len(data), limit) - len(tail) <= 3


@pytest.mark.redis
async def test_a_new_object_of_the_same_name_starts_with_no_capture(store: OutputStore) -> None:
    ended = Capture(attempt=1, exit_code=0, pod="same-name-x1", deadline=False)
    await store.put(T, "same-name", "uid-first", b"FIRST RUN", capture=ended)
    assert await store.get(T, "same-name", "uid-second") is None
    assert await store.get_capture(T, "same-name", "uid-second") is None
    first = await store.get(T, "same-name", "uid-first")
    assert first is not None and first.text == "FIRST RUN"


def test_a_record_of_one_run_refuses_an_empty_uid() -> None:
    with pytest.raises(ValueError, match="uid"):
        keys.output(T, "job", "")
    with pytest.raises(ValueError, match="uid"):
        keys.job_anchor(T, "job", "")
