"""Answers handed over through the job API: a job's final answer, from its runner.

The in-pod runner (``agentchain agent run``) ends by putting its final answer to
``PUT /api/jobs/{ns}/{name}/answer`` with the job's own token, before its container
exits.  The answer is kept here, one hash per AgentJob incarnation (``keys.answer``),
with the attempt it is for; when that attempt's container has ended, the capture
(``hop/capturing.py``) takes it as the attempt's output instead of reading
``pods/log``, which also carries the transcript the runner writes to stderr.

Rules, all in one script so that two requests cannot interleave:

* **Once per attempt.** A second hand-over for the same attempt is accepted only if it
  is the very same answer (a runner that retried after losing the first answer to a
  timeout); a different one is refused (409): what a job concluded does not change
  after it said so.
* **Attempts only move forward.** An answer for an attempt replaces one for an earlier
  attempt (that attempt's capture is done with it), and one for an earlier attempt than
  the stored one is refused.  The attempt is the caller's word (``AGENT_ATTEMPT``); a job
  token is the same for every attempt of its job, so a pod could claim another attempt
  of its own job, and gains nothing by it: the capture uses an answer only for the
  attempt that ended, and otherwise reads the log as before.
* **Bounded.** At most :data:`ANSWER_MAX_BYTES` of UTF-8 text: the runner keeps the
  end of a longer answer (agents conclude last) and says how long the whole was.  One
  record per job incarnation, deleted once the capture has copied it into the output
  record, and expiring with the longest a job token lives in any case.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import Enum

from redis.asyncio import Redis

from agentchain.store import keys
from agentchain.store.outputs import OUTPUT_MAX_BYTES

ANSWER_MAX_BYTES = OUTPUT_MAX_BYTES // 2
"""At most this much of an answer, as UTF-8: half the output record's cap, because the
answer arrives as a JSON string in a request body the job API caps at 1 MiB, and escapes
grow it."""

# KEYS[1] the answer hash; ARGV = attempt, digest, text, full size, ttl seconds.
# Answers 2 when stored, 1 when the same answer was stored already, 0 when refused.
_HAND_OVER = """
local stored = redis.call('HGET', KEYS[1], 'attempt')
if stored then
  stored = tonumber(stored)
  local attempt = tonumber(ARGV[1])
  if stored > attempt then return 0 end
  if stored == attempt then
    if redis.call('HGET', KEYS[1], 'digest') == ARGV[2] then return 1 end
    return 0
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'attempt', ARGV[1], 'digest', ARGV[2], 'text', ARGV[3],
  'full_size', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 2
"""


class HandedOver(Enum):
    """What became of a hand-over."""

    STORED = "stored"
    SAME = "same"
    """The same answer was stored for this attempt already: nothing changed."""
    REFUSED = "refused"
    """Another answer for this attempt, or an answer for a later attempt, is stored."""


@dataclass(frozen=True, slots=True)
class Answer:
    """An attempt's final answer as handed over: ``text`` is its end when the whole
    (``full_size`` bytes of UTF-8) was longer."""

    attempt: int
    text: str
    full_size: int

    @property
    def data(self) -> bytes:
        return self.text.encode("utf-8")


def digest(text: str, full_size: int) -> str:
    """What tells two hand-overs apart (the text and the size it claims)."""
    return hashlib.sha256(json.dumps([text, full_size]).encode("utf-8")).hexdigest()


class AnswerStore:
    """The answers jobs handed over, one per AgentJob incarnation."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._hand_over = redis.register_script(_HAND_OVER)

    async def hand_over(self, tenant: str, job_name: str, uid: str, answer: Answer) -> HandedOver:
        """Store ``answer`` unless the rules above refuse it."""
        if len(answer.data) > ANSWER_MAX_BYTES:
            raise ValueError(f"an answer is at most {ANSWER_MAX_BYTES} bytes")
        full_size = max(answer.full_size, len(answer.data))
        done = await self._hand_over(
            keys=[keys.answer(tenant, job_name, uid)],
            args=[
                answer.attempt,
                digest(answer.text, full_size),
                answer.text,
                full_size,
                keys.ANSWER_TTL_SECONDS,
            ],
        )
        return {2: HandedOver.STORED, 1: HandedOver.SAME}.get(int(done), HandedOver.REFUSED)

    async def discard(self, tenant: str, job_name: str, uid: str) -> None:
        """Forget the answer once its attempt's capture holds it (the output record is
        what is read from then on, and a late copy of the same PUT finds it captured)."""
        await self._redis.delete(keys.answer(tenant, job_name, uid))

    async def get(self, tenant: str, job_name: str, uid: str, attempt: int) -> Answer | None:
        """The answer handed over for ``attempt``; None when there is none for it."""
        fields = await self._redis.hgetall(keys.answer(tenant, job_name, uid))  # type: ignore[misc]
        try:
            stored = int(fields[b"attempt"])
            if stored != attempt:
                return None
            text = fields[b"text"].decode("utf-8")
            return Answer(stored, text, int(fields[b"full_size"]))
        except (KeyError, ValueError):
            return None  # None handed over (or not a record this code wrote).
