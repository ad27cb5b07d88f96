"""The parts of a job's span (``traces/rules/steps``) and what a decision's says
(``hop/rules/chains.summary``).

Aspects covered:
- every part hangs under its job's span, in its chain's trace, under an id derived from
  the job and the part alone: the same on every replay, distinct between parts,
  attempts and jobs;
- an attempt spans its pod's life (created to exited), its pod's moments as events
  within it, its number, exit code and reason as attributes, an error when it failed;
  with no pod timestamps it is the moment the operator saw the end; never before its
  job's start (the pod's times are whole seconds, the job's may be the operator's);
- a publish's run hangs under the span of its start, both found from the publish Job's
  name alone; a refused push is an error;
- a decision's attributes say what comes next (agent and job) or why nothing does, and
  whether it completes the chain.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentchain.hop.rules import chains
from agentchain.models.conditions import Reason
from agentchain.traces.rules import spans, steps

JOB = steps.JobRef("team-a", "dev-1", "c1", "developer")
SECOND = 1_000_000_000
MOMENTS = steps.PodMoments(
    created="2026-11-27T10:00:01Z",
    scheduled="2026-11-27T10:00:02Z",
    running="2026-11-27T10:00:04Z",
    exited="2026-11-27T10:00:09Z",
)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=30)


def _attempt(**overrides: object) -> steps.AttemptFacts:
    base: dict[str, object] = {
        "attempt": 2,
        "pod": "dev-1-x",
        "exit_code": 3,
        "reason": "retried: exited with code 3",
        "failed": True,
        "moments": MOMENTS,
    }
    return steps.AttemptFacts(**(base | overrides))  # type: ignore[arg-type]


@given(names, names, st.sampled_from(["attempt 1", "attempt 2", "capture 1", "decision"]))
def test_a_parts_id_is_its_jobs_and_its_own(namespace: str, name: str, part: str) -> None:
    job = steps.JobRef(namespace, name, "c1", "developer")
    span = steps.step_span(job, part, 5, 9)
    assert span == steps.step_span(job, part, 5, 9)  # A replay names the same span.
    assert span.parent == spans.job_span_id(namespace, name)
    assert span.trace == spans.trace_id("c1")
    others = {steps.step_span(job, other, 5, 9).span for other in ("attempt 3", "publish")}
    assert span.span not in others | {spans.job_span_id(namespace, name)}
    assert (
        span.span
        != steps.step_span(steps.JobRef(namespace, name + "x", "c1", "d"), part, 0, 0).span
    )


def test_an_attempt_spans_its_pods_life() -> None:
    span = steps.attempt_span(JOB, _attempt(), observed_ns=0)
    created = spans.nanos(MOMENTS.created, 0)
    assert span.name == "agentjob developer attempt 2"
    assert (span.start_ns, span.end_ns) == (created, created + 8 * SECOND)
    assert [name for name, _ in span.events] == ["pod.scheduled", "pod.running", "pod.exited"]
    assert [at - created for _, at in span.events] == [SECOND, 3 * SECOND, 8 * SECOND]
    assert span.attributes["agentchain.job.attempt"] == 2
    assert span.attributes["agentchain.job.exit_code"] == 3
    assert span.attributes["agentchain.job.pod"] == "dev-1-x"
    assert span.error == "retried: exited with code 3"
    ok = steps.attempt_span(JOB, _attempt(exit_code=0, failed=False, reason="Succeeded"), 0)
    assert ok.error is None and ok.span == span.span  # The attempt names it, not its end.
    assert steps.attempt_span(JOB, _attempt(attempt=3), 0).span != span.span


def test_an_attempt_stays_within_its_jobs_span() -> None:
    created = spans.nanos(MOMENTS.created, 0)
    job_start = created + 700_000_000  # The job, by the operator's clock; the pod, floored.
    span = steps.attempt_span(JOB, _attempt(not_before=job_start), observed_ns=0)
    assert span.start_ns == job_start and span.end_ns == created + 8 * SECOND
    assert all(job_start <= at <= span.end_ns for _, at in span.events)
    early = steps.PodMoments(created=MOMENTS.created, exited=MOMENTS.created)
    within = steps.attempt_span(JOB, _attempt(moments=early, not_before=job_start), 0)
    assert within.start_ns == within.end_ns == job_start


def test_an_attempt_the_pod_says_nothing_of_is_when_its_end_was_seen() -> None:
    lost = _attempt(pod=None, exit_code=None, moments=steps.PodMoments(), lost="Pod gone.")
    span = steps.attempt_span(JOB, lost, observed_ns=42)
    assert (span.start_ns, span.end_ns, span.events) == (42, 42, ())
    assert span.attributes["agentchain.output.lost"] == "Pod gone."
    assert "agentchain.job.exit_code" not in span.attributes
    # A pod that never ran: its moments stay within its span.
    early = steps.PodMoments(created="2026-11-27T10:00:05Z", scheduled="2026-11-27T10:00:01Z")
    span = steps.attempt_span(
        JOB, _attempt(moments=early), observed_ns=spans.nanos(MOMENTS.exited, 0)
    )
    assert all(span.start_ns <= at <= span.end_ns for _, at in span.events)


def test_a_publishs_run_hangs_under_its_start() -> None:
    start = steps.publish_span(
        JOB, "agentchain-publish-c1", 5, 9, {"agentchain.publish.final": True}
    )
    times = ("2026-11-27T10:00:10Z", "2026-11-27T10:00:15Z")
    run = steps.push_span("c1", "team-a", "agentchain-publish-c1", times, 0, "pushed", False)
    assert start.parent == spans.job_span_id("team-a", "dev-1")
    assert start.name == "agentjob developer publish"
    assert start.attributes["agentchain.publish.job"] == "agentchain-publish-c1"
    assert start.attributes["agentchain.publish.final"] is True
    assert run.parent == start.span and run.trace == start.trace
    assert (run.name, run.end_ns - run.start_ns, run.error) == ("publish pushed", 5 * SECOND, None)
    refused = steps.push_span("c1", "team-a", "agentchain-publish-c1", times, 0, "refused", True)
    assert refused.error == "refused" and refused.span == run.span


def _child(agent: str) -> chains.ChildPlan:
    position = chains.root_position("c1", "developer")
    return chains.ChildPlan(f"{agent}-1", agent, "dev-1", position, "tail", None)


def test_a_decisions_span_says_what_comes_next() -> None:
    spawn = chains.summary(chains.Spawn(_child("reviewer"), False, "go"))
    assert spawn == {
        "action": "spawned",
        "reason": Reason.CHILD_SPAWNED,
        "next_agent": "reviewer",
        "next_job": "reviewer-1",
    }
    refused = chains.summary(chains.Refuse(_child("x"), Reason.NEXT_AGENT_NOT_FOUND, "no"))
    assert (refused["action"], refused["reason"]) == ("refused", Reason.NEXT_AGENT_NOT_FOUND)
    stop = chains.summary(chains.Stop("ConditionNotMet", "stop"))
    assert stop == {"action": "stopped", "reason": "ConditionNotMet", "completes": True}
    branch = chains.summary(chains.End("done", open=("other-1",)))
    assert branch == {"action": "none", "reason": Reason.BRANCH_ENDED, "completes": False}
    assert chains.summary(chains.End("done"))["reason"] == Reason.CHAIN_COMPLETE
