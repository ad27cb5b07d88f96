"""A reviewer agent's verdict posted as a pull request review, once.

Part of a chain's write-back (``posting.flush`` calls :func:`post_due`), so it runs off
the chain's path, is retried and rate-limited by the worker like the comment, and a
GitHub failure never fails a chain.  A job's review is due when:

- its AiAgent asks for it (``spec.github.review: true``): an agent's output is a review
  only by that opt-in, never because it happens to hold a block that looks like one;
- it succeeded, and it sent a review through the job API (``PUT .../review``, the
  ``review`` MCP tool: kept on its AgentJob, sealed by the operator for that job, see
  :func:`seal_sent`) or its output holds an ``agentchain-review`` block
  (``github/rules/reviews.py``); a review sent counts over a block, and one sent again
  replaces the one before;
- its chain has a pull request: the one it was started on (a ``pull_request`` or
  ``pull_request_review`` delivery), else the one its workspace opened
  (``workspaces/publishing.py`` records it with :meth:`WriteBackRecords.set_pull`, which
  brings a chain already final back for its reviews);
- nothing is recorded for it yet.

Posting reads the pull request's head and changed files, places the comments
(inline on diff lines, the others folded into the body) and creates the review on that
head commit, with a token of ``pull_requests: write`` on the pull request's repository.
Exactly once: it happens under the chain's creation claim (the comment's), the
operator's own review is first looked for by the marker naming the job (a crash
between creating and recording it finds it: crashpoint ``github-review-created``), and
its id is recorded in the chain's record right after.  GitHub refusing the review
(422) or a malformed block is recorded as ``refused`` with a Warning Event on the job
(``GitHubReviewRefused``), so a chain is not retried forever for it; a posted review is
a Normal Event ``GitHubReviewPosted``.  When tracing, the review posted, found or refused
is a span under its job's span (``github review``, ``traces/rules/githubwrites``),
recorded before its id is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from agentchain import faults, metrics, models
from agentchain.github import apps
from agentchain.github.appruntime import GitHubSide
from agentchain.github.githuberrors import GitHubError
from agentchain.github.githubrecords import ChainRecord
from agentchain.github.rules import progress, reviews
from agentchain.github.rules.githubscope import REPOSITORY, Scope, Target, review_permissions
from agentchain.kube import events
from agentchain.store import sealing, signing
from agentchain.store.signing import OperatorKeys
from agentchain.traces.rules import githubwrites
from agentchain.traces.rules.githubwrites import WriteBack

log = logging.getLogger(__name__)
Claim = Callable[[], AbstractAsyncContextManager[None]]
Obj = dict[str, Any]
REFUSED = "refused"
REASON_POSTED = "GitHubReviewPosted"
REASON_REFUSED = "GitHubReviewRefused"


@dataclass(frozen=True)
class Reviewed:
    """What reviewing needs of a listed chain (``posting.Listed``)."""

    jobs: list[progress.JobRecord]
    reviewers: frozenset[str]
    """Trigger names of the agents whose jobs' verdicts are posted as reviews."""
    objects: dict[str, Obj]
    """The chain's AgentJobs by name (for their Events)."""
    allow_mentions: bool


def pull_of(target: Target, record: ChainRecord) -> tuple[Scope, int] | None:
    """The chain's pull request and the scope to review it with (None: it has none)."""
    installation = target.scope.installation_id
    if target.pull_request:
        repository, number = target.scope.repository, target.number
    elif record.pull is not None:
        repository, _, raw = record.pull.rpartition("#")
        if not REPOSITORY.match(repository) or not raw.isdigit():
            return None
        number = int(raw)
    else:
        return None
    return Scope(installation, repository, review_permissions()), number


def _subject(obj: Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))


def seal_sent(keys: OperatorKeys, obj: Obj, review: str) -> str:
    """The annotation value keeping ``review`` (its JSON text) on AgentJob ``obj``: sealed
    for that job (namespace, name, uid), so no one who can only edit AgentJobs makes the
    App post a review, nor moves one job's review to another."""
    return sealing.seal(keys, signing.JOB_REVIEW_PURPOSE, _subject(obj), review)


