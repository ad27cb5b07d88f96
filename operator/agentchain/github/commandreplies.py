"""Comment commands answered on GitHub: a reaction, maybe a reply, off the webhook's path.

The webhook calls :func:`answer` with the verdict ``web/hooks/commands.py`` returned; it is
synchronous and does no I/O.  When the operator is a GitHub App (``side_of``) and the
delivery names the App's installation, what to send is decided by
``github/rules/replies.py`` and sent by a background task, so the webhook's answer
never waits for GitHub and never fails because of it.  Otherwise nothing is sent and
the answer's ``reply`` says so, as before.

The task is bounded: at most :data:`CONCURRENCY` at once, :data:`MAX_PENDING` waiting
(more are dropped, counted), :data:`DEADLINE_SECONDS` each, end to end.  Failures are
handled like write-back's (``github/githuberrors.py``): a rate limit waits ``Retry-After``
(and pauses the write-back worker too, it is the same App's limit), transient errors
are retried with back-off up to :data:`MAX_ATTEMPTS` times, a permanent one is logged
and counted (``agentchain_github_command_answers_total{result="failed"}``).  A comment is
answered once (``githubrecords.claim_answer``), however often GitHub redelivers it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentchain import metrics
from agentchain.core.runtime import Runtime
from agentchain.github import githubrecords, writeback
from agentchain.github.appruntime import GitHubSide, side_of
from agentchain.github.githuberrors import RATE_LIMITED, UNAVAILABLE, GitHubError
from agentchain.github.rules import matching, replies
from agentchain.github.rules.githubscope import REPOSITORY, Scope, writeback_permissions

log = logging.getLogger(__name__)
CONCURRENCY = 4
MAX_PENDING = 100
DEADLINE_SECONDS = 600.0
MAX_ATTEMPTS = 5
NO_INSTALLATION = "no reply on GitHub: the delivery names no installation of the App"

_tasks: set[asyncio.Task[None]] = set()
_slots: dict[int, asyncio.Semaphore] = {}


def answer(rt: Runtime, payload: Mapping[str, Any], verdict: Mapping[str, Any]) -> str:
    """Start answering the command on GitHub; what will be said (for the webhook's answer)."""
    side = side_of(rt)
    if side is None:
        return str(verdict.get("reply") or "")
    where = _where(payload)
    if where is None:
        return NO_INSTALLATION
    scope, comment_id = where
    said = replies.answer_for(verdict, matching.sender_association("issue_comment", payload))
    if said.reaction is None and said.reply is None:
        metrics.GITHUB_COMMAND_ANSWERS.labels("silent", "").inc()
        return said.describe()
    if len(_tasks) >= MAX_PENDING:
        metrics.GITHUB_COMMAND_ANSWERS.labels("dropped", "").inc()
        log.warning("comment %d not answered on GitHub: too many answers pending", comment_id)
        return "no reply on GitHub: too many answers pending"
    number = int(payload["issue"]["number"])
    task = asyncio.ensure_future(_send(side, scope, number, comment_id, said))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return said.describe()


def _where(payload: Mapping[str, Any]) -> tuple[Scope, int] | None:
    """The scope to answer in and the comment's id; None when the delivery lacks them."""
    installation = (payload.get("installation") or {}).get("id")
    repository = (payload.get("repository") or {}).get("full_name")
    issue = payload.get("issue") or {}
    comment_id = (payload.get("comment") or {}).get("id")
    number = issue.get("number")
    if not (isinstance(installation, int) and isinstance(comment_id, int)):
        return None
    if not isinstance(number, int):
        return None
    if not isinstance(repository, str) or not REPOSITORY.match(repository):
        return None
    permissions = writeback_permissions("pull_request" in issue, check_run=False)
    return Scope(installation, repository, permissions), comment_id


async def _send(
    side: GitHubSide, scope: Scope, number: int, comment_id: int, said: replies.Answer
) -> None:
    slots = _slots.setdefault(id(asyncio.get_running_loop()), asyncio.Semaphore(CONCURRENCY))
    try:
        async with asyncio.timeout(DEADLINE_SECONDS), slots:
            if not await githubrecords.claim_answer(side.rt.redis, comment_id):
                metrics.GITHUB_COMMAND_ANSWERS.labels("duplicate", "").inc()
                return
            if said.reaction is not None:
                reaction = said.reaction
                await _retrying(side, lambda: side.app.react(scope, comment_id, reaction))
            if said.reply is not None:
                reply = said.reply
                await _retrying(side, lambda: side.app.create_comment(scope, number, reply))
        metrics.GITHUB_COMMAND_ANSWERS.labels("sent", "").inc()
    except GitHubError as exc:
        metrics.GITHUB_COMMAND_ANSWERS.labels("failed", exc.reason).inc()
        log.warning("comment %d not answered on GitHub (%s): %s", comment_id, exc.reason, exc)
    except Exception as exc:  # Redis, a timeout, a bug: the answer is best effort.
        metrics.GITHUB_COMMAND_ANSWERS.labels("failed", type(exc).__name__).inc()
        log.warning("comment %d not answered on GitHub: %r", comment_id, exc)


async def _retrying(side: GitHubSide, call: Callable[[], Awaitable[object]]) -> None:
    for attempt in range(1, MAX_ATTEMPTS + 1):
        await asyncio.sleep(max(0.0, _paused_until(side) - time.monotonic()))
        try:
            await call()
            return
        except GitHubError as exc:
            if exc.reason == RATE_LIMITED:
                _pause(side, exc.retry_after or 60.0)
                metrics.GITHUB_COMMAND_ANSWERS.labels("rate_limited", exc.reason).inc()
            elif exc.permanent or exc.reason != UNAVAILABLE or attempt == MAX_ATTEMPTS:
                raise
            else:
                metrics.GITHUB_COMMAND_ANSWERS.labels("retried", exc.reason).inc()
                await asyncio.sleep(min(60.0, 2.0**attempt) * random.uniform(0.5, 1.0))
    raise GitHubError(RATE_LIMITED, "still rate limited after every attempt")


def _paused_until(side: GitHubSide) -> float:
    worker = side.worker
    return worker.paused_until if isinstance(worker, writeback.Worker) else 0.0


def _pause(side: GitHubSide, seconds: float) -> None:
    """The App's rate limit is one for write-back and answers: both wait it out."""
    until = time.monotonic() + seconds
    if not isinstance(side.worker, writeback.Worker):
        side.worker = writeback.Worker(side)
    side.worker.paused_until = max(side.worker.paused_until, until)
