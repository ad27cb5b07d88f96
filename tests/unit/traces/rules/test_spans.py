"""A chain's trace as values (``traces/rules/spans``).

Aspects covered:
- ids are deterministic (the same on every replica and after a restart), valid (never
  zero, 128/64 bits) and distinct between chains, jobs and namespaces;
- a job's span hangs under its parent job's span, a root job's under the root span;
- the job span's times come from the object (creation, recorded end), never inverted;
  its attributes say agent, chain, depth, phase, reason, exit code and usage; a failed
  job's span is an error with its reason;
- ``TRACEPARENT`` is W3C's format and names the job's span; the endpoint is passed on
  only when there is one;
- a job that ran splits into ``waiting`` and ``running`` under its span, at its start;
- a span survives its JSON round trip through the outbox unchanged, events included;
- a chain's root names what started it: the job API's call (with its caller), a
  ``/agentchain retry`` comment, a schedule's tick, else its root job's creation;
- a job's span starts where the operator asked for it and ends where it recorded its
  end, by its own clock, when known (and, for its start, the API server agrees).
"""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.traces.rules import spans

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40)


@given(names, names, names)
def test_ids_are_deterministic_valid_and_distinct(chain: str, namespace: str, job: str) -> None:
    assert spans.trace_id(chain) == spans.trace_id(chain)
    assert 0 < spans.trace_id(chain) < 2**128
    assert 0 < spans.job_span_id(namespace, job) < 2**64
    assert spans.root_span_id(chain) != spans.job_span_id(namespace, job)
    assert spans.job_span_id(namespace, job) != spans.job_span_id(namespace + "x", job)
    assert spans.trace_id(chain) != spans.trace_id(chain + "x")


def test_a_jobs_parent_span_is_its_parent_jobs_or_the_root() -> None:
    assert spans.parent_span_id("c1", "ns", "dev-1") == spans.job_span_id("ns", "dev-1")
    assert spans.parent_span_id("c1", "ns", None) == spans.root_span_id("c1")


def _facts(**overrides: object) -> spans.JobFacts:
    base: dict[str, object] = {
        "namespace": "team-a",
        "name": "dev-1",
        "chain_id": "c1",
        "depth": 1,
        "agent": "developer",
        "parent_job": "triage-1",
        "created": "2026-11-27T10:00:00Z",
        "completed": "2026-11-27T10:00:05+00:00",
        "phase": "Succeeded",
        "reason": "Succeeded",
        "exit_code": 0,
        "attempt": 1,
        "tokens": 1200,
        "cost": 0.25,
        "turns": 3,
    }
    base.update(overrides)
    return spans.JobFacts(**base)  # type: ignore[arg-type]


def test_a_job_span_describes_the_job_from_its_object() -> None:
    span = spans.job_span(_facts(), now_ns=0)
    assert span.name == "agentjob developer"
    assert span.trace == spans.trace_id("c1")
    assert span.span == spans.job_span_id("team-a", "dev-1")
    assert span.parent == spans.job_span_id("team-a", "triage-1")
    assert span.end_ns - span.start_ns == 5_000_000_000
    assert span.error is None
    assert span.attributes["gen_ai.agent.name"] == "developer"
    assert span.attributes["agentchain.chain.depth"] == 1
    assert span.attributes["agentchain.job.exit_code"] == 0
    assert span.attributes["agentchain.usage.tokens"] == 1200


def test_a_job_span_carries_the_genai_token_counts_where_the_agent_split_them() -> None:
    split = spans.job_span(_facts(input_tokens=1000, output_tokens=200), now_ns=0)
    assert split.attributes["gen_ai.usage.input_tokens"] == 1000
    assert split.attributes["gen_ai.usage.output_tokens"] == 200
    assert split.attributes["agentchain.usage.tokens"] == 1200
    total = spans.job_span(_facts(), now_ns=0)  # An agent that reported only a total.
    assert "gen_ai.usage.input_tokens" not in total.attributes
    assert "gen_ai.usage.output_tokens" not in total.attributes


def test_a_failed_jobs_span_is_an_error_and_times_never_invert() -> None:
    span = spans.job_span(
        _facts(phase="Failed", reason="ModelRateLimited", created="2026-11-27T10:00:09Z"),
        now_ns=0,
    )
    assert span.error == "ModelRateLimited"
    assert span.start_ns == span.end_ns  # Created "after" its end (clock skew): zero length.
    unset = spans.job_span(_facts(completed=None, tokens=None, exit_code=None), now_ns=7)
    assert unset.end_ns == 7
    assert "agentchain.usage.tokens" not in unset.attributes
    assert "agentchain.job.exit_code" not in unset.attributes


