"""One write-back of one chain: list its jobs, render, and bring GitHub up to date.

Called by the worker (``writeback.py``), never on a chain's own path.  Each call is
idempotent and works from recorded state only, so it can be repeated at any time
(after a crash, a redelivery, a retry) and converges on one comment and one Check Run
showing the chain as it is now:

1. the chain's AgentJobs are listed by their chain-id label and rendered
   (``github/rules/progress.py``), with each job's last progress note (an annotation its
   agent sets through the job API); the digest of the render is compared with the digest
   last written (``github/githubrecords.py``): equal means nothing to send;
2. a recorded comment id is edited in place; without one, the creation is claimed
   (one writer at a time), the issue's comments are searched for the operator's own
   marked comment (a crash may have created it without recording it), and only
   when there is none is a comment created; its id is recorded right after;
3. the same for the Check Run of a pull request, found again by its ``external_id``;
4. each follow-up round that continues the chain writes a Check Run of its own, the same
   way, on the head its delivery named (the pull request's head whose check failed or
   that was reviewed): the first chain's Check Run is on the head it started from, and a
   pull request's newest head shows how its newest round went. It is the round's own
   record (its chain id: its ``external_id``, its claim), so a crash or a redelivery
   finds it again like the first chain's.

A comment deleted by someone while the chain runs (404 on edit) is created again:
the chain's progress stays visible.  Once the chain's end is written the chain is
marked final and never listed or written again (a restart's watch shows every old
job; each costs one Redis read).  The crashpoint ``github-comment-created`` (between creating and
recording) is how the e2e suite proves the search.

When tracing, each write GitHub answered is a span (``traces/rules/githubwrites``),
recorded before the digest or id that settles it: a write sent again after a crash in
between names the same span, which the outbox keeps once.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal

from agentchain import faults, models
from agentchain.core.rules import provenance
from agentchain.github import apps, reviewing, threadreplies
from agentchain.github.appruntime import GitHubSide
from agentchain.github.apps import is_not_found
from agentchain.github.githuberrors import UNAVAILABLE, GitHubError
from agentchain.github.rules import progress
from agentchain.github.rules.githubscope import NoScope, Target, writeback_target
from agentchain.kube import resources
from agentchain.models.agentjob import AgentJob, JobEvent
from agentchain.models.aiagent import DEFAULT_HANDOFF_HEADING, AiAgent, GitHubWriteBack
from agentchain.store import keys, sealing
from agentchain.traces.rules import githubwrites, spans
from agentchain.traces.rules.githubwrites import WriteBack

Obj = dict[str, Any]
Result = Literal["written", "unchanged", "skipped"]
MAX_CHAIN_OBJECTS = 500
MAX_ROUNDS_LISTED = 25
CLAIM_MARGIN_SECONDS = 5


@dataclass(frozen=True)
class Listed:
    """A chain as listed: its jobs, the root job's object and what its agent asks."""

    jobs: list[progress.JobRecord]
    root: Obj
    write_back: GitHubWriteBack
    handoff_heading: str
    agent: Obj | None = None
    """The root job's AiAgent (None when it is gone or its triggerName is ambiguous)."""
    vouched: bool = False
    """Whether the operator vouches for the root job's event (``store.sealing``)."""
    reviewers: frozenset[str] = frozenset()
    """Trigger names of the agents whose jobs' verdicts are posted as reviews."""
    objects: dict[str, Obj] = field(default_factory=dict)
    """The chain's AgentJobs by name (for their Events)."""
    rounds: dict[str, JobEvent] = field(default_factory=dict)
    """Each follow-up round listed with the chain: its chain id and its root's vouched event."""
    headings: dict[str, str] = field(default_factory=dict)
    """Each agent's hand-off heading by trigger name (a name two AiAgents share: none)."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def list_chain(
    side: GitHubSide, namespace: str, chain_id: str, rounds: bool = True
) -> Listed | None:
    """The chain's jobs and what its root's agent asks; with ``rounds``, the jobs of the
    follow-up rounds that continue it too (only a chain whose workspace opened a pull
    request, or that was started on one, can have any, so the write-back asks only for
    those)."""
    items, _ = await resources.list_objects(
        namespace,
        resources.AGENTJOBS,
        label_selector=f"{models.CHAIN_ID}={chain_id}",
        limit=MAX_CHAIN_OBJECTS,
    )
    round_events: dict[str, JobEvent] = {}
    if rounds:
        round_items, round_events = await _rounds(side, namespace, chain_id)
        items += round_items
    # Only jobs the operator placed in the chain: a hand-made AgentJob carrying the
    # chain's label is no step of it and never reaches GitHub.
    items = [i for i in items if sealing.placed(side.rt.operator_keys, i)]
    if not items:
        return None
    jobs = [
        progress.JobRecord(
            i["metadata"]["name"],
            str(i["metadata"].get("creationTimestamp") or ""),
            AgentJob.model_validate({"spec": i.get("spec") or {}, "status": i.get("status") or {}}),
            (i["metadata"].get("annotations") or {}).get(models.PROGRESS_NOTE),
        )
        for i in items
    ]
    root_index = min(
        range(len(jobs)), key=lambda n: (jobs[n].job.status.chain_depth or 0, jobs[n].created)
    )
    root = items[root_index]
    role = jobs[root_index].job.spec.agent_role
    entries = await side.rt.agents.agents_in(namespace)
    found = [(obj, agent) for obj, agent in entries if agent.spec.trigger_name == role]
    agent_obj, spec = (found[0][0], found[0][1].spec) if len(found) == 1 else (None, None)
    access = spec.github if spec is not None else None
    heading = spec.handoff_heading if spec is not None else DEFAULT_HANDOFF_HEADING
    write_back = access.write_back if access else GitHubWriteBack()
    vouched = sealing.vouched(side.rt.operator_keys, root)
    objects = {i["metadata"]["name"]: i for i in items}
    reviewers = _reviewers([agent for _, agent in entries])
    headings = _headings([agent for _, agent in entries])
    return Listed(
        jobs, root, write_back, heading, agent_obj, vouched, reviewers, objects,
        round_events, headings,
    )  # fmt: skip


async def _rounds(
    side: GitHubSide, namespace: str, chain_id: str
) -> tuple[list[Obj], dict[str, JobEvent]]:
    """The jobs of the follow-up rounds that continue the chain, and each round's event by
    its chain id: each round's root carries the chain's id as a label (for this listing)
    and in its sealed event (what makes it a round of this chain: a label alone is
    anyone's to write)."""
    roots, _ = await resources.list_objects(
        namespace,
        resources.AGENTJOBS,
        label_selector=f"{models.CONTINUES}={chain_id}",
        limit=MAX_ROUNDS_LISTED,
    )
    found: list[Obj] = []
    events: dict[str, JobEvent] = {}
    for root in roots:
        spec = AgentJob.model_validate({"spec": root.get("spec") or {}}).spec
        sealed = sealing.vouched(side.rt.operator_keys, root)
        event = provenance.trusted_event(spec.event, sealed)
        round_chain = (root["metadata"].get("labels") or {}).get(models.CHAIN_ID)
        if event is None or event.continues != chain_id or not round_chain:
            continue
        items, _ = await resources.list_objects(
            namespace,
            resources.AGENTJOBS,
            label_selector=f"{models.CHAIN_ID}={round_chain}",
            limit=MAX_CHAIN_OBJECTS,
        )
        found += items
        events[round_chain] = event
    return found, events


def _reviewers(agents: list[AiAgent]) -> frozenset[str]:
    """Trigger names whose every AiAgent asks for reviews (``spec.github.review``): one
    that does not, under the same name, keeps the name out."""
    asks: dict[str, bool] = {}
    for agent in agents:
        name, access = agent.spec.trigger_name, agent.spec.github
        asks[name] = asks.get(name, True) and access is not None and access.review
    return frozenset(name for name, yes in asks.items() if yes)


def _headings(agents: list[AiAgent]) -> dict[str, str]:
    """Each trigger name's hand-off heading, for names only one AiAgent has."""
    named: dict[str, list[str]] = {}
    for agent in agents:
        named.setdefault(agent.spec.trigger_name, []).append(agent.spec.handoff_heading)
    return {name: found[0] for name, found in named.items() if len(found) == 1}


def target_of(listed: Listed) -> Target | NoScope:
    root = AgentJob.model_validate({"spec": listed.root.get("spec") or {}})
    event = provenance.trusted_event(root.spec.event, listed.vouched)
    return writeback_target(event, check_run=listed.write_back.check_run)


async def flush(
    side: GitHubSide, namespace: str, chain_id: str, run: WriteBack | None = None
) -> tuple[Result, Obj | None]:
    """Bring the chain's comment and Check Run up to date; its root job's AiAgent (for
    its ``GitHubWriteBack`` condition) when something was written.  ``run``: what the
    spans of its writes say of this run (None: not tracing).

    A chain whose end is written is not listed again: after a restart the watch
    shows every job of every old chain, and their write-back costs one Redis read.
    """
    record = await side.records.get(namespace, chain_id)
    if record.final:
        return "unchanged", None
    rounds = record.pull is not None
    listed = await list_chain(side, namespace, chain_id, rounds=rounds)
    if listed is None:
        return "skipped", None
    target = target_of(listed)
    if isinstance(target, NoScope):
        return "skipped", None
    if not rounds and target.pull_request:  # Started on a pull request: it has rounds too.
        listed = await list_chain(side, namespace, chain_id, rounds=True) or listed
    view = progress.chain_view(
        namespace, chain_id, listed.jobs, listed.handoff_heading, listed.headings
    )
    run = _caused(side, listed, run)
    results: list[Result] = []
    wb = listed.write_back
    if wb.comment:
        results.append(await _comment(side, target, view, wb, run))
    if wb.check_run and target.pull_request and target.head_sha:
        results.append(await _check_run(side, target, view, wb, run))
    for round_chain, event in listed.rounds.items() if wb.check_run else ():
        results.append(await _round_check_run(side, listed, (round_chain, event), run))
    claim = lambda: claimed(side, namespace, chain_id)  # noqa: E731
    reviewed = reviewing.Reviewed(listed.jobs, listed.reviewers, listed.objects, wb.allow_mentions)
    await reviewing.post_due(side, namespace, chain_id, reviewed, target, record, claim, run)
    await threadreplies.post_due(
        side, namespace, chain_id, listed.objects, target, record, claim,
        headings=listed.headings, heading=listed.handoff_heading,
        allow_mentions=wb.allow_mentions, run=run,
    )  # fmt: skip
    if view.done:
        await side.records.set_final(namespace, chain_id, record.pull)
    if "written" in results:
        return "written", listed.agent
    return "unchanged", None


async def _round_check_run(
    side: GitHubSide, listed: Listed, round_of: tuple[str, JobEvent], run: WriteBack | None
) -> Result:
    """A follow-up round's own Check Run, on the head its event names, showing its jobs as
    the first chain's shows the chain's (its agent's hand-off heading for its outcome)."""
    round_chain, event = round_of
    target = writeback_target(event, check_run=True)
    if isinstance(target, NoScope) or not target.pull_request or not target.head_sha:
        return "unchanged"
    jobs = [
        j for j in listed.jobs if side.chain_of(listed.objects.get(j.name) or {}) == round_chain
    ]
    if not jobs:
        return "unchanged"
    heading = listed.headings.get(jobs[0].job.spec.agent_role, listed.handoff_heading)
    namespace = listed.root["metadata"]["namespace"]
    view = progress.chain_view(namespace, round_chain, jobs, heading, listed.headings)
    return await _check_run(side, target, view, listed.write_back, run)


def _caused(side: GitHubSide, listed: Listed, run: WriteBack | None) -> WriteBack | None:
    """``run`` with its cause's chain as the operator placed it: a job the listing does
    not hold (a hand-made one with the chain's label, one deleted) is no cause."""
    if run is None or run.cause is None:
        return run
    obj = listed.objects.get(run.cause)
    chain = side.chain_of(obj) if obj is not None else None
    return replace(run, cause=run.cause if chain else None, cause_chain=chain)


def _write(
    what: githubwrites.What, action: githubwrites.Action, start: int, target: Target
) -> githubwrites.Write:
    """A write of the chain's comment or Check Run that GitHub just answered."""
    repository, number, status = target.scope.repository, target.number, apps.last_status()
    return githubwrites.Write(what, action, start, time.time_ns(), status, repository, number)


async def _wrote(
    side: GitHubSide,
    run: WriteBack | None,
    write: tuple[githubwrites.What, githubwrites.Action, int, Target],
    digests: tuple[str, str | None],
) -> None:
    """Record the span of a comment or Check Run write, before its digest is (a replay
    sends it again and names the same span)."""
    done, rendered = _write(*write), githubwrites.Rendered(*digests)
    await side.traced(run, lambda r: githubwrites.render_span(r, done, rendered))


async def _comment(
    side: GitHubSide,
    target: Target,
    view: progress.ChainView,
    wb: GitHubWriteBack,
    run: WriteBack | None = None,
) -> Result:
    url = side.rt.settings.github_dashboard_url
    ns, chain = view.namespace, view.chain_id
    traced = side.rt.traces.enabled  # The trace id says where to look only if there is one.
    body = progress.render_comment(
        view,
        dashboard_url=url,
        allow_mentions=wb.allow_mentions,
        trace=f"{spans.trace_id(chain):032x}" if traced else "",
        trace_url=spans.trace_url(side.rt.settings.trace_url, chain) if traced else None,
    )
    record = await side.records.get(ns, chain)
    if record.comment_digest == digest(body):
        return "unchanged"
    app, scope, start = side.app, target.scope, time.time_ns()
    digests = (digest(body), record.comment_digest)
    if record.comment_id is not None:
        try:
            await app.update_comment(scope, record.comment_id, body)
        except GitHubError as exc:
            if not is_not_found(exc):
                raise
            await side.records.forget_id(ns, chain, "comment")  # Deleted by someone.
            digests = (digest(body), None)  # As a replay will find the record.
        else:
            await _wrote(side, run, ("comment", "updated", start, target), digests)
            await side.records.set_digest(ns, chain, "comment", digest(body))
            return "written"
    async with claimed(side, ns, chain):
        found = await app.find_comment(scope, target.number, progress.marker(ns, chain))
        if found is None:
            found = await app.create_comment(scope, target.number, body)
            faults.crashpoint("github-comment-created")
            action: githubwrites.Action = "created"
        else:
            await app.update_comment(scope, found, body)
            action = "found"
        await _wrote(side, run, ("comment", action, start, target), digests)
        await side.records.set_id(ns, chain, "comment", found)
        await side.records.set_digest(ns, chain, "comment", digest(body))
    return "written"


async def _check_run(
    side: GitHubSide,
    target: Target,
    view: progress.ChainView,
    wb: GitHubWriteBack,
    run: WriteBack | None = None,
) -> Result:
    settings = side.rt.settings
    url = settings.github_dashboard_url
    fields = progress.check_run(view, dashboard_url=url, allow_mentions=wb.allow_mentions).body()
    if url:
        fields["details_url"] = f"{url.rstrip('/')}/ui/chains/{view.namespace}/{view.chain_id}"
    ns, chain = view.namespace, view.chain_id
    body_digest = digest(repr(sorted(fields.items())))
    record = await side.records.get(ns, chain)
    if record.check_digest == body_digest:
        return "unchanged"
    app, scope, sha = side.app, target.scope, target.head_sha
    assert sha is not None
    start, digests = time.time_ns(), (body_digest, record.check_digest)
    if record.check_id is not None:
        try:
            await app.update_check_run(scope, record.check_id, fields)
        except GitHubError as exc:
            if not is_not_found(exc):
                raise
            await side.records.forget_id(ns, chain, "check")
            digests = (body_digest, None)  # As a replay will find the record.
        else:
            await _wrote(side, run, ("check_run", "updated", start, target), digests)
            await side.records.set_digest(ns, chain, "check", body_digest)
            return "written"
    external = progress.external_id(ns, chain)
    async with claimed(side, ns, chain):
        found = await app.find_check_run(scope, settings.github_check_name, sha, external)
        if found is None:
            found = await app.create_check_run(
                scope, settings.github_check_name, sha, external, fields
            )
            action: githubwrites.Action = "created"
        else:
            await app.update_check_run(scope, found, fields)
            action = "found"
        await _wrote(side, run, ("check_run", action, start, target), digests)
        await side.records.set_id(ns, chain, "check", found)
        await side.records.set_digest(ns, chain, "check", body_digest)
    return "written"


class claimed:
    """``async with``: hold the chain's creation claim, or fail to be retried later.

    The work inside must end before the claim's TTL does (else a second writer could
    start creating while this one still is): it is cut off a few seconds before, and
    the next attempt finds whatever it got done by its marker.
    """

    def __init__(self, side: GitHubSide, namespace: str, chain_id: str) -> None:
        self._side, self._ns, self._chain = side, namespace, chain_id
        self._owner: str | None = None
        self._deadline = asyncio.timeout(keys.GITHUB_CLAIM_TTL_SECONDS - CLAIM_MARGIN_SECONDS)

    async def __aenter__(self) -> None:
        self._owner = await self._side.records.claim(self._ns, self._chain)
        if self._owner is None:
            # Tried again when that claim ends at the latest: its writer may be dead
            # (a crash inside the claim), and back-off alone would wait longer than it.
            left = await self._side.records.claim_left(self._ns, self._chain)
            message = "another writer is creating this chain's GitHub objects"
            raise GitHubError(UNAVAILABLE, message, retry_after=left)
        await self._deadline.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self._deadline.__aexit__(exc_type, exc, tb)
        finally:
            if self._owner is not None:
                await self._side.records.release(self._ns, self._chain, self._owner)
