"""Concurrency-group admission against a real Redis (flow/slots.py).

Aspects covered:
- ``queue``: a burst of simultaneous admissions never admits more than the limit; the
  others wait, and releases hand the slots out strictly by ticket, whatever order the
  admissions arrived in; a repeated admission of a holder is admitted again (replay);
- an early ``enqueue`` (the webhook) keeps an earlier ticket ahead of a later job the
  engine sees first: that later job is queued and the earlier one answered as promoted;
- ``refuse``: a burst admits exactly the limit, refuses the rest; a release frees a slot;
- ``cancel-in-progress``: a newer chain displaces the oldest holder (answered as a
  victim with its job); an older chain arriving after a newer one is the stale one;
- release: idempotent, of an unknown chain answers nothing; a chain's group is kept
  until it is released; groups and tenants are listed for the repair;
- every key has the flow TTL.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from redis.asyncio import Redis

from agentchain.flow.rules import concurrency
from agentchain.flow.rules.concurrency import Admitted, Queued, Refused, Superseded
from agentchain.flow.slots import AdmissionStore
from agentchain.store import keys

pytestmark = pytest.mark.redis
T, G = "team-a", "acme/webapp#42"


async def _admit(
    store: AdmissionStore,
    i: int,
    *,
    limit: int = 1,
    policy: str = "queue",
    ticket: int | None = None,
) -> concurrency.Verdict:
    answer = await store.admit(
        T,
        G,
        chain=f"c{i}",
        job=f"j{i}",
        ticket=i if ticket is None else ticket,
        limit=limit,
        policy=policy,
    )
    return concurrency.verdict(answer, limit)


@pytest.mark.parametrize("limit", [1, 3])
async def test_a_burst_never_over_admits_and_slots_go_out_by_ticket(
    redis: Redis, limit: int
) -> None:
    store = AdmissionStore(redis)
    order = list(range(1, 31))
    random.Random(limit).shuffle(order)
    verdicts = await asyncio.gather(*(_admit(store, i, limit=limit) for i in order))
    admitted = [i for i, v in zip(order, verdicts, strict=True) if isinstance(v, Admitted)]
    promoted = [p for v in verdicts if isinstance(v, Admitted | Queued) for p in v.promoted]
    holders = await store.holders(T, G)
    assert len(holders) == limit and len(admitted) + len(promoted) == limit
    ran = sorted(int(c[1:]) for c, _, _ in holders)
    while len(ran) < 30:
        oldest = min(int(c[1:]) for c, _, _ in await store.holders(T, G))
        for chain, job in await store.release(T, f"c{oldest}"):
            assert job == "j" + chain[1:]
            ran.append(int(chain[1:]))
        assert len(await store.holders(T, G)) <= limit
    # The first arrivals took the free slots; whatever order the others arrived in,
    # the queue handed the slots out by ticket.
    assert ran[limit:] == sorted(ran[limit:]) and sorted(ran) == list(range(1, 31))


async def test_a_holder_admitted_again_is_admitted(redis: Redis) -> None:
    store = AdmissionStore(redis)
    assert await _admit(store, 1) == Admitted()
    assert await _admit(store, 2) == Queued(position=1)
    assert await _admit(store, 1) == Admitted()
    assert await _admit(store, 2) == Queued(position=1)


async def test_an_early_enqueue_keeps_an_earlier_ticket_ahead(redis: Redis) -> None:
    store = AdmissionStore(redis)
    await store.enqueue(T, G, chain="c1", job="j1", ticket=1)
    # The engine sees job 2 first: it queues behind 1, and 1 is handed the free slot.
    assert await _admit(store, 2) == Queued(position=1, promoted=(("c1", "j1"),))
    assert await _admit(store, 1) == Admitted()
    assert await store.release(T, "c1") == [("c2", "j2")]
    assert await _admit(store, 2) == Admitted()


async def test_refuse_admits_exactly_the_limit(redis: Redis) -> None:
    store = AdmissionStore(redis)
    verdicts = await asyncio.gather(
        *(_admit(store, i, limit=2, policy="refuse") for i in range(20))
    )
    assert sum(isinstance(v, Admitted) for v in verdicts) == 2
    assert sum(isinstance(v, Refused) for v in verdicts) == 18
    [(holder, _, _), _] = await store.holders(T, G)
    assert await store.release(T, holder) == []
    assert await _admit(store, 99, limit=2, policy="refuse") == Admitted()


async def test_cancel_in_progress_displaces_the_oldest_and_refuses_the_stale(redis: Redis) -> None:
    store = AdmissionStore(redis)
    policy = "cancel-in-progress"
    assert await _admit(store, 1, policy=policy) == Admitted()
    assert await _admit(store, 3, policy=policy) == Admitted(victims=(("c1", "j1"),))
    assert await _admit(store, 2, policy=policy) == Superseded(by_job="j3")
    assert [c for c, _, _ in await store.holders(T, G)] == ["c3"]
    assert await _admit(store, 4, policy=policy, limit=2) == Admitted()


async def test_release_is_idempotent_and_knows_each_chains_group(redis: Redis) -> None:
    store = AdmissionStore(redis)
    await _admit(store, 1)
    await _admit(store, 2)
    assert await store.group_of(T, "c2") == G
    assert await store.release(T, "c1") == [("c2", "j2")]
    assert await store.release(T, "c1") == []
    assert await store.release(T, "nobody") == []
    assert await store.group_of(T, "c1") is None
    assert await store.tenants() == [T] and await store.groups(T) == [G]
    assert await store.queued(T, G) == []
    for key in (keys.flow_holders(T, G), keys.flow_jobs(T, G), keys.flow_groups(T)):
        assert 0 < await redis.ttl(key) <= keys.FLOW_TTL_SECONDS
