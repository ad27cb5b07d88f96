"""Follow-up rounds planned from a delivery: a failing check, a review requesting
changes, or a reply in a review thread, on a chain's pull request.

The webhook calls :func:`plan` with every verified delivery. For a failing
``check_run``, ``check_suite`` or ``workflow_run``, a ``pull_request_review`` submitted
with changes requested, or a reply in a review thread (``github/rules/followups.py``),
on a pull request a chain of the operator opened or was started on
(``github/roundrecords.py``), it finds the agent of that chain that asks for such rounds
(``spec.github.followUps.checks`` / ``reviews``: the first such agent in the chain's
order; for a review, only when that agent's sender policy admits the reviewer), numbers
the round, and returns what the webhook queues like any match: a root AgentJob of that
agent, whose event (sealed with it) names the pull request, carries the failure (with
the end of its Actions job's log for a check run, of its failed jobs' or check runs'
for a workflow run or a check suite, or the review with its inline
comments; each read from GitHub within 4 s, and left out when GitHub does not answer or
the App may not read it) as its body and the chain it continues (``continues``). It is
queued in the same atomic step as the delivery's record, so a round starts exactly once
per delivery, across redeliveries and a killed process.

The round's chain gets the continued chain's workspace (``workspaces/attaching.py``):
the same repository and branch, checked out at the branch's head, published to the same
branch, which updates the same pull request.  A round of a pull request its chain was
started on works on that pull request's head branch instead (the event's ``head_ref``);
one of a fork's pull request is never planned: the first delivery that would start it
says so on the pull request, once.  A chain started by a comment or a review on the pull
request did not learn where its head is (those deliveries do not say): its first round
due reads it (``GET /repos/{o}/{r}/pulls/{n}``, within the same 4 s) and records it,
sealed, for the rounds after; GitHub not answering in time starts no round then.  The
delivery that is the first past ``maxRounds`` queues nothing and says so on the pull
request (once); later ones say nothing.

A push to that pull request by anyone but the App (:func:`pushes`) makes a running round's
work stale: the webhook then supersedes the round through its pull request's round group
(``flow/admitting.supersede_holders``, the group's own cancel-in-progress) and starts no
round (nothing failed on the new head yet).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentchain import faults
from agentchain.core.runtime import Runtime
from agentchain.flow.rules import concurrency
from agentchain.github import roundrecords
from agentchain.github.appruntime import side_of
from agentchain.github.githuberrors import GitHubError
from agentchain.github.rules import followups as rules
from agentchain.github.rules import matching
from agentchain.github.rules.githubscope import Scope
from agentchain.github.rules.matching import AgentCandidate
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import GitHubFollowUps, SenderPolicy

log = logging.getLogger(__name__)
COMMENTS_TIMEOUT_SECONDS = 4.0
LOG_READ_LIMIT = 32 * 1024 * 1024
"""Past this much of a job's log the rest is not read (its end is then not the log's)."""


@dataclass(frozen=True)
class Round:
    """One round to queue: ``agent`` of ``namespace``, with ``event``."""

    namespace: str
    agent: str
    event: JobEvent
    pull: int


@dataclass(frozen=True)
class Limit:
    """The delivery ends ``agent``'s rounds on the pull request: say so once."""

    repository: str
    pull: int
    agent: str
    max_rounds: int
    chain_id: str
    installation_id: int
    fork: bool = False
    """Not a limit: the pull request's branch is a fork's, so no round can push there."""


@dataclass(frozen=True)
class _Cause:
    """What a delivery reports on a pull request that may start rounds."""

    kind: Literal["checks", "reviews"]
    repository: str
    pulls: tuple[int, ...]
    head_sha: str
    title: str
    """The end of the round's title, after the pull request's number."""
    url: str
    failed: rules.FailedCheck | None = None
    review: rules.ChangesRequested | None = None
    reply: rules.ThreadReply | None = None