def test_the_agents_traceparent_names_its_jobs_span() -> None:
    env = spans.agent_env("c1", "team-a", "dev-1", "")
    assert set(env) == {"TRACEPARENT"}
    match = re.fullmatch(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01", env["TRACEPARENT"])
    assert match is not None
    assert int(match[1], 16) == spans.trace_id("c1")
    assert int(match[2], 16) == spans.job_span_id("team-a", "dev-1")
    with_endpoint = spans.agent_env("c1", "team-a", "dev-1", "http://collector:4318")
    assert with_endpoint["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4318"


@given(st.text(max_size=200), st.integers(0, 2**63), st.integers(0, 2**20))
def test_a_span_survives_its_json_round_trip(name: str, start: int, length: int) -> None:
    span = spans.root_span("c1", name, start, start + length, {"github.event": name, "n": 3})
    assert spans.Span.from_json(span.to_json()) == span
    job = spans.job_span(_facts(), now_ns=0)
    assert spans.Span.from_json(job.to_json()) == job
    moments = dataclasses.replace(job, events=(("pod.running", start), ("pod.exited", start + 1)))
    assert spans.Span.from_json(moments.to_json()) == moments


def test_a_job_span_starts_where_the_operator_asked_for_it_if_the_api_server_agrees() -> None:
    creation = spans.nanos("2026-11-27T10:00:00Z", 0)
    asked = str(creation + 250_000_000)
    assert spans.job_span(_facts(asked=asked), now_ns=0).start_ns == creation + 250_000_000
    # Asked a moment before the API server's second began (its time is floored): still it.
    early = str(creation - 100_000_000)
    assert spans.created_ns("2026-11-27T10:00:00Z", early, 0) == creation - 100_000_000
    # An annotation anyone changed to something else, or to nonsense, is not believed.
    for wrong in (str(creation + 5_000_000_000), "soon", None):
        assert spans.job_span(_facts(asked=wrong), now_ns=0).start_ns == creation
    assert spans.created_ns(None, asked, 7) == 7  # No creation time to agree with.


def test_a_job_span_ends_where_the_operator_recorded_its_end() -> None:
    recorded = spans.nanos("2026-11-27T10:00:05+00:00", 0) + 123_456_789
    span = spans.job_span(_facts(ended_ns=recorded), now_ns=0)
    assert span.end_ns == recorded  # Not its completionTime's whole second.
    assert span.end_ns % 1_000_000_000 == 123_456_789


def test_a_job_that_ran_splits_into_waiting_and_running() -> None:
    (alone,) = spans.job_spans(_facts(), now_ns=0)  # Never ran: no parts.
    job, waiting, running = spans.job_spans(
        _facts(started="2026-11-27T10:00:02Z", pod="dev-1-abc", phase="Failed"), now_ns=0
    )
    assert alone == spans.job_span(_facts(), now_ns=0)
    assert waiting.parent == running.parent == job.span
    assert (job.start_ns, waiting.end_ns, running.end_ns) == (
        waiting.start_ns,
        running.start_ns,
        job.end_ns,
    )
    assert waiting.end_ns - waiting.start_ns == 2_000_000_000
    assert running.error == job.error and waiting.error is None
    assert running.attributes["agentchain.job.pod"] == "dev-1-abc"
    assert len({job.span, waiting.span, running.span}) == 3
    late = spans.job_spans(_facts(started="2026-11-27T10:00:09Z"), now_ns=0)
    assert late[1].end_ns == late[0].end_ns  # A start after the end is clamped into it.


def test_the_trace_url_names_the_chains_trace() -> None:
    url = spans.trace_url("https://jaeger.example/trace/{traceId}", "c1")
    assert url == f"https://jaeger.example/trace/{spans.trace_id('c1'):032x}"
    assert spans.trace_url("", "c1") is None
    assert spans.trace_url("https://jaeger.example/trace/{traceId}", "") is None


def test_a_scheduled_chains_root_is_its_tick() -> None:
    root = spans.started_root(
        "c1", "nightly-1", "schedule", 5, "0 3 * * * in Europe/Paris", "2026-11-28T03:00:00+01:00"
    )
    assert (root.name, root.span, root.parent) == (
        "schedule nightly-1",
        spans.root_span_id("c1"),
        None,
    )
    assert root.attributes["agentchain.schedule"] == "0 3 * * * in Europe/Paris"
    assert root.attributes["agentchain.scheduled_at"] == "2026-11-28T03:00:00+01:00"


def test_a_chain_the_job_api_started_is_rooted_in_the_call() -> None:
    root = spans.started_root("c1", "triage-1", "api", 5, caller="admin (*)", end_ns=9)
    assert (root.name, root.span, root.parent) == (
        "api POST /api/jobs",
        spans.root_span_id("c1"),
        None,
    )
    assert (root.start_ns, root.end_ns) == (5, 9)
    assert root.attributes["http.request.method"] == "POST"
    assert root.attributes["http.route"] == "/api/jobs"
    assert root.attributes["agentchain.caller"] == "admin (*)"
    # The same name when only the root job's end can write it: no caller known then.
    fallback = spans.started_root("c1", "triage-1", "api", 5)
    assert fallback.name == root.name and "agentchain.caller" not in fallback.attributes


@pytest.mark.parametrize("origin", ["manual", "api", "github", "schedule"])
def test_a_retry_commands_chain_is_rooted_in_the_command(origin: str) -> None:
    root = spans.started_root("c1", "triage-2", origin, 5, retry_of="triage-1")
    assert root.name == "command /agentchain retry"
    assert root.attributes["agentchain.command"] == "retry"
    assert root.attributes["agentchain.command.retry_of"] == "triage-1"
    assert root.span == spans.root_span_id("c1")


@pytest.mark.parametrize("origin", ["manual", "github"])
def test_another_chains_root_is_its_root_jobs_creation(origin: str) -> None:
    root = spans.started_root("c1", "triage-1", origin, 5)
    assert (root.name, root.start_ns, root.end_ns) == ("agentjob triage-1 created", 5, 5)
    assert "agentchain.schedule" not in root.attributes
