"""The GitHub write-back's spans (``traces/rules/githubwrites``): names, ids, parents.

Aspects covered:
- a comment's or Check Run's write is named by its chain, what it wrote and the render
  (its digest and the digest it replaced): the same write replayed names the same span
  whatever else differs (its cause, retries, times, GitHub's answer), while any other
  render, another chain, namespace or kind of write names another; a render that comes
  back to an earlier one (A, B, A) is a span of its own;
- it is always in the written chain's trace; it hangs under the job whose change caused
  it when that job is in the chain, else under the chain's root span (no cause known,
  or a follow-up round's job, in a trace of its own);
- a review's and a reply's span is named by its job alone, one each, distinct from each
  other and from every step of the job; it hangs under the job's span in the job's own
  chain's trace (a round's reply in the round's trace, naming the chain it answers in);
- the attributes say what was written, how, GitHub's status, where, the retries and the
  rate limits waited out, and nothing else (never what was written); an error is kept.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from agentchain.traces.rules import githubwrites, spans
from agentchain.traces.rules.githubwrites import Rendered, Write, WriteBack

NS, CHAIN = "team-a", "c1"
RUN = WriteBack(NS, CHAIN, "dev-1", CHAIN, retries=2, rate_limited=1, rate_limit_wait_s=30.0)
WRITE = Write("comment", "updated", 10, 20, 200, "acme/widgets", 5)
RENDER = Rendered("d2", "d1")
names = st.text(alphabet="abcdef0123456789-", min_size=1, max_size=20)
digests = st.text(alphabet="0123456789abcdef", min_size=1, max_size=64)
whats = st.sampled_from(["comment", "check_run"])


@given(names, names, whats, digests, st.none() | digests)
def test_a_renders_write_is_named_by_its_chain_and_render(
    namespace: str, chain: str, what: githubwrites.What, digest: str, replaced: str | None
) -> None:
    rendered = Rendered(digest, replaced)
    run = WriteBack(namespace, chain)
    span = githubwrites.render_span(run, replace(WRITE, what=what), rendered)
    assert span.span == githubwrites.render_span_id(namespace, chain, what, rendered)
    assert span.trace == spans.trace_id(chain)
    assert span.name == githubwrites.NAMES[what]
    # The same write replayed, by another cause, after more retries, later: one span.
    replayed = replace(run, cause="x", cause_chain=chain, retries=7, rate_limited=3)
    again = githubwrites.render_span(replayed, replace(WRITE, what=what, start_ns=99), rendered)
    assert (again.trace, again.span) == (span.trace, span.span)
    others = {
        githubwrites.render_span_id(namespace, chain, what, Rendered(digest + "0", replaced)),
        githubwrites.render_span_id(
            namespace, chain, what, Rendered(digest, (replaced or "") + "0")
        ),
        githubwrites.render_span_id(namespace + "x", chain, what, rendered),
        githubwrites.render_span_id(namespace, chain + "x", what, rendered),
        githubwrites.render_span_id(
            namespace, chain, "check_run" if what == "comment" else "comment", rendered
        ),
    }
    assert span.span not in others and len(others) == 5


def test_a_render_that_comes_back_is_a_span_of_its_own() -> None:
    first = githubwrites.render_span_id(NS, CHAIN, "comment", Rendered("a", None))
    second = githubwrites.render_span_id(NS, CHAIN, "comment", Rendered("b", "a"))
    back = githubwrites.render_span_id(NS, CHAIN, "comment", Rendered("a", "b"))
    assert len({first, second, back}) == 3


def test_a_render_hangs_under_the_job_that_caused_it_in_the_chain() -> None:
    span = githubwrites.render_span(RUN, WRITE, RENDER)
    assert span.parent == spans.job_span_id(NS, "dev-1")
    assert span.attributes["agentchain.job.name"] == "dev-1"


def test_a_render_without_a_cause_in_the_chain_hangs_under_its_root() -> None:
    root = spans.root_span_id(CHAIN)
    for run in (
        WriteBack(NS, CHAIN),  # Nothing known (a restart, a pull request opened).
        replace(RUN, cause_chain="round-2"),  # A follow-up round's job: another trace.
        replace(RUN, cause_chain=None),  # Its position not the operator's.
        replace(RUN, cause=None),
    ):
        span = githubwrites.render_span(run, WRITE, RENDER)
        assert span.parent == root, run
        assert span.trace == spans.trace_id(CHAIN)
        assert "agentchain.job.name" not in span.attributes


def test_the_attributes_say_what_was_written_and_what_it_took() -> None:
    span = githubwrites.render_span(RUN, WRITE, RENDER)
    assert dict(span.attributes) == {
        "agentchain.chain.id": CHAIN,
        "agentchain.github.write": "comment",
        "agentchain.github.action": "updated",
        "http.response.status_code": 200,
        "agentchain.github.repository": "acme/widgets",
        "agentchain.github.number": 5,
        "agentchain.github.retries": 2,
        "agentchain.github.rate_limited": 1,
        "agentchain.github.rate_limit_wait_s": 30.0,
        "agentchain.job.name": "dev-1",
    }
    assert (span.start_ns, span.end_ns, span.error, span.kind) == (10, 20, None, "internal")


def test_a_write_without_an_answer_says_no_status_and_keeps_its_error() -> None:
    write = Write("review", "refused", 30, 10, None, "acme/widgets", 5, "malformed review block")
    span = githubwrites.job_write_span(WriteBack(NS, CHAIN), write, "rev-1", CHAIN)
    assert "http.response.status_code" not in span.attributes
    assert span.error == "malformed review block"
    assert span.end_ns == span.start_ns == 30  # Never ends before it starts.


@given(names, names, st.sampled_from(["review", "reply"]))
def test_a_jobs_review_or_reply_is_named_by_the_job_alone(
    namespace: str, job: str, what: githubwrites.What
) -> None:
    run = WriteBack(namespace, CHAIN)
    span = githubwrites.job_write_span(run, replace(WRITE, what=what), job, CHAIN)
    again = githubwrites.job_write_span(
        replace(run, cause="x", retries=4), replace(WRITE, what=what, status=201), job, CHAIN
    )
    assert (span.trace, span.span) == (again.trace, again.span)
    assert span.span == githubwrites.job_write_span_id(namespace, job, what)
    assert span.parent == spans.job_span_id(namespace, job)
    steps = {
        spans.job_part_span_id(namespace, job, part)
        for part in ("attempt 1", "capture 1", "decision", "publish", "waiting", "running")
    }
    other = githubwrites.job_write_span_id(
        namespace, job, "reply" if what == "review" else "review"
    )
    assert span.span not in steps | {other, spans.job_span_id(namespace, job)}
    assert span.span != githubwrites.job_write_span_id(namespace, job + "x", what)
    assert span.attributes["agentchain.job.name"] == job
    assert "agentchain.github.chain" not in span.attributes


def test_a_rounds_reply_is_in_the_rounds_trace_naming_the_chain_it_answers_in() -> None:
    write = Write("reply", "created", 1, 2, 201, "acme/widgets", 9)
    span = githubwrites.job_write_span(WriteBack(NS, CHAIN), write, "round-2-fix", "round-2")
    assert span.trace == spans.trace_id("round-2")
    assert span.parent == spans.job_span_id(NS, "round-2-fix")
    assert span.attributes["agentchain.chain.id"] == "round-2"
    assert span.attributes["agentchain.github.chain"] == CHAIN
    assert span.name == "github reply"
