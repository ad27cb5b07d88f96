"""A traced hop's spans, against the in-process API server and a real Redis.

Aspects covered:
- the hop after ``p``'s attempt records, under ``p``'s span: its attempt, its capture,
  its decision (spawned, naming the reviewer and its job) and, for an agent that asks
  ``publishAfterStep``, the start of its publish Job; then ``p``'s own span, which ends
  after all of them, and the chain's root;
- a crash before any one of the hop's writes, then the replay: the same spans, each
  recorded once (their ids are derived, the outbox claims each once);
- a publish Job's end records its run's span, under the span of its start, once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.kube import apierrors
from agentchain.traces.outbox import Outbox
from agentchain.traces.recording import Traces
from agentchain.traces.rules import spans, steps
from agentchain.traces.rules.spans import Span
from agentchain.traces.rules.steps import PodMoments
from agentchain.workspaces import publishing
from tests.unit.fakeapi import FakeApi
from tests.unit.hop.test_hop_write_order import EXIT, NS, SETTINGS, api, kubeconfig, seed
from tests.unit.hop.watched import pod_ended
from tests.unit.workspaces import test_workspace_pulls as pulls
from tests.unit.workspaces.test_step_publish import (
    STEP_JOB,
    STEP_PUBLISH,
    ask,
    step_job,
    step_publish,
    workspace,
)

__all__ = ["api", "github", "kubeconfig", "rt"]  # Fixtures.
github = pulls.github
rt = pulls.rt
pytestmark = pytest.mark.redis
CHAIN = "c0ffee"


async def traced_hop(redis: Redis) -> None:
    """One pod event handled by a traced process started just now."""
    rt = Runtime.from_client(SETTINGS, redis)
    rt.traces = Traces(redis, enabled=True)
    await pod_ended(rt, NS, "p", EXIT)


async def recorded(redis: Redis) -> list[Span]:
    return await Outbox(redis).head(1000)


async def test_a_hops_steps_are_spans_under_its_jobs(api: FakeApi, redis: Redis) -> None:
    seed(api)
    ask(api)
    await workspace(redis)
    await traced_hop(redis)
    by_name = {s.name: s for s in await recorded(redis)}
    job = by_name.pop("agentjob writer")
    assert job.span == spans.job_span_id(NS, "p") and job.trace == spans.trace_id(CHAIN)
    root = by_name.pop("agentjob p created")
    assert job.parent == root.span == spans.root_span_id(CHAIN)
    names = {"attempt 1", "capture", "decision", "publish"}  # Never seen running: no parts.
    assert set(by_name) == {f"agentjob writer {n}" for n in names}, set(by_name)
    assert all(s.parent == job.span and s.trace == job.trace for s in by_name.values())
    decision = by_name["agentjob writer decision"].attributes
    assert decision["agentchain.decision.action"] == "spawned"
    assert decision["agentchain.decision.next_agent"] == "reviewer"
    child = api.objects[("agentjobs", str(decision["agentchain.decision.next_job"]))]
    assert child["spec"]["agentRole"] == "reviewer"
    publish = by_name["agentjob writer publish"]
    assert publish.span == steps.publish_span_id(NS, STEP_JOB)
    assert publish.attributes["agentchain.publish.job"] == STEP_JOB
    assert by_name["agentjob writer attempt 1"].attributes["agentchain.job.exit_code"] == 0
    order = [by_name[f"agentjob writer {n}"] for n in ("capture", "decision", "publish")]
    assert [s.start_ns for s in order] == sorted(s.start_ns for s in order)
    assert all(s.end_ns <= job.end_ns for s in by_name.values())  # Recorded before its end.


async def test_a_job_never_seen_running_gets_its_start_and_parts_from_its_container(
    api: FakeApi, redis: Redis
) -> None:
    # A short container on a real kubelet: Pending, then terminated; never Running.
    seed(api)
    rt = Runtime.from_client(SETTINGS, redis)
    rt.traces = Traces(redis, enabled=True)
    started = dt.datetime.now(dt.UTC).isoformat()
    await pod_ended(rt, NS, "p", dataclasses.replace(EXIT, moments=PodMoments(running=started)))
    status = api.objects[("agentjobs", "p")]["status"]
    assert status["phase"] == "Succeeded"
    assert dt.datetime.fromisoformat(status["startTime"]) == dt.datetime.fromisoformat(started)
    by_name = {s.name: s for s in await recorded(redis)}
    running = by_name["agentjob writer running"]
    job = by_name["agentjob writer"]  # The parts are clamped to the job's span.
    assert job.start_ns <= running.start_ns <= running.end_ns == job.end_ns
    assert by_name["agentjob writer waiting"].end_ns == running.start_ns


async def test_a_crash_before_any_write_replays_to_the_same_spans_once(
    api: FakeApi, redis: Redis
) -> None:
    async def fresh() -> None:
        await redis.flushdb()
        api.objects.clear()
        api.writes.clear()
        seed(api)
        ask(api)
        await workspace(redis)

    await fresh()
    await traced_hop(redis)
    expected = sorted((s.name, s.span) for s in await recorded(redis))
    writes = len(api.writes)
    assert len(expected) == 6 and writes >= 5
    for crash_at in range(writes):
        await fresh()
        api.fail_at = crash_at
        with pytest.raises(apierrors.Forbidden):
            await traced_hop(redis)
        api.fail_at = None
        await traced_hop(redis)
        got = sorted((s.name, s.span) for s in await recorded(redis))
        assert got == expected, f"crashed before write {crash_at}"


async def test_a_publish_jobs_run_hangs_under_its_start(
    rt: Runtime, api: FakeApi, github: pulls.FakeGitHub, redis: Redis
) -> None:
    step_job(api)
    rt.traces = Traces(redis, enabled=True)
    await publishing.on_job(rt, step_publish("Failed"))
    await publishing.on_job(rt, step_publish("Failed"))  # Seen again: nothing more.
    (run,) = await recorded(redis)
    assert (run.name, run.error) == ("publish failed", "failed")
    assert run.parent == steps.publish_span_id(NS, STEP_PUBLISH)
    assert run.trace == spans.trace_id(pulls.CHAIN)
    assert run.attributes["agentchain.publish.job"] == STEP_PUBLISH
