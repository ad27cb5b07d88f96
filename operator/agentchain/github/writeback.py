"""The write-back worker: AgentJob changes in, coalesced GitHub edits out.

The AgentJob handler calls :func:`observe` for every watch event (one line in
``handlers/jobevents.py``).  ``observe`` is synchronous and does no I/O: it notes that
the job's chain is due for a write-back a short delay from now
(``AGENTCHAIN_GITHUB_WRITEBACK_DELAY_SECONDS``) and returns, so a chain never waits
for GitHub.  Every change of a chain inside that delay joins the same write-back, so a
fast chain makes a few edits, not one per transition; a change during a write-back
schedules one more after it.

The worker (one asyncio task per runtime, started on first use) runs at most
:data:`CONCURRENCY` chain write-backs at once (``posting.flush``), and reacts to
failures by their reason (``github/githuberrors.py``):

- **rate limited** (429, secondary limit, ``X-RateLimit-Remaining: 0``): the whole
  worker pauses until ``Retry-After`` / the reset, then sends the *latest* render
  (never a stale queued one). Chains go on meanwhile; their comments catch up;
- **transient** (5xx, timeouts, Kubernetes or Redis trouble, another writer's creation
  claim): retried with exponential back-off, or when it is known to be over (a
  ``Retry-After``, the end of the claim, which a crashed writer never releases), at most
  :data:`MAX_ATTEMPTS` times;
- **permanent** (bad key, App not installed, permission missing) or out of attempts:
  given up until the chain changes again, with a Warning Event on the chain's root
  AgentJob and on its AiAgent (reason ``GitHubWriteBackFailed``, the cause in the
  message, once per cause), the AiAgent's condition ``GitHubWriteBack=False`` (the cause
  as its reason; ``True`` again after its next chain is written), a metric
  (``agentchain_github_writebacks_total{result="failed",reason=...}``) and a log line.

Nothing here can fail a chain: every exception ends in the worker.  Nothing pending
is lost by a crash either: a restarted operator's watch lists every AgentJob again,
each of which is observed, and the digest comparison makes an unchanged chain cost
one list and no GitHub request.

When tracing, the worker keeps for each chain due the job whose change made it due
last, and the retries and rate limits a write-back took, for the spans of its writes
(``posting.flush``; ``traces/rules/githubwrites``); nothing is built when not.

A chain's reviews (``reviewing.py``) go with its write-back; :func:`pull_opened` is
how the workspace's pull request, opened after the reviewer ended, brings them about.

The worker also revokes a job's installation tokens when the job ends
(``tokenminting.revoke``), off the job's path like the write-back.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import random
import time
from typing import Any

from agentchain import metrics, models
from agentchain.aiagents import conditionwriting
from agentchain.cancelling import stop_tasks
from agentchain.core.runtime import Runtime
from agentchain.github import posting, tokenminting
from agentchain.github.appruntime import GitHubSide, side_of
from agentchain.github.githuberrors import RATE_LIMITED, UNAVAILABLE, GitHubError
from agentchain.kube import events
from agentchain.models.agentjob import TERMINAL_PHASES
from agentchain.models.conditions import GITHUB_WRITE_BACK, Condition
from agentchain.traces.rules import githubwrites

log = logging.getLogger(__name__)
Obj = dict[str, Any]
ChainKey = tuple[str, str]
CONCURRENCY = 4
MAX_ATTEMPTS = 8
MAX_BACKOFF_SECONDS = 300.0
TOKEN_LIFETIME_SECONDS = 3600
REASON_FAILED = "GitHubWriteBackFailed"


def observe(rt: Runtime, event_type: str | None, obj: Obj) -> None:
    """Note an AgentJob change: its chain's write-back, its tokens' revocation. No I/O."""
    event = (obj.get("spec") or {}).get("event") or {}
    if not event.get("installationId"):
        return  # Not from a delivery through an App installation: nothing on GitHub.
    side = side_of(rt)
    if side is None:
        return
    worker = _worker(side)
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    if event_type == "DELETED" or status.get("phase") in TERMINAL_PHASES:
        if _tokens_may_live(status):
            worker.revoke(namespace, name, str(meta.get("uid") or ""))
    if event_type == "DELETED":
        return
    chain = status.get("chainId") or (meta.get("labels") or {}).get(models.CHAIN_ID)
    # A follow-up round shows in the comment of the chain it continues, not one of its own
    # (posting.list_chain takes only rounds the operator vouches for).
    continues = event.get("continues")
    if isinstance(continues, str) and continues and chain:
        chain = continues
        if status.get("phase") not in TERMINAL_PHASES:  # The chain runs again.
            worker.reopen.add((namespace, chain))
    if chain and event.get("number"):
        # The job whose change brought the write-back about, last: its spans hang under
        # it (``traces/rules/githubwrites``); a round's job is in a trace of its own.
        worker.cause[(namespace, chain)] = (name, None if continues else chain)
        worker.mark((namespace, chain))


async def pull_opened(
    rt: Runtime, namespace: str, chain: str, repository: str, number: int
) -> None:
    """The chain's workspace opened (or found) pull request ``number`` of ``repository``:
    recorded for its reviewers' reviews, and the chain's write-back due again."""
    side = side_of(rt)
    if side is None:
        return
    await side.records.set_pull(namespace, chain, repository, number)
    _worker(side).mark((namespace, chain))


def _tokens_may_live(status: Obj) -> bool:
    """Whether a token minted for this job could still be alive (they live an hour)."""
    ended = status.get("completionTime")
    if not ended:
        return True
    try:
        when = dt.datetime.fromisoformat(str(ended).replace("Z", "+00:00"))
    except ValueError:
        return True
    return (dt.datetime.now(dt.UTC) - when).total_seconds() < TOKEN_LIFETIME_SECONDS


def _worker(side: GitHubSide) -> Worker:
    if not isinstance(side.worker, Worker):
        side.worker = Worker(side)
    return side.worker


class Worker:
    def __init__(self, side: GitHubSide) -> None:
        self.side = side
        self.delay = side.rt.settings.github_writeback_delay_seconds
        self.due: dict[ChainKey, float] = {}
        self.running: set[ChainKey] = set()
        self.again: set[ChainKey] = set()
        self.attempts: dict[ChainKey, int] = {}
        self.reopen: set[ChainKey] = set()
        """Chains a follow-up round runs in: written again although their end was."""
        self.cause: dict[ChainKey, tuple[str, str | None]] = {}
        """The job that changed last in each chain due (and its chain, None for a round)."""
        self.limited: dict[ChainKey, tuple[int, float]] = {}
        """The rate limits each chain's write-back hit, and the seconds it waited."""
        self.paused_until = 0.0
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.Task[None] | None = None

    # -- feeding ----------------------------------------------------------------------
    def mark(self, key: ChainKey, delay: float | None = None) -> None:
        if key in self.running:
            self.again.add(key)
            return
        due = time.monotonic() + (self.delay if delay is None else delay)
        self.due[key] = min(self.due.get(key, due), due)
        self._ensure_loop()
        self._wake.set()

    def revoke(self, namespace: str, name: str, uid: str = "") -> None:
        self._spawn(tokenminting.revoke(self.side, namespace, name, uid or None))

    def _spawn(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _ensure_loop(self) -> None:
        if self._loop is None or self._loop.done():
            self._loop = asyncio.create_task(self._run(), name="github-writeback")

    async def stop(self) -> None:
        await stop_tasks([t for t in [self._loop, *self._tasks] if t is not None])

    # -- the loop ---------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._wake.clear()
            now = time.monotonic()
            for key in self._ready(now):
                del self.due[key]
                self.running.add(key)
                self._spawn(self._flush(key))
            await self._sleep(now)

    def _ready(self, now: float) -> list[ChainKey]:
        if now < self.paused_until:
            return []
        room = CONCURRENCY - len(self.running)
        ready = sorted((t, k) for k, t in self.due.items() if t <= now)
        return [k for _, k in ready[: max(0, room)]]

    async def _sleep(self, now: float) -> None:
        waits = [t for k, t in self.due.items() if k not in self.running]
        until = max(min(waits, default=now + 3600), self.paused_until)
        with contextlib.suppress(TimeoutError):  # Not wait_for: on 3.11 it can lose a cancel.
            async with asyncio.timeout(max(0.01, until - now)):
                await self._wake.wait()

    async def _flush(self, key: ChainKey) -> None:
        namespace, chain = key
        retry_in: float | None = None
        try:
            if key in self.reopen:
                self.reopen.discard(key)
                await self.side.records.reopen(namespace, chain)
            cause = self.cause.get(key)
            result, agent = await posting.flush(self.side, namespace, chain, self._run_of(key))
            metrics.GITHUB_WRITEBACKS.labels(result, "").inc()
            self._done(key, cause)
            if agent is not None:
                await agent_condition(agent, None, "")
        except GitHubError as exc:
            retry_in = await self._failed(key, exc)
        except Exception as exc:  # Kubernetes, Redis, a bug: retried, never raised.
            log.warning("write-back of chain %s/%s failed: %r", namespace, chain, exc)
            error = GitHubError(UNAVAILABLE, f"{type(exc).__name__}: {exc}")
            retry_in = await self._failed(key, error)
        finally:
            self.running.discard(key)
            if retry_in is not None:
                self.again.discard(key)  # The retry renders the chain as it is by then.
                self.mark(key, retry_in)
            elif key in self.again:
                self.again.discard(key)
                self.mark(key)
            self._wake.set()

    def _done(self, key: ChainKey, cause: tuple[str, str | None] | None) -> None:
        """Forget what a finished write-back kept (its cause unless a newer came)."""
        self.attempts.pop(key, None)
        self.limited.pop(key, None)
        if self.cause.get(key) == cause:
            self.cause.pop(key, None)

    def _run_of(self, key: ChainKey) -> githubwrites.WriteBack | None:
        """What this run's spans say of it; None, and nothing built, when not tracing."""
        cause, cause_chain = self.cause.get(key, (None, None))
        if not self.side.rt.traces.enabled:
            return None
        limited, waited = self.limited.get(key, (0, 0.0))
        return githubwrites.WriteBack(
            key[0], key[1], cause, cause_chain, self.attempts.get(key, 0), limited, waited
        )

    async def _failed(self, key: ChainKey, exc: GitHubError) -> float | None:
        """When to try ``key`` again (None: given up and reported)."""
        if exc.reason == RATE_LIMITED:
            wait = exc.retry_after or 60.0
            limited, waited = self.limited.get(key, (0, 0.0))
            self.limited[key] = (limited + 1, waited + wait)
            self.paused_until = max(self.paused_until, time.monotonic() + wait)
            metrics.GITHUB_WRITEBACKS.labels("rate_limited", exc.reason).inc()
            log.info("GitHub rate limit: write-back paused for %.0f s", wait)
            return wait
        attempt = self.attempts.get(key, 0) + 1
        if exc.permanent or attempt >= MAX_ATTEMPTS:
            self._done(key, self.cause.get(key))
            await self._report(key, exc)
            return None
        self.attempts[key] = attempt
        metrics.GITHUB_WRITEBACKS.labels("retried", exc.reason).inc()
        if exc.retry_after is not None:  # Known to be over by then (a claim's end, a 503's
            # Retry-After): no sooner, and no later than that either.
            return min(MAX_BACKOFF_SECONDS, exc.retry_after) + random.uniform(0.1, 1.0)
        return min(MAX_BACKOFF_SECONDS, 2.0**attempt) * random.uniform(0.5, 1.0)

    async def _report(self, key: ChainKey, exc: GitHubError) -> None:
        namespace, chain = key
        metrics.GITHUB_WRITEBACKS.labels("failed", exc.reason).inc()
        message = f"Chain {chain} could not be written back to GitHub ({exc.reason}): {exc}"
        log.warning("%s: %s", namespace, message)
        try:
            listed = await posting.list_chain(self.side, namespace, chain, rounds=False)
            # Once per cause on the job and on its agent (not once per chain there).
            about = [] if listed is None else [listed.root, listed.agent]
            for obj in (o for o in about if o is not None):
                await events.emit(
                    obj, "Warning", REASON_FAILED, message, key=f"github:{exc.reason}"
                )
            if listed is not None and listed.agent is not None:
                await agent_condition(listed.agent, exc.reason, message)
        except Exception as error:  # The report is best effort; the metric and log stand.
            log.warning("could not report the write-back failure of %s: %r", chain, error)


async def agent_condition(agent: Obj, failed: str | None, message: str) -> None:
    """Best effort: the Event, the metric and the log line say it anyway."""
    try:
        await _agent_condition(agent, failed, message)
    except Exception as error:
        log.warning(
            "could not set %s's GitHubWriteBack condition: %r", agent["metadata"]["name"], error
        )


async def _agent_condition(agent: Obj, failed: str | None, message: str) -> None:
    """Set the AiAgent's ``GitHubWriteBack`` condition (``failed``: the cause, else it
    went through), writing only a change of status or reason (``agent`` may be the
    catalog's, a little stale: ``agentconditions`` writes at its version)."""
    wanted = Condition(
        type=GITHUB_WRITE_BACK,
        status="False" if failed else "True",
        reason=failed or "WrittenBack",
        message=message or "Its chains' comments and Check Runs are written.",
    )
    await conditionwriting.set_conditions(agent, [wanted], same=_same_outcome)


def _same_outcome(a: Condition, b: Condition) -> bool:
    return (a.status, a.reason) == (b.status, b.reason)
