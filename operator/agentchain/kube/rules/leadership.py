"""Leader election over a ``coordination.k8s.io`` Lease: the pure rules, after client-go.

One replica of the operator runs the engine (kopf's handlers, the resync); the others
wait.  Who leads is written in one Lease object: ``holderIdentity``, ``renewTime``,
``leaseDurationSeconds``.  The API server's optimistic concurrency (``resourceVersion``)
makes a claim atomic; these functions decide what to claim and when, and
``kube/electing.py`` does the I/O.  The rules are client-go's ``leaderelection``:

* **Expiry is judged on the follower's own clock**, never on the ``renewTime`` written
  by another machine: a follower notes *when it first saw* the record as it is now
  (:class:`Observation`), and the lease is expired once that record has stayed unchanged
  for ``leaseDurationSeconds`` of the follower's monotonic time.  Clock skew between
  replicas cannot make a live leader look dead.
* **A holder may always renew its own record**, and a process restarted under the same
  identity (the same pod after a crash: the old process is dead) takes its record back
  at once instead of waiting for it to expire.
* **The leader stops acting first** (:func:`fence_open`): it counts its renew deadline
  from the *start* of its last successful renewal, and ``renew_deadline <
  lease_duration`` (:class:`Timing`), so its deadline passes before any follower, which
  starts counting only once it has *seen* that renewal, may take over.  The difference
  absorbs request latency and clock-rate drift.
* A leader that stops cleanly **releases** the Lease (empty holder, one-second
  duration), so a rolling update hands over within one retry period.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, replace

# client-go's JitterFactor: followers poll at retry_period * [1, 1 + JITTER).
JITTER = 1.2
RELEASED_DURATION_SECONDS = 1
MICROTIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class Timing:
    """How long a lease lasts, how long a leader tries to renew, how often anyone tries."""

    lease_duration: float = 10.0
    renew_deadline: float = 7.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        problems = timing_problems(self.lease_duration, self.renew_deadline, self.retry_period)
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def lease_seconds(self) -> int:
        """``leaseDurationSeconds`` as written: whole seconds, never shorter than meant."""
        return max(1, math.ceil(self.lease_duration))


def timing_problems(lease: float, renew: float, retry: float) -> list[str]:
    """What is wrong with a timing, as client-go's ``NewLeaderElector`` checks it."""
    problems = []
    if min(lease, renew, retry) <= 0:
        problems.append("lease duration, renew deadline and retry period must be positive")
    if lease <= renew:
        problems.append(
            f"the lease duration ({lease}s) must exceed the renew deadline ({renew}s):"
            " the leader must stop before a follower may start"
        )
    if renew <= JITTER * retry:
        problems.append(
            f"the renew deadline ({renew}s) must exceed {JITTER} x the retry period"
            f" ({retry}s), or a leader cannot try twice before giving up"
        )
    return problems


@dataclass(frozen=True)
class Record:
    """A Lease's ``spec``, as far as the election reads and writes it."""

    holder: str = ""
    lease_seconds: int = RELEASED_DURATION_SECONDS
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def from_spec(cls, spec: dict[str, object] | None) -> Record:
        spec = spec or {}
        return cls(
            holder=_text(spec.get("holderIdentity")) or "",
            lease_seconds=_int(spec.get("leaseDurationSeconds"), RELEASED_DURATION_SECONDS),
            acquire_time=_text(spec.get("acquireTime")),
            renew_time=_text(spec.get("renewTime")),
            transitions=_int(spec.get("leaseTransitions"), 0),
        )

    def to_spec(self) -> dict[str, object]:
        return {
            "holderIdentity": self.holder or None,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Observation:
    """A record as read, the object's ``resourceVersion``, and when (this process's
    monotonic clock) it was first seen with that version."""

    record: Record
    version: str
    seen_at: float


def observe(previous: Observation | None, record: Record, version: str, now: float) -> Observation:
    """The observation after reading ``record`` at ``version``: the first sighting time is
    kept while the object is unchanged, restarted when it changed."""
    if previous is not None and previous.version == version:
        return previous
    return Observation(record, version, now)


def expires_at(observation: Observation) -> float:
    """When (monotonic) the observed holder's claim lapses if it never renews."""
    return observation.seen_at + observation.record.lease_seconds


def may_claim(observation: Observation, me: str, now: float) -> bool:
    """Whether ``me`` may write itself as holder over what was observed."""
    holder = observation.record.holder
    return not holder or holder == me or now >= expires_at(observation)


def claim(current: Record | None, me: str, timing: Timing, wall: dt.datetime) -> Record:
    """The record ``me`` writes to take (or keep) the lease at wall-clock ``wall``."""
    stamp = microtime(wall)
    if current is None:
        return Record(me, timing.lease_seconds, stamp, stamp, 0)
    if current.holder == me:
        return replace(current, lease_seconds=timing.lease_seconds, renew_time=stamp)
    return Record(me, timing.lease_seconds, stamp, stamp, current.transitions + 1)


def released(current: Record, wall: dt.datetime) -> Record:
    """The record a leader leaves behind when it stops cleanly: anyone may take it."""
    return replace(
        current, holder="", lease_seconds=RELEASED_DURATION_SECONDS, renew_time=microtime(wall)
    )


def still_held_by(current: Record, me: str) -> bool:
    """Whether the Lease as read now still names ``me`` as its holder (so a release of a
    newer copy than this replica kept is still this replica's to make)."""
    return bool(me) and current.holder == me


def fence_open(renewed_at: float | None, timing: Timing, now: float) -> bool:
    """Whether a leader whose last successful renewal *started* at ``renewed_at``
    (monotonic) may still act: strictly before its renew deadline."""
    return renewed_at is not None and now < renewed_at + timing.renew_deadline


def next_attempt(observation: Observation | None, me: str, timing: Timing, now: float) -> float:
    """Seconds a follower waits before trying again: one retry period, or less when
    the observed lease lapses sooner (failover is not rounded up to the next poll)."""
    wait = timing.retry_period
    if observation is not None and not may_claim(observation, me, now):
        wait = min(wait, max(0.0, expires_at(observation) - now))
    return wait


def microtime(wall: dt.datetime) -> str:
    """A ``MicroTime`` as the API server writes it (RFC 3339, microseconds, UTC)."""
    return wall.astimezone(dt.UTC).strftime(MICROTIME_FORMAT)
