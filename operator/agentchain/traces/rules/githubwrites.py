"""A chain's GitHub write-back as spans: each write to GitHub that went through, once.

The write-back is coalesced per chain (``github/writeback``): one write-back renders the
chain as it is and sends GitHub what changed, so a span cannot be named after a job's
step as the hop's are.  Each is named after what it wrote instead:

- the progress comment and the Check Run (``github comment``, ``github check run``):
  the chain, and the digest of the render written with the digest it replaced.  A
  write-back replayed after a crash (the write sent, its digest not yet recorded)
  renders the same chain over the same recorded digest, so it names the same span,
  which the outbox keeps once; two renders are two spans, and a render that comes back
  to an earlier one (A, B, A) is a third, since what it replaced differs;
- a pull request review (``github review``) and a round's reply in its review thread
  (``github reply``): the job whose review or reply it is, which has exactly one.

Where each hangs: under the span of the job whose change caused the write.  A review
and a reply have that job for good (the reviewer's, the round's), so they sit in its
chain's trace under its span.  A comment or a Check Run is caused by whichever job
changed last before the write-back ran; it hangs under that job's span when the job is
in the written chain, else (a follow-up round's job, in a trace of its own; a pull
request opened; nothing known, after a restart) under the chain's root span.  The trace
is always the written chain's, so a replay whose cause differs still names the same
span in the same trace.

Attributes say what was written (``agentchain.github.write``), how (``.action``:
``created``, ``updated``, ``found`` again by its marker after a crash, ``refused``),
GitHub's answer (``http.response.status_code``), where (repository and number), and
what it took: the write-back's retries after a failure and the rate limits it waited
out before this write went through.  Never what was written: the body is the chain's
output and the agents' notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentchain.traces.rules.spans import (
    AttributeValue,
    Span,
    attributes_of,
    job_part_span_id,
    job_span_id,
    root_span_id,
    span_id,
    trace_id,
)

What = Literal["comment", "check_run", "review", "reply"]
Action = Literal["created", "updated", "found", "refused"]
NAMES: dict[str, str] = {
    "comment": "github comment",
    "check_run": "github check run",
    "review": "github review",
    "reply": "github reply",
}


@dataclass(frozen=True)
class WriteBack:
    """One run of a chain's write-back: which chain, what caused it, what it took."""

    namespace: str
    chain_id: str
    cause: str | None = None
    """The job whose change made the write-back due, last (None: not known)."""
    cause_chain: str | None = None
    """The chain that job is in (a follow-up round's job is in its own)."""
    retries: int = 0
    """Failed runs of this write-back before this one (5xx, timeouts, a claim held)."""
    rate_limited: int = 0
    """Rate limits it hit before this run."""
    rate_limit_wait_s: float = 0.0
    """Seconds it waited for them."""


@dataclass(frozen=True)
class Write:
    """One write that went through (or that GitHub refused for good)."""

    what: What
    action: Action
    start_ns: int
    end_ns: int
    status: int | None = None
    """GitHub's HTTP status for the write (None: no request made)."""
    repository: str = ""
    number: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Rendered:
    """Which render a comment or Check Run write sent: its digest and the one it replaced."""

    digest: str
    replaced: str | None


def render_span_id(namespace: str, chain_id: str, what: What, rendered: Rendered) -> int:
    """The 64-bit id of the write of ``rendered`` as the chain's ``what``."""
    return span_id(
        "agentchain/github", namespace, chain_id, what, rendered.replaced or "", rendered.digest
    )


def job_write_span_id(namespace: str, job: str, what: What) -> int:
    """The 64-bit id of job ``namespace/job``'s review or reply (one each at most)."""
    return job_part_span_id(namespace, job, f"github {what}")


def render_parent(run: WriteBack) -> int:
    """The span a comment or Check Run write hangs under: its cause's, when that job is
    in the written chain, else the chain's root span."""
    if run.cause and run.cause_chain == run.chain_id:
        return job_span_id(run.namespace, run.cause)
    return root_span_id(run.chain_id)


def _attributes(run: WriteBack, write: Write, chain_id: str) -> dict[str, AttributeValue]:
    return attributes_of(
        {
            "agentchain.chain.id": chain_id,
            "agentchain.github.write": write.what,
            "agentchain.github.action": write.action,
            "http.response.status_code": write.status,
            "agentchain.github.repository": write.repository or None,
            "agentchain.github.number": write.number,
            "agentchain.github.retries": run.retries,
            "agentchain.github.rate_limited": run.rate_limited,
            "agentchain.github.rate_limit_wait_s": float(run.rate_limit_wait_s),
        }
    )


def render_span(run: WriteBack, write: Write, rendered: Rendered) -> Span:
    """The span of a comment or Check Run write of the chain ``run`` writes back."""
    attributes = _attributes(run, write, run.chain_id)
    if run.cause and run.cause_chain == run.chain_id:
        attributes["agentchain.job.name"] = run.cause
    return Span(
        name=NAMES[write.what],
        trace=trace_id(run.chain_id),
        span=render_span_id(run.namespace, run.chain_id, write.what, rendered),
        parent=render_parent(run),
        start_ns=write.start_ns,
        end_ns=max(write.start_ns, write.end_ns),
        attributes=attributes,
        error=write.error,
    )


def job_write_span(run: WriteBack, write: Write, job: str, job_chain: str) -> Span:
    """The span of job ``job``'s review or reply (``write.what``), under the job's span
    in its own chain's trace (``job_chain``: a round's job is in the round's)."""
    attributes = _attributes(run, write, job_chain) | {"agentchain.job.name": job}
    if job_chain != run.chain_id:
        attributes["agentchain.github.chain"] = run.chain_id
    return Span(
        name=NAMES[write.what],
        trace=trace_id(job_chain),
        span=job_write_span_id(run.namespace, job, write.what),
        parent=job_span_id(run.namespace, job),
        start_ns=write.start_ns,
        end_ns=max(write.start_ns, write.end_ns),
        attributes=attributes,
        error=write.error,
    )
