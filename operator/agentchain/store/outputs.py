"""Captured container output of each job (SPEC §2), bounded and with an expiry.

The operator captures a job's output when its container ends, before the pod can be
garbage-collected, and a child's ``<chain-context>`` is built from it later, possibly
after an operator restart; so the output must live outside the pod and outside the
operator's memory. Bounds:

* at most :data:`OUTPUT_MAX_BYTES` of the *end* of the output is kept, because agents print
  their conclusion last (SPEC §2's default is the last 4,000 characters);
* the first :data:`OUTPUT_HEAD_BYTES` are kept separately, so a step that asks for the
  *first* 4,000 characters still gets them when the middle was dropped;
* cuts never split a UTF-8 character, and bytes that are not UTF-8 at all are replaced
  rather than refused: an agent printing binary garbage must not lose its whole result.

When output could not be captured at all (pod gone, log endpoint failing), the caller
records that with :meth:`OutputStore.put_unavailable`, so readers see a reason instead of
an empty string.

Records are per AgentJob *incarnation* (namespace, name, uid; ``keys.output``): a job
deleted and created again under the same name starts with no capture, so it can never
end with the previous object's output and exit code.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from agentchain.store import keys

OUTPUT_MAX_BYTES = 1024 * 1024
OUTPUT_HEAD_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class Capture:
    """How one attempt's container ended, stored with its output in one write.

    Once it is in Redis the ending is decided: a replay after a crash (when the pod
    may be gone) reads it back instead of deciding again from what is left, so the
    engine can act on the ending before the job's status records it.
    """

    attempt: int
    exit_code: int | None
    pod: str | None
    deadline: bool
    stop: dict[str, str | None] | None = None
    """Set when a stop decided the ending (``flow/stoprecords.py``): who, why, successor."""
    prepare_exit: int | None = None
    """The ``workspace-prepare`` container's exit code when it failed (the agent never
    ran): the ending is then ``WorkspacePrepareFailed``."""


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """A job's captured output; ``text`` is the tail when ``truncated``.

    ``head`` is the beginning (at most ``OUTPUT_HEAD_BYTES``), "" when it is unknown.
    """

    text: str
    full_size: int
    truncated: bool
    captured_at: float
    head: str = ""
    unavailable_reason: str | None = None
    capture: Capture | None = None
    workspace: str | None = None
    """What the job changed in its chain's workspace, rendered and bounded
    (``workspaces/rules/stepchanges.changes_section``); None for a job without a workspace."""

    @property
    def available(self) -> bool:
        return self.unavailable_reason is None


def _is_continuation(byte: int) -> bool:
    return byte & 0b1100_0000 == 0b1000_0000


def utf8_tail(data: bytes, limit: int) -> bytes:
    """The last ``limit`` bytes at most, starting on a character boundary."""
    if len(data) <= limit:
        return data
    tail = data[len(data) - limit :]
    skip = 0
    # A UTF-8 character has at most three continuation bytes; more means not UTF-8.
    while skip < 3 and skip < len(tail) and _is_continuation(tail[skip]):
        skip += 1
    return tail[skip:]


def utf8_head(data: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes at most, ending on a character boundary."""
    if len(data) <= limit:
        return data
    # The cut splits a character exactly when the first byte left out continues one;
    # then step back to that character's lead byte and cut before it.
    cut = limit
    while cut > limit - 3 and cut > 0 and _is_continuation(data[cut]):
        cut -= 1
    return data[:cut] if not _is_continuation(data[cut]) else data[:limit]


def _head_text(output: bytes) -> str:
    return utf8_head(output, OUTPUT_HEAD_BYTES).decode("utf-8", errors="replace")


def captured(
    output: bytes, *, full_size: int | None = None, capture: Capture | None = None
) -> OutputRecord:
    """The record of a capture, before it is stored (the caller may use its text
    while the write is under way)."""
    size = max(full_size or 0, len(output))
    already_cut = size > len(output)
    return OutputRecord(
        text=utf8_tail(output, OUTPUT_MAX_BYTES).decode("utf-8", errors="replace"),
        full_size=size,
        truncated=size > OUTPUT_MAX_BYTES or already_cut,
        captured_at=time.time(),
        # The real beginning is unknown when the caller only had the tail.
        head="" if already_cut else _head_text(output),
        capture=capture,
    )


