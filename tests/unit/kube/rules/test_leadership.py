"""Leader election's pure rules (``kube/rules/leadership.py``), client-go's semantics.

Aspects covered:
- timing: the lease outlasts the renew deadline, which outlasts a jittered retry period;
  anything else is refused with a sentence saying why;
- expiry is judged on the follower's clock from when it first saw the record, never
  from the record's own timestamps; a changed record restarts the count;
- a free or own record may always be claimed; another holder's only once lapsed;
- claims: first claim, renewal (acquire time and transitions kept), takeover
  (transitions counted), release (empty holder, one second);
- the fence closes at the renew deadline, before any follower may claim (property);
- a follower waits at most one retry period, less when the lease lapses sooner;
- Lease specs round-trip, and nonsense in a spec reads as defaults.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.kube.rules import leadership
from agentchain.kube.rules.leadership import Observation, Record, Timing

WALL = dt.datetime(2026, 11, 25, 1, 2, 3, 456789, tzinfo=dt.UTC)
STAMP = "2026-11-25T01:02:03.456789Z"
T = Timing(10.0, 7.0, 2.0)


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "words"),
    [
        (7, 7, 2, "must exceed the renew deadline"),
        (5, 7, 2, "must exceed the renew deadline"),
        (10, 2.4, 2, "1.2 x the retry period"),
        (10, 7, 0, "must be positive"),
    ],
)
def test_bad_timing_is_refused_with_the_reason(
    lease: float, renew: float, retry: float, words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        Timing(lease, renew, retry)


def test_default_timing_fails_over_within_fifteen_seconds() -> None:
    # Worst case from a leader's death: its last renewal, seen a jittered retry later,
    # then the whole lease: the follower wakes exactly at expiry (next_attempt).
    timing = Timing()
    assert timing.retry_period * leadership.JITTER + timing.lease_duration < 15
    assert timing.lease_seconds == 10


def test_lease_seconds_round_up() -> None:
    assert Timing(2.5, 2.0, 0.5).lease_seconds == 3


def test_expiry_counts_from_the_first_sighting_of_a_version() -> None:
    record = Record("other", 10)
    first = leadership.observe(None, record, "5", now=100.0)
    again = leadership.observe(first, record, "5", now=104.0)
    assert again is first
    assert not leadership.may_claim(again, "me", now=109.9)
    assert leadership.may_claim(again, "me", now=110.0)
    renewed = leadership.observe(again, Record("other", 10, renew_time="later"), "6", now=109.0)
    assert renewed.seen_at == 109.0
    assert not leadership.may_claim(renewed, "me", now=110.0)


def test_record_timestamps_are_never_trusted() -> None:
    # A renewTime from the distant past (a skewed clock) does not make the lease lapse.
    stale = Record("other", 10, renew_time="1970-01-01T00:00:00.000000Z")
    seen = leadership.observe(None, stale, "1", now=50.0)
    assert not leadership.may_claim(seen, "me", now=55.0)


@pytest.mark.parametrize("holder", ["", "me"])
def test_free_or_own_record_may_be_claimed_at_once(holder: str) -> None:
    seen = leadership.observe(None, Record(holder, 10), "1", now=0.0)
    assert leadership.may_claim(seen, "me", now=0.0)


def test_first_claim() -> None:
    assert leadership.claim(None, "me", T, WALL) == Record("me", 10, STAMP, STAMP, 0)


def test_renewal_keeps_acquire_time_and_transitions() -> None:
    mine = Record("me", 10, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:05.000000Z", 3)
    renewed = leadership.claim(mine, "me", T, WALL)
    assert renewed == Record("me", 10, mine.acquire_time, STAMP, 3)


def test_takeover_counts_a_transition() -> None:
    theirs = Record("other", 10, "2026-01-01T00:00:00.000000Z", "x", 3)
    assert leadership.claim(theirs, "me", T, WALL) == Record("me", 10, STAMP, STAMP, 4)


def test_release_frees_the_lease_for_the_next_try() -> None:
    mine = Record("me", 10, "a", "b", 2)
    free = leadership.released(mine, WALL)
    assert free == Record("", 1, "a", STAMP, 2)
    assert leadership.may_claim(leadership.observe(None, free, "9", 0.0), "other", now=0.0)


def test_fence_closes_at_the_renew_deadline() -> None:
    assert leadership.fence_open(100.0, T, now=106.99)
    assert not leadership.fence_open(100.0, T, now=107.0)
    assert not leadership.fence_open(None, T, now=0.0)


@given(
    lease=st.floats(1.0, 60.0),
    renew_share=st.floats(0.5, 0.95),
    retry_share=st.floats(0.05, 0.8),
    latency=st.floats(0.0, 5.0),
    skew=st.floats(-1e6, 1e6),
)
def test_the_old_leader_stops_before_anyone_may_start(
    lease: float, renew_share: float, retry_share: float, latency: float, skew: float
) -> None:
    """Whatever the latency of the renewal and whatever the follower's clock reads,
    the leader's fence is closed before the follower's first possible claim."""
    renew = lease * renew_share
    retry = renew * retry_share / leadership.JITTER
    timing = Timing(lease, renew, retry)
    started = 1000.0  # The leader's successful renewal starts (leader's clock)...
    seen = started + latency + skew  # ...and is first seen by the follower (its clock).
    observation = leadership.observe(None, Record("leader", timing.lease_seconds), "7", seen)
    follower_may_start = leadership.expires_at(observation) - skew  # In the leader's clock.
    leader_stops = started + renew
    assert leader_stops < follower_may_start
    assert not leadership.fence_open(started, timing, now=follower_may_start)


def test_a_follower_wakes_when_the_lease_lapses() -> None:
    seen = leadership.observe(None, Record("other", 10), "1", now=100.0)
    assert leadership.next_attempt(seen, "me", T, now=100.0) == 2.0
    assert leadership.next_attempt(seen, "me", T, now=109.5) == pytest.approx(0.5)
    assert leadership.next_attempt(None, "me", T, now=0.0) == 2.0


def test_spec_round_trip_and_nonsense() -> None:
    record = Record("me", 10, STAMP, STAMP, 4)
    assert Record.from_spec(record.to_spec()) == record
    weird = {"holderIdentity": 7, "leaseDurationSeconds": "ten", "leaseTransitions": True}
    assert Record.from_spec(weird) == Record()
    assert Record.from_spec(None) == Record()
    assert Record("").to_spec()["holderIdentity"] is None


def test_observation_is_plain_data() -> None:
    assert Observation(Record(), "1", 0.0) == Observation(Record(), "1", 0.0)


def test_a_lease_is_still_held_only_by_the_replica_it_names() -> None:
    mine = leadership.Record(holder="pod-0")
    assert leadership.still_held_by(mine, "pod-0")
    assert not leadership.still_held_by(mine, "pod-1")
    assert not leadership.still_held_by(leadership.Record(holder=""), "")
