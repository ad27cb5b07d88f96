"""A stop racing the job's natural end, many times, in process (issue 16).

The e2e test ``test_a_stop_at_the_instant_a_job_ends_has_exactly_one_outcome`` runs
8 racers once on a real control plane; this runs the race 208 times (a few seconds)
against the in-process API server (``fakeapi``) and a real Redis, with the
operator's own handlers, dispatcher and engine on both sides, nothing of them
stubbed.  The parent ``p`` (agent ``writer``, whose ``next`` is ``reviewer``) runs;
a small watch emulation hands every change of AgentJobs, batch Jobs and pods to
``handlers.jobevents.observed`` / ``handlers.podevents`` in order, each a random
number of loop turns late, and their work runs on a real ``Dispatcher``.  Racing:

- the natural end: the kubelet marks the agent container terminated with exit code
  0 (its pod event delivered, or missed as across a relist), then the Job
  controller marks the batch Job ``Complete`` (unless it is gone): the operator
  sees them through ``finishing.on_pod`` / ``finishing.on_job``;
- the stop, as the job API asks it: ``stoprequests.request_stop`` writes the
  ``labrats.work/stop`` annotations, and the AgentJob watch's delivery applies them
  (``stopping.stop``), which deletes the batch Job: the garbage collector then
  marks the pod deleting and removes it.

One of them leads; the other starts at the leader's side's n-th API request (every n
from the first to past the last), and every request pauses a random number of loop
turns (seeded per round), so the follower lands before, inside and after each step
of the leader: before the capture, while either holds the job's lock, between the
stop's claim and its hop, after either has ended the job.  Then a resync of ``p``
comes by, as it would.

Aspects covered, for every round: exactly one outcome, never both --
- ``Succeeded``: one child created and spawned (``status.next`` = [spawned it]), the
  parent's result is its output, no ``stoppedBy``, no ``Stopped`` or
  ``ChainComplete`` Event, its batch Job not deleted, the chain not complete, no
  stop counted;
- ``Cancelled`` (reason ``Stopped``): the stopper recorded (``stoppedBy: api``), no
  child AgentJob, batch Job or Secret created, the batch Job deleted once,
  ``status.next`` = [stopped], the chain marked complete once (Redis, with outcome
  ``stopped`` at ``p``; ``chainComplete``; one ``ChainComplete`` and one ``Stopped``
  Event; counted once);
- in both: the end (a terminal phase) and ``status.next`` are written to the parent
  once, in the same patch, and nothing after them changes either; the chain's Redis
  record holds the one hop of ``p``; the jobs metric counts one end; no work of the
  operator's failed (the dispatcher would log and drop it).
Across the rounds both outcomes occur, the stop was seen waiting for the lock the
natural end's hop held and the other way round, and the natural end took the lock
between the stop's claim and its hop: the race was run, not avoided.

Not covered: two operator processes at once (the locks are per process; leader
election keeps one), a crash in the middle of the race (``test_hop_write_order``
replays crashes of a hop alone), and the real API server's watch semantics beyond
in-order delivery per kind (bookmarks, relists, 410s).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from agentchain import models
from agentchain.core.locking import Held, Locks
from agentchain.core.runtime import Runtime
from agentchain.flow import stoprequests
from agentchain.flow.rules import stoprules
from agentchain.handlers import jobevents, podevents
from agentchain.handlers.ordering import Dispatcher
from agentchain.handlers.watches import Consumer
from agentchain.hop import resync
from agentchain.hop.rules.jobspec import CONTAINER_NAME
from tests.unit.fakeapi import LOG, FakeApi, Obj, merge
from tests.unit.hop.test_hop_write_order import NS, SETTINGS, api, kubeconfig, seed

__all__ = ["api", "kubeconfig"]  # Fixtures.

ROUNDS_PER_START = 4
"""Rounds for each (leader, request the follower starts at, natural-end path)."""
TERMINAL = {"Succeeded", "Failed", "Skipped", "Cancelled"}
STOPPER = stoprules.StopRequest(by="api", reason="race")
TERMINATED = {"name": CONTAINER_NAME, "state": {"terminated": {"exitCode": 0}}}
COMPLETE = {"type": "Complete", "status": "True"}
Trim = Callable[[Obj], Obj]


def batch_job(owner_uid: str) -> Obj:
    """The parent's batch Job, running: the operator's, controlled by ``p``."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "p",
            "namespace": NS,
            "labels": {models.AGENTJOB_LABEL: "p"},
            "ownerReferences": [
                {
                    "apiVersion": models.API_VERSION,
                    "kind": "AgentJob",
                    "name": "p",
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "status": {"active": 1},
    }


def pod(job_uid: str) -> Obj:
    """The Job's pod, its agent container running."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p-pod",
            "namespace": NS,
            "labels": {models.AGENTJOB_LABEL: "p", "job-name": "p"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "p",
                    "uid": job_uid,
                    "controller": True,
                }
            ],
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": CONTAINER_NAME, "state": {"running": {}}}],
        },
    }


class TracedLocks(Locks):
    """The engine's locks, noting who asked for ``p``'s (``?``), got it (``+``), left (``-``):
    the stop (the AgentJob watch's work) or the natural end (the pod's or Job's)."""

    def __init__(self, trace: list[str]) -> None:
        super().__init__()
        self.trace = trace

    @contextlib.asynccontextmanager
    async def holding(self, namespace: str, name: str) -> AsyncIterator[Held]:
        task = asyncio.current_task()
        work = task.get_name() if task is not None and name == "p" else ""
        who = "stop" if "'agentjobs'" in work else "end" if work.startswith("event") else ""
        self.trace.append(f"{who}?")
        async with super().holding(namespace, name) as held:
            self.trace.append(f"{who}+")
            try:
                yield held
            finally:
                self.trace.append(f"{who}-")


@dataclass(frozen=True)
class Round:
    seed: int
    leader: str  # "end" or "stop"
    start_at: int  # The API request (from the leader's side) the follower starts at.
    pod_event: bool  # The pod's end is delivered (else its Job's alone: a missed event).


@dataclass
class Result:
    outcome: str
    trace: list[str] = field(default_factory=list)


CONSUMERS: dict[str, tuple[Consumer, Trim]] = {
    "agentjobs": (jobevents.observed, jobevents.trim),
    "jobs": (podevents.job_changed, podevents.trim_job),
    "pods": (podevents.pod_changed, podevents.trim_pod),
}
"""The operator's watches' consumers and trims (``handlers.watches.start``)."""


class Watch:
    """The operator's three watches over the fake API server: each kind's events in
    order, each a random number of loop turns late, handed to the operator's handlers
    (``handlers.watches``), whose work runs on a real dispatcher."""

    def __init__(self, rt: Runtime, rng: random.Random) -> None:
        self.rt, self.rng = rt, rng
        self.dispatcher = Dispatcher(rt.unsettled.backlog)
        self.queues = {kind: asyncio.Queue[tuple[str, Obj]]() for kind in CONSUMERS}
        self.delivering = 0
        self.tasks = [asyncio.create_task(self._run(kind)) for kind in CONSUMERS]

    def heard(self, event: str, kind: str, obj: Obj) -> None:
        labelled = models.AGENTJOB_LABEL in ((obj.get("metadata") or {}).get("labels") or {})
        if kind == "agentjobs" or (kind in self.queues and labelled):
            self.queues[kind].put_nowait((event, obj))

    async def _run(self, kind: str) -> None:
        consume, trim = CONSUMERS[kind]
        while True:
            event, obj = await self.queues[kind].get()
            self.delivering += 1
            await turns(self.rng.randrange(4))
            consume(self.rt, self.dispatcher.submit, event, trim(obj))
            self.delivering -= 1

    def busy(self) -> bool:
        queued = any(not q.empty() for q in self.queues.values())
        return queued or self.delivering > 0 or len(self.dispatcher) > 0

    async def settled(self) -> None:
        """Until nothing is queued, delivered or worked on (for a few turns in a row)."""
        quiet = 0
        for _ in range(100_000):
            await asyncio.sleep(0 if quiet else 0.001)
            quiet = 0 if self.busy() else quiet + 1
            if quiet >= 20:
                return
        raise AssertionError("the operator never settled")

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.dispatcher.close()


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def counters() -> dict[str, float]:
    return {
        "stops": metric("agentchain_stops_total", namespace=NS, reason="Stopped"),
        "stopped_chains": metric(
            "agentchain_chain_outcomes_total", namespace=NS, outcome="stopped"
        ),
        "succeeded": metric(
            "agentchain_jobs_total", namespace=NS, agent="writer", phase="Succeeded"
        ),
        "cancelled": metric(
            "agentchain_jobs_total", namespace=NS, agent="writer", phase="Cancelled"
        ),
    }


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def race(api: FakeApi, redis: Redis, r: Round) -> Result:
    """One race from a fresh cluster, Redis and operator process; its outcome, checked."""
    rng = random.Random(r.seed)
    await redis.flushdb()
    api.objects.clear()
    api.writes.clear()
    api.on_change = api.before_request = None
    seed(api)
    parent_uid = api.objects[("agentjobs", "p")]["metadata"]["uid"]
    job_uid = api.put("jobs", batch_job(parent_uid))["metadata"]["uid"]
    api.put("pods", pod(job_uid))
    rt = Runtime.from_client(SETTINGS, redis)
    trace: list[str] = []
    rt.locks = TracedLocks(trace)
    watch = Watch(rt, rng)
    try:
        for kind in ("agentjobs", "jobs", "pods"):  # The watches' first lists.
            for obj in api.of(kind):
                watch.heard("ADDED", kind, copy.deepcopy(obj))
        api.on_change = watch.heard
        await watch.settled()
        assert api.writes == [], "the operator acted on a running job"
        before = counters()
        await Cluster(api, watch, r, rng).run()
        # The resync comes by later anyway: it finds nothing left to do.
        await resync.resync(rt, copy.deepcopy(api.objects[("agentjobs", "p")]))
        await watch.settled()
    finally:
        api.on_change = api.before_request = None
        await watch.close()
    outcome = await check(api, rt, before)
    return Result(outcome, [t for t in trace if t[:-1]])


class Cluster:
    """Everyone but the operator in one race: the job API asking the stop, the kubelet
    and the Job controller ending the attempt, the garbage collector.  Each request
    the operator or they make pauses a few loop turns; the follower's side starts at
    the ``r.start_at``-th."""

    def __init__(self, api: FakeApi, watch: Watch, r: Round, rng: random.Random) -> None:
        self.api, self.watch, self.r, self.rng = api, watch, r, rng
        self.requests = 0
        self.follower_may_start = asyncio.Event()
        self.gc: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        """The race: the leader's side, the follower's from its request; then quiet."""
        self.api.on_change, self.api.before_request = self.heard, self.pause
        sides = (self.natural_end, self.stop)
        lead, second = sides if self.r.leader == "end" else sides[::-1]
        follower = asyncio.create_task(self.follow(second))
        await lead()
        while not self.follower_may_start.is_set() and self.watch.busy():
            await asyncio.sleep(0)
        self.follower_may_start.set()  # The leader's side made fewer requests: after it.
        await follower
        await self.watch.settled()
        await asyncio.gather(*self.gc)
        await self.watch.settled()

    async def pause(self, method: str, kind: str, name: str | None) -> None:
        self.requests += 1
        if self.requests > self.r.start_at:
            self.follower_may_start.set()
        await turns(self.rng.randrange(4))

    async def follow(self, side: Callable[[], Awaitable[None]]) -> None:
        await self.follower_may_start.wait()
        await turns(self.rng.randrange(4))
        await side()

    def heard(self, event: str, kind: str, obj: Obj) -> None:
        self.watch.heard(event, kind, obj)
        if (event, kind, obj["metadata"]["name"]) == ("DELETED", "jobs", "p"):
            self.gc.append(asyncio.create_task(self.collect_pod()))

    async def collect_pod(self) -> None:
        """The garbage collector: the deleted Job's pod, gracefully, then gone."""
        await turns(self.rng.randrange(8))
        deleting = {"metadata": {"deletionTimestamp": "2024-01-01T00:01:00Z"}}
        self.api.update("pods", "p-pod", deleting)
        await turns(self.rng.randrange(8))
        self.api.remove("pods", "p-pod")

    async def natural_end(self) -> None:
        """The kubelet: the agent container exited 0; then the Job controller: Complete."""
        ended = {"status": {"phase": "Succeeded", "containerStatuses": [TERMINATED]}}
        if self.r.pod_event:
            self.api.update("pods", "p-pod", ended)
        elif ("pods", "p-pod") in self.api.objects:  # Its event missed (a watch's relist).
            self.api.put("pods", merge(self.api.objects[("pods", "p-pod")], ended))
        await turns(self.rng.randrange(8))
        self.api.update("jobs", "p", {"status": {"conditions": [COMPLETE]}})  # Unless gone.

    async def stop(self) -> None:
        """The job API: the stop annotations (the AgentJob watch brings them in)."""
        assert await stoprequests.request_stop(NS, "p", STOPPER) is not None


async def check(api: FakeApi, rt: Runtime, before: dict[str, float]) -> str:
    """Exactly one outcome: Succeeded with its one child, or Cancelled by the stop."""
    parent = api.objects[("agentjobs", "p")]
    status = parent["status"]
    phase = status.get("phase")
    patches = [
        w.body.get("status") or {}
        for w in api.writes
        if (w.method, w.kind, w.name) == ("PATCH", "agentjobs/status", "p")
    ]
    ends = [i for i, s in enumerate(patches) if s.get("phase") in TERMINAL]
    marked = [i for i, s in enumerate(patches) if "next" in s]
    assert len(ends) == 1, f"the end written {len(ends)} times: {patches}"
    assert marked == ends, f"status.next not written once, with the end: {patches}"
    later = patches[ends[0] + 1 :]
    assert all("phase" not in s and "next" not in s for s in later), later
    assert len(status.get("next") or []) == 1, status
    (entry,) = status["next"]

    children = [o for o in api.of("agentjobs") if o["metadata"]["name"] != "p"]
    created = Counter(w.kind for w in api.writes if w.method == "POST")
    deleted = [(w.kind, w.name) for w in api.writes if w.method == "DELETE"]
    events = Counter(e["reason"] for e in api.of("events") if e["involvedObject"]["name"] == "p")
    chain = await rt.chains.get(NS, "c0ffee")
    assert chain is not None
    assert [(h["jobName"], h["phase"]) for h in chain.hops] == [("p", phase)], chain.hops
    after = counters()
    counted = {k: after[k] - before[k] for k in after}

    if phase == "Succeeded":
        assert status.get("reason") != "Stopped" and "stoppedBy" not in status, status
        assert entry["action"] == "spawned", entry
        assert [c["metadata"]["name"] for c in children] == [entry["child"]], children
        assert created["agentjobs"] == 1, created
        assert status.get("result") == LOG.decode(), status
        assert deleted == [], "the stop deleted the batch Job of a job that succeeded"
        assert "Stopped" not in events and "ChainComplete" not in events, events
        assert not status.get("chainComplete") and not chain.complete, chain
        assert counted == {"stops": 0, "stopped_chains": 0, "succeeded": 1, "cancelled": 0}
        return "Succeeded"
    assert phase == "Cancelled", status
    assert status.get("reason") == "Stopped" and status.get("stoppedBy") == "api", status
    assert entry["action"] == "stopped", entry
    assert children == [], "a child was created for a cancelled job"
    assert not (created["agentjobs"] or created["jobs"] or created["secrets"]), created
    assert deleted == [("jobs", "p")], deleted
    assert status.get("chainComplete") is True, status
    assert chain.complete and chain.outcome == "stopped" and chain.last_job == "p", chain
    assert events["Stopped"] == events["ChainComplete"] == 1, events
    # Both Events exist before the patch that settles the job: a crash right after it
    # (never replayed: the job is settled) cannot lose them.
    order = [
        (w.method, w.kind, (w.body.get("reason") or (w.body.get("status") or {}).get("phase")))
        for w in api.writes
    ]
    settled = order.index(("PATCH", "agentjobs/status", "Cancelled"))
    assert ("POST", "events", "Stopped") in order[:settled], order
    assert ("POST", "events", "ChainComplete") in order[:settled], order
    assert counted == {"stops": 1, "stopped_chains": 1, "succeeded": 0, "cancelled": 1}
    return "Cancelled"


def rounds() -> list[Round]:
    """Every start point of the follower, for each leader and natural-end path; the
    leader's side makes at most 11 API requests before it is done."""
    out: list[Round] = []
    for leader in ("end", "stop"):
        for start_at in range(13):
            for pod_event in (True, False):
                for _ in range(ROUNDS_PER_START):
                    out.append(Round(len(out), leader, start_at, pod_event))
    return out


def waited_while_held(trace: list[str], holder: str, waiter: str) -> bool:
    """Whether ``waiter`` asked for the lock while ``holder`` held it."""
    holding = False
    for mark in trace:
        if mark == f"{holder}+":
            holding = True
        elif mark == f"{holder}-":
            holding = False
        elif mark == f"{waiter}?" and holding:
            return True
    return False


def end_in_the_stops_window(trace: list[str]) -> bool:
    """Whether the natural end took the lock between the stop's claim and its hop."""
    stops_ = [i for i, mark in enumerate(trace) if mark == "stop-"]
    takes = [i for i, mark in enumerate(trace) if mark == "stop+"]
    ends = [i for i, mark in enumerate(trace) if mark == "end+"]
    if len(takes) < 2 or not stops_ or not ends:
        return False
    return stops_[0] < ends[0] < takes[1]


@pytest.mark.redis
async def test_a_stop_racing_the_natural_end_has_exactly_one_outcome(
    api: FakeApi, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentchain")
    results: list[tuple[Round, Result]] = []
    for r in rounds():
        try:
            results.append((r, await race(api, redis, r)))
            # The dispatcher logs and drops a failed event's work: none may fail here.
            failed = [x.getMessage() for x in caplog.records if x.levelno >= logging.WARNING]
            assert failed == [], failed
        except AssertionError as exc:
            raise AssertionError(f"{r}: {exc}") from exc
    outcomes = Counter(result.outcome for _, result in results)
    assert set(outcomes) == {"Succeeded", "Cancelled"}, outcomes
    traces = [result.trace for _, result in results]
    assert any(waited_while_held(t, "end", "stop") for t in traces)
    assert any(waited_while_held(t, "stop", "end") for t in traces)
    assert any(end_in_the_stops_window(t) for t in traces)