def unavailable(reason: str, *, capture: Capture | None = None) -> OutputRecord:
    """The record saying that the output could not be captured, and why."""
    return OutputRecord(
        text="",
        full_size=0,
        truncated=False,
        captured_at=time.time(),
        unavailable_reason=reason,
        capture=capture,
    )


class OutputStore:
    """Captured outputs, one hash per (tenant, job, uid), expiring after a week."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def put(
        self,
        tenant: str,
        job_name: str,
        uid: str,
        output: bytes,
        *,
        full_size: int | None = None,
        capture: Capture | None = None,
    ) -> OutputRecord:
        """Store a capture; ``full_size`` says how big the output was when ``output``
        is already only its tail (a log read with a byte limit)."""
        record = captured(output, full_size=full_size, capture=capture)
        await self.write(tenant, job_name, uid, record)
        return record

    async def put_unavailable(
        self,
        tenant: str,
        job_name: str,
        uid: str,
        reason: str,
        *,
        capture: Capture | None = None,
    ) -> OutputRecord:
        """Record that the output could not be captured, and why."""
        record = unavailable(reason, capture=capture)
        await self.write(tenant, job_name, uid, record)
        return record

    async def write(self, tenant: str, job_name: str, uid: str, record: OutputRecord) -> None:
        """Store a record made by :func:`captured` or :func:`unavailable`."""
        key = keys.output(tenant, job_name, uid)
        mapping = fields(record)
        async with self._redis.pipeline(transaction=True) as pipe:
            # Replace the whole hash so no field of an older capture survives.
            pipe.delete(key)
            pipe.hset(key, mapping=mapping)
            pipe.expire(key, keys.OUTPUT_TTL_SECONDS)
            await pipe.execute()

    async def get_capture(self, tenant: str, job_name: str, uid: str) -> Capture | None:
        """Only the stored ending: the output may be a megabyte."""
        key = keys.output(tenant, job_name, uid)
        raw = await self._redis.hget(key, "capture")  # type: ignore[misc]
        return _capture(raw)

    async def get(self, tenant: str, job_name: str, uid: str) -> OutputRecord | None:
        fields = await self._redis.hgetall(keys.output(tenant, job_name, uid))  # type: ignore[misc]
        if not fields:
            return None
        return OutputRecord(
            text=fields[b"text"].decode("utf-8"),
            full_size=int(fields[b"full_size"]),
            truncated=fields[b"truncated"] == b"1",
            captured_at=float(fields[b"captured_at"]),
            head=fields[b"head"].decode("utf-8"),
            unavailable_reason=fields[b"unavailable"].decode("utf-8") or None,
            capture=_capture(fields.get(b"capture")),
            workspace=_text_or_none(fields.get(b"workspace")),
        )


def fields(record: OutputRecord) -> dict[str | bytes, bytes | float | int | str]:
    """The hash fields of a record, as :meth:`OutputStore.write` stores them."""
    mapping: dict[str | bytes, bytes | float | int | str] = {
        "text": record.text,
        "head": record.head,
        "full_size": record.full_size,
        "truncated": int(record.truncated),
        "captured_at": repr(record.captured_at),
        "unavailable": record.unavailable_reason or "",
    }
    if record.capture is not None:
        capture = dataclasses.asdict(record.capture)
        if capture["stop"] is None:
            del capture["stop"]  # Records of natural endings read as they always did.
        mapping["capture"] = json.dumps(capture)
    if record.workspace is not None:
        mapping["workspace"] = record.workspace
    return mapping


def _text_or_none(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="replace")


def parse_capture(raw: bytes | None) -> Capture | None:
    """The ``capture`` field as stored (None when absent)."""
    return _capture(raw)


def _capture(raw: bytes | None) -> Capture | None:
    if raw is None:
        return None  # Stored before endings were, or never captured from a pod.
    data = json.loads(raw)
    return Capture(
        attempt=int(data["attempt"]),
        exit_code=None if data["exit_code"] is None else int(data["exit_code"]),
        pod=data["pod"],
        deadline=bool(data["deadline"]),
        stop=data.get("stop") if isinstance(data.get("stop"), dict) else None,
        prepare_exit=_int_or_none(data.get("prepare_exit")),
    )


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