def _cause_of(
    rt: Runtime, event: str, action: str | None, payload: Mapping[str, Any]
) -> _Cause | None:
    failed = rules.failed_checks(event, action, payload, rt.settings.github_app_id)
    if failed is not None:
        # Joined, never formatted: the name is CI's text ("build {matrix.os}").
        title = f": {failed.name}"
        return _Cause(
            "checks", failed.repository, failed.pulls, failed.head_sha, title, failed.url, failed
        )
    reply = rules.thread_reply(event, action, payload)
    if reply is not None:
        title = f" by @{reply.commenter}" if reply.commenter else ""
        return _Cause(
            "reviews",
            reply.repository,
            (reply.pull,),
            reply.head_sha,
            title,
            reply.url,
            reply=reply,
        )
    review = rules.changes_requested(event, action, payload)
    if review is not None:
        title = f" by @{review.reviewer}" if review.reviewer else ""
        return _Cause(
            "reviews",
            review.repository,
            (review.pull,),
            review.head_sha,
            title,
            review.url,
            review=review,
        )
    return None


def _follow_ups(candidate: AgentCandidate) -> GitHubFollowUps | None:
    access = candidate.spec.github
    return access.follow_ups if access is not None else None


def _agent_of(
    candidates: Sequence[AgentCandidate],
    chain_agents: Sequence[str],
    kind: str,
    admits: Callable[[AgentCandidate], bool],
) -> tuple[str, GitHubFollowUps] | None:
    """The first agent of the chain, in its order, that asks for rounds of ``kind``
    (``checks`` or ``reviews``) and whose sender policy ``admits`` the delivery's sender
    (a triggerName two AiAgents share asks for nothing: which one's setting holds is
    unknown)."""
    for name in chain_agents:
        found = [c for c in candidates if c.spec.trigger_name == name]
        wants = _follow_ups(found[0]) if len(found) == 1 else None
        if wants is None or not found[0].spec.enabled or not getattr(wants, kind):
            continue
        return (name, wants) if admits(found[0]) else None
    return None