def sent_review(keys: OperatorKeys, obj: Obj | None) -> str | None:
    """The review the job sent through the job API; None without one, or for a value the
    operator did not seal for this job (ignored, logged once)."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    kept = annotations.get(models.REVIEW)
    if not isinstance(kept, str) or obj is None:
        return None
    opened = sealing.open_sealed(keys, signing.JOB_REVIEW_PURPOSE, _subject(obj), kept.encode())
    if opened is None:
        sealing.refused("review", "/".join(_subject(obj)[:2]), "not sealed for this job")
        return None
    return opened.decode()


def due(
    jobs: list[progress.JobRecord],
    reviewers: frozenset[str],
    record: ChainRecord,
    sent: Mapping[str, str] | None = None,
) -> list[tuple[progress.JobRecord, reviews.Review | reviews.Malformed]]:
    """The chain's jobs whose review is still to be posted, each with what it says;
    ``sent``: the reviews jobs sent through the job API, by job name."""
    found = []
    for r in jobs:
        status = r.job.status
        if r.job.spec.agent_role not in reviewers or r.name in record.reviews:
            continue
        if status.phase != "Succeeded":
            continue
        text = (sent or {}).get(r.name)
        review = reviews.parse_sent(text) if text is not None else None
        if review is None and status.result:
            review = reviews.parse(status.result)
        if review is not None:
            found.append((r, review))
    return found


async def post_due(
    side: GitHubSide,
    namespace: str,
    chain_id: str,
    chain: Reviewed,
    target: Target,
    record: ChainRecord,
    claim: Claim,
    run: WriteBack | None = None,
) -> None:
    """Post every review of the chain that is due; ``claim``: the chain's creation claim;
    ``run``: what the spans of the reviews say of the write-back (None: not tracing)."""
    pull = pull_of(target, record)
    if pull is None:
        return  # No pull request (yet): the workspace's, once open, brings the chain back.
    keys = side.rt.operator_keys
    sent = {n: t for n, o in chain.objects.items() if (t := sent_review(keys, o)) is not None}
    for job, review in due(chain.jobs, chain.reviewers, record, sent):
        obj = chain.objects.get(job.name)
        traced = Traced(side, run, job.name, obj, pull, time.time_ns())
        if isinstance(review, reviews.Malformed):
            # The span's error names the cause, never the block's text.
            await traced.record("refused", "malformed review block", answered=False)
            await _refused(side, namespace, chain_id, job.name, obj, review.reason)
            continue
        await _post(side, namespace, chain_id, chain, pull, job, review, obj, claim, traced)


@dataclass(frozen=True)
class Traced:
    """What a review's span needs: its job (whose span it hangs under), where, since when."""

    side: GitHubSide
    run: WriteBack | None
    job: str
    obj: Obj | None
    pull: tuple[Scope, int]
    start_ns: int

    async def record(
        self, action: githubwrites.Action, error: str | None = None, answered: bool = True
    ) -> None:
        """Record the review's span (nothing built when not tracing), under its job's span
        in the job's chain's trace; ``answered``: GitHub was asked (its status is said)."""
        if self.run is None:
            return
        scope, number = self.pull
        status = apps.last_status() if answered else None
        write = githubwrites.Write(
            "review", action, self.start_ns, time.time_ns(), status, scope.repository, number, error
        )
        chain = self.side.chain_of(self.obj) if self.obj is not None else None
        await self.side.traced(
            self.run, lambda r: githubwrites.job_write_span(r, write, self.job, chain or r.chain_id)
        )


async def _post(
    side: GitHubSide,
    namespace: str,
    chain_id: str,
    chain: Reviewed,
    pull: tuple[Scope, int],
    job: progress.JobRecord,
    review: reviews.Review,
    obj: Obj | None,
    claim: Claim,
    traced: Traced,
) -> None:
    """One job's review: found again by its marker, else created; then recorded."""
    app, (scope, number) = side.app, pull
    async with claim():
        if job.name in (await side.records.get(namespace, chain_id)).reviews:
            return  # Another writer posted it meanwhile.
        found = await app.find_review(scope, number, reviews.marker(namespace, job.name))
        placed = None
        if found is None:
            head, author = await app.pull_head(scope, number)
            lines = reviews.commentable(await app.pull_files(scope, number))
            placed = reviews.place(
                review,
                lines,
                title=reviews.heading(namespace, job.name, job.job.spec.agent_role),
                own_pull=author == await app.bot_login(),
                allow_mentions=chain.allow_mentions,
            )
            fields = {"event": placed.event, "body": placed.body, "comments": list(placed.comments)}
            try:
                found = await app.create_review(scope, number, head, fields)
            except GitHubError as exc:
                if exc.status != 422:
                    raise
                why = f"GitHub refused the review of pull request #{number}: {exc}"
                await traced.record("refused", "refused by GitHub")
                await _refused(side, namespace, chain_id, job.name, obj, why)
                return
            faults.crashpoint("github-review-created")
        await traced.record("found" if placed is None else "created")
        await side.records.set_review(namespace, chain_id, job.name, str(found))
    metrics.GITHUB_REVIEWS.labels("found" if placed is None else "posted").inc()
    if obj is not None and placed is not None:
        message = (
            f"Review {found} on {scope.repository}#{number}: {placed.event}, "
            f"{len(placed.comments)} inline comments, {placed.folded} folded into its body."
        )
        await events.emit(obj, "Normal", REASON_POSTED, message, key="github-review")


async def _refused(
    side: GitHubSide, namespace: str, chain_id: str, job: str, obj: Obj | None, why: str
) -> None:
    log.warning("review of %s/%s not posted: %s", namespace, job, why)
    metrics.GITHUB_REVIEWS.labels(REFUSED).inc()
    if obj is not None:
        message = f"No pull request review from this job: {why}"
        await events.emit(obj, "Warning", REASON_REFUSED, message, key="github-review")
    await side.records.set_review(namespace, chain_id, job, REFUSED)