def _installation(payload: Mapping[str, Any]) -> int | None:
    found = payload.get("installation")
    value = found.get("id") if isinstance(found, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def plan(
    rt: Runtime,
    event: str,
    action: str | None,
    payload: Mapping[str, Any],
    base: JobEvent,
    grouped: Mapping[str, Sequence[AgentCandidate]],
) -> tuple[list[Round], list[Limit]]:
    """The rounds the delivery starts, and the limits it reaches (none for most)."""
    cause = _cause_of(rt, event, action, payload)
    installation = _installation(payload)
    if cause is None or installation is None or base.delivery_id is None:
        return [], []

    def admits(candidate: AgentCandidate) -> bool:
        """A review (or a reply in its thread) starts rounds only from a sender the agent's
        policy admits; a check's sender is whoever pushed or GitHub itself, and what it
        reports is data."""
        if cause.kind != "reviews":
            return True
        policy = candidate.spec.sender_policy or SenderPolicy()
        return matching.sender_refusal(policy, event, payload) is None

    rounds: list[Round] = []
    limits: list[Limit] = []
    for pull in cause.pulls:
        planned = await _plan_pull(rt, cause, pull, base, grouped, installation, admits)
        if isinstance(planned, Round):
            rounds.append(planned)
        elif isinstance(planned, Limit):
            limits.append(planned)
    return rounds, limits


async def _plan_pull(
    rt: Runtime,
    cause: _Cause,
    pull: int,
    base: JobEvent,
    grouped: Mapping[str, Sequence[AgentCandidate]],
    installation: int,
    admits: Callable[[AgentCandidate], bool],
) -> Round | Limit | None:
    found = await roundrecords.pull_record(rt.redis, rt.operator_keys, cause.repository, pull)
    if found is None:
        return None
    namespace, chain_id = found.namespace, found.chain
    record = await rt.chains.get(namespace, chain_id)
    chain_agents = [str(h.get("agent")) for h in (record.hops if record else [])]
    chosen = _agent_of(grouped.get(namespace, ()), chain_agents, cause.kind, admits)
    if chosen is None:
        return None
    agent, wants = chosen
    if found.unknown:  # Started by a comment or a review: where is its head?
        learnt = await _learn_head(rt, cause.repository, pull, installation, found)
        if learnt is None:
            return None  # Not known: no round now (nothing numbered); a later one asks again.
        found = learnt
    if found.fork:  # Said once (the comment's marker), and no round is numbered.
        return Limit(cause.repository, pull, agent, wants.max_rounds, chain_id, installation, True)
    delivery = str(base.delivery_id)
    number = await roundrecords.claim_round(rt.redis, cause.repository, pull, agent, delivery)
    faults.crashpoint("follow-up-round-claimed")  # Counted, not queued: GitHub redelivers.
    verdict = rules.round_verdict(number, wants.max_rounds)
    if verdict == "limit":
        return Limit(cause.repository, pull, agent, wants.max_rounds, chain_id, installation)
    if verdict != "start":
        return None
    event = base.model_copy(
        update={
            "repository": cause.repository,
            "number": pull,
            "subject": "pull_request",
            "installation_id": installation,
            "head_sha": cause.head_sha or None,
            "head_repository": cause.repository,
            "title": _title(cause, pull) + cause.title,
            "body": await _body(rt, cause, pull, number, installation, delivery),
            "url": cause.url or None,
            "continues": chain_id,
            "round": number,
            "head_ref": found.head or None,
            "reply_to": cause.reply.in_reply_to if cause.reply is not None else None,
        }
    )
    return Round(namespace, agent, event, pull)


@dataclass(frozen=True)
class Push:
    """A person's push to a pull request's branch: ``agent``'s round there is stale."""

    namespace: str
    group: str
    holder: str
    reason: str


async def pushes(
    rt: Runtime,
    event: str,
    action: str | None,
    payload: Mapping[str, Any],
    grouped: Mapping[str, Sequence[AgentCandidate]],
    app_login: str | None,
) -> list[Push]:
    """What a push by someone other than the App (``app_login``, its bot) to a chain's
    pull request supersedes: the round group of each agent of that chain that asks for
    rounds.  Without the App's login a round's own push cannot be told from a person's,
    so nothing is superseded (the round's later push is then refused, visibly)."""
    pushed = rules.pushed_by_other(event, action, payload, app_login or "")
    if pushed is None:
        return []
    found = await roundrecords.pull_chain(
        rt.redis, rt.operator_keys, pushed.repository, pushed.pull
    )
    if found is None:
        return []
    namespace, chain_id = found
    record = await rt.chains.get(namespace, chain_id)
    candidates = grouped.get(namespace, ())
    out: list[Push] = []
    for name in dict.fromkeys(str(h.get("agent")) for h in (record.hops if record else [])):
        found_agents = [c for c in candidates if c.spec.trigger_name == name]
        wants = _follow_ups(found_agents[0]) if len(found_agents) == 1 else None
        if wants is None or not (wants.checks or wants.reviews):
            continue
        group = concurrency.pull_round_group(pushed.repository, pushed.pull, name)
        out.append(Push(namespace, group, rules.push_holder(pushed), rules.push_reason(pushed)))
    return out


async def _learn_head(
    rt: Runtime, repository: str, pull: int, installation: int, found: roundrecords.PullChain
) -> roundrecords.PullChain | None:
    """Where the head of a pull request a chain was started on by a comment or a review
    is (its branch, and whether that is a fork's), read from GitHub within
    :data:`COMMENTS_TIMEOUT_SECONDS` and recorded, sealed, for the rounds after; None
    when GitHub does not say in time (or there is no App)."""
    side = side_of(rt)
    if side is None:
        return None
    scope = Scope(installation, repository, {"pull_requests": "read"})
    try:
        async with asyncio.timeout(COMMENTS_TIMEOUT_SECONDS):
            ref, head_repository = await side.app.pull_branch(scope, pull)
    except (GitHubError, TimeoutError, OSError) as exc:
        log.info("pull request %s#%d: head not read, no round now (%s)", repository, pull, exc)
        return None
    fork = head_repository.casefold() != repository.casefold()
    learnt = roundrecords.PullChain(found.namespace, found.chain, ref[:255], fork)
    await roundrecords.learn_head(rt.redis, rt.operator_keys, repository, pull, learnt)
    return learnt


def _title(cause: _Cause, pull: int) -> str:
    if cause.kind == "checks":
        return f"Checks failed on pull request #{pull}"
    if cause.reply is not None:
        return f"Review comment on pull request #{pull}"
    return f"Changes requested on pull request #{pull}"


async def _body(
    rt: Runtime, cause: _Cause, pull: int, number: int, installation: int, delivery: str
) -> str:
    """The round's event body.  A delivery already recorded (a redelivery) queues only the
    bodies its first copy queued, so what it plans is dropped: GitHub is not asked again."""
    again = await rt.deliveries.get(delivery) is not None
    if cause.failed is not None:
        log_tail = "" if again else await _job_log(rt, cause.failed, installation)
        logs = {cause.failed.job_id: log_tail} if cause.failed.job_id and log_tail else {}
        run_logs = [] if again else await _run_logs(rt, cause.failed, installation)
        return rules.failure_context([cause.failed], pull, number, logs, run_logs)
    if cause.reply is not None:
        return rules.thread_context(cause.reply, number)
    assert cause.review is not None
    comments = None if again else await _review_comments(rt, cause.review, installation)
    return rules.review_context(cause.review, comments, number)


async def _job_log(rt: Runtime, failed: rules.FailedCheck, installation: int) -> str:
    """The end of the failed check run's Actions job log ("" when there is none to read:
    not an Actions check, the App may not read Actions, GitHub slow or failing), asked of
    GitHub within :data:`COMMENTS_TIMEOUT_SECONDS` and read to at most
    :data:`LOG_READ_LIMIT` bytes, of which only the last ones are kept."""
    side = side_of(rt)
    if side is None or failed.job_id is None:
        return ""
    scope = Scope(installation, failed.repository, {"actions": "read"})
    keep = rules.LOG_MAX * 4
    try:
        async with asyncio.timeout(COMMENTS_TIMEOUT_SECONDS):
            raw = await side.app.job_log_tail(scope, failed.job_id, keep, LOG_READ_LIMIT)
    except (GitHubError, TimeoutError, OSError) as exc:
        log.info("check run %d: no job log (%s)", failed.job_id, exc)
        return ""
    return rules.log_excerpt(raw)


async def _run_logs(
    rt: Runtime, failed: rules.FailedCheck, installation: int
) -> list[tuple[str, str]]:
    """The ends of a failed workflow run's failed jobs' logs, or a failed check suite's
    failed check runs' (their Actions jobs'), by name (at most ``RUN_JOBS_MAX``), listed
    and read within :data:`COMMENTS_TIMEOUT_SECONDS` in all; [] for anything else, or
    when GitHub does not answer in time (a check run of another CI has no log to read)."""
    side = side_of(rt)
    if side is None or (failed.run_id is None and failed.suite_id is None):
        return []
    scope = Scope(installation, failed.repository, {"actions": "read"})
    found: list[tuple[str, str]] = []
    try:
        async with asyncio.timeout(COMMENTS_TIMEOUT_SECONDS):
            if failed.run_id is not None:
                jobs = await side.app.failed_jobs(scope, failed.run_id)
            else:
                assert failed.suite_id is not None
                checks = Scope(installation, failed.repository, {"checks": "read"})
                jobs = await side.app.failed_suite_runs(checks, failed.suite_id)
            for job_id, name in jobs[: rules.RUN_JOBS_MAX]:
                raw = await side.app.job_log_tail(scope, job_id, rules.LOG_MAX * 4, LOG_READ_LIMIT)
                found.append((name, rules.log_excerpt(raw)))
    except (GitHubError, TimeoutError, OSError) as exc:
        listed = failed.run_id or failed.suite_id
        log.info("%s %s: no (more) job logs (%s)", failed.kind, listed, exc)
    return found


async def _review_comments(
    rt: Runtime, review: rules.ChangesRequested, installation: int
) -> list[rules.ReviewComment] | None:
    """The review's inline comments, asked of GitHub within :data:`COMMENTS_TIMEOUT_SECONDS`
    (the webhook answers GitHub within 10 s); None when they could not be read."""
    side = side_of(rt)
    if side is None:
        return None
    scope = Scope(installation, review.repository, {"pull_requests": "read"})
    try:
        async with asyncio.timeout(COMMENTS_TIMEOUT_SECONDS):
            items = await side.app.review_comments(scope, review.pull, review.review_id)
    except (GitHubError, TimeoutError) as exc:
        log.warning("review %d's comments not read: %s", review.review_id, exc)
        return None
    found = [rules.review_comment(_as_mapping(item)) for item in items]
    return [c for c in found if c is not None]


def _as_mapping(item: Any) -> Mapping[str, Any]:
    """A GitHub object as the plain mapping the rules read."""
    if isinstance(item, Mapping):
        return item
    dumped = item.model_dump() if hasattr(item, "model_dump") else {}
    return dumped if isinstance(dumped, Mapping) else {}
