"""``POST /webhooks/github``: verify, deduplicate, and queue one AgentJob per match.

Checks run cheapest-first and the body is read last, so nothing unauthenticated
costs more than its headers: a declared ``Content-Length`` over the cap is
refused before a byte is read, then the headers, the content type and the
``Content-Encoding`` (none is decoded: 415).  The body is then read under the
limits of ``intake.py``: a reservation from the in-flight byte budget (503 with
``Retry-After`` when it is spent), a deadline for the whole body (408), and the
cap while streaming (413), so a lying or absent ``Content-Length`` never makes
the process buffer more than the cap, and all unauthenticated bodies together
never more than the budget.  Those refusals answer ``Connection: close``; aiohttp
still reads and discards what the client goes on sending for its lingering time
(10 s) before it closes, so the client can read the answer, but nothing is
buffered.  A body that stops parsing mid-read (broken chunked framing) is a 400
``unreadable body`` counted as invalid.
Payload text must be valid Unicode: a JSON escape of a lone UTF-16 surrogate
(``"\\ud800"``) is a 400 like any malformed payload, so it never reaches an
AgentJob spec or Redis (``requests.loads_unicode``).

Design decision: a durable queue in Redis between the 202 and the API server (as
Argo Events puts its event bus between the event source and the sensors).  Creating
an AgentJob is an API server round trip; doing it before answering
made the 202 latency under a burst 20-30x that of a bare endpoint.  So a verified
delivery is matched against an in-memory AiAgent listing refreshed every few seconds
(``listing.SharedAgentListing``), then ONE atomic Redis step
(:meth:`~agentchain.store.deliveries.DeliveryLog.accept`) claims the delivery record
(72 h) and queues the planned AgentJob bodies, and the endpoint answers 202 with the
job names.  The dispatcher (``dispatch.py``), a task of the same web app, creates
them; an entry leaves the queue only once its create answered, and a starting
dispatcher first drains what a killed one left, so a 202 never loses a job.  If
Redis does not answer, nothing is queued and the answer is 503, never 202.

Names are derived from (hook id, delivery id, agent), so creating is idempotent.
A delivery is recorded under its delivery id *and* the sha256 of its signed body
(the headers are unsigned), and the first accepted copy fixes its content.  A
duplicate (days later, after a restart, or the same body under another delivery or
hook id) answers from the Redis record (``duplicate``); a redelivery of the same body
under the same id also queues again the jobs the record names (only those, even if
agents changed since, never replacing a queued body), which completes a delivery
whose first dispatch failed and is a no-op (``AlreadyExists``) otherwise.  In the
answer, a job's ``created`` means *newly accepted by this delivery*: true for every
job of a first delivery, false on a duplicate; the AgentJob itself appears when the
dispatcher has created it.

A ``/agentchain`` comment command (``commands.py``) acts only after that record is
claimed, for the first copy of a delivery, and at most once per comment: its comment id
is claimed in Redis first (``github/githubrecords.claim_command``, 72 h), so neither a
replayed delivery nor the same comment under a new delivery id or body acts again on
whatever job waits by then.  Their answer's ``command.result`` is ``duplicate``.

Secrets, the signature and raw headers are never logged; only the delivery id.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import logging
import re
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from redis.exceptions import RedisError

from agentchain import metrics, models
from agentchain.core.rules import naming
from agentchain.core.runtime import Runtime
from agentchain.flow import admitting
from agentchain.flow.slots import AdmissionStore
from agentchain.github import collaborators, commandreplies, githubrecords, roundrecords
from agentchain.github.rules import followups
from agentchain.github.rules.matching import (
    Ignored,
    Match,
    event_for,
    event_from_payload,
    match_event,
    needs_app_slug,
)
from agentchain.hop.rules import chains
from agentchain.kube import apierrors
from agentchain.models.agentjob import AgentJobSpec, JobEvent
from agentchain.store import sealing
from agentchain.store.deliveries import NotReplicated, QueuedJob
from agentchain.store.signing import OperatorKeys
from agentchain.traces.rules import spans
from agentchain.web import intake, listing
from agentchain.web.hooks import appslug, commands, followrounds, groupstamps
from agentchain.web.hooks.jobqueue import Dispatcher
from agentchain.web.hooks.signatures import verify_signature
from agentchain.web.jobapi import bodies
from agentchain.web.requests import loads_unicode
from agentchain.web.responses import ApiError, json_response

log = logging.getLogger(__name__)

PATH = "/webhooks/github"
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
NO_HOOK_ID = "unknown"
# Allocations between young-generation collections (CPython's default is 700).
GC_YOUNG_THRESHOLD = 10_000
# Past this the delivery is refused (503) rather than answered late: GitHub gives up at 10 s.
ACCEPT_TIMEOUT_SECONDS = 5.0
_HEADER_VALUE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# GitHub's event names are lower-case words joined by "_", some with digits
# ("projects_v2_item", "projects_v2_status_update"); a letter comes first.
_EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_RESULT_BY_STATUS = {
    400: "invalid",
    401: "unauthorized",
    408: "timeout",
    413: "too_large",
    415: "invalid",
    503: "busy",
}


class WebhookNotConfigured(RuntimeError):
    """No webhook secret is configured: the endpoint refuses to exist (fail closed)."""


@dataclass(frozen=True)
class Delivery:
    event: str
    action: str | None
    delivery_id: str
    hook_id: str
    payload: dict[str, Any]
    body_sha256: str  # Of the signed bytes: what deduplication keys on, with the id.


@dataclass(frozen=True)
class Planned(QueuedJob):
    agent: str


def _header(request: web.Request, name: str, pattern: re.Pattern[str]) -> str:
    value = request.headers.get(name)
    if value is None or not pattern.fullmatch(value):
        raise ApiError(400, f"missing or invalid {name} header", f"GitHub always sends {name}.")
    return value


def parse_payload(content_type: str, body: bytes | bytearray) -> dict[str, Any]:
    """The delivery's JSON object, from a JSON body or a form's ``payload`` field.

    Its strings are valid Unicode: a lone surrogate escape is refused here, as malformed,
    rather than failing wherever the text is encoded next (Redis, a job spec, an answer).
    """
    try:
        if content_type == FORM_TYPE:
            fields = urllib.parse.parse_qs(body.decode("utf-8"), max_num_fields=16, errors="strict")
            body = (fields.get("payload") or [""])[0].encode("utf-8")
        payload = loads_unicode(body)
    except (ValueError, RecursionError) as exc:
        detail = "a string holds an unpaired UTF-16 surrogate" if "surrogate" in str(exc) else ""
        raise ApiError(
            400, "malformed payload", f"Not valid JSON: {detail or type(exc).__name__}."
        ) from exc
    if not isinstance(payload, dict):
        raise ApiError(400, "malformed payload", "The payload must be a JSON object.")
    return payload


class GithubWebhook:
    """The endpoint's state: the runtime, secrets known to be configured, the dispatcher."""

    def __init__(self, rt: Runtime, dispatcher: Dispatcher | None = None) -> None:
        if not rt.settings.webhook_secrets or not all(rt.settings.webhook_secrets):
            raise WebhookNotConfigured(
                "no GitHub webhook secret configured (AGENTCHAIN_WEBHOOK_SECRETS or "
                "AGENTCHAIN_WEBHOOK_SECRETS_FILE): refusing to serve POST /webhooks/github"
            )
        self.rt = rt
        # Never below one body at the cap, or a delivery at the cap could never be read.
        budget = max(rt.settings.webhook_inflight_bytes, rt.settings.webhook_max_bytes)
        self.budget = intake.BodyBudget(budget)
        self.agents = listing.SharedAgentListing(rt.settings.namespaces)
        self.app_slug = appslug.AppSlug(rt)
        # None: queue only (tests of a dispatcher that died before creating anything).
        self.dispatcher = dispatcher

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            delivery = await self._accept(request)
        except ApiError as exc:
            metrics.WEBHOOK_DELIVERIES.labels(result=_RESULT_BY_STATUS[exc.status]).inc()
            return exc.response()
        if delivery.event == "ping":
            metrics.WEBHOOK_DELIVERIES.labels(result="accepted").inc()
            return json_response({"pong": True, "delivery": delivery.delivery_id})
        return await self._queue(delivery)

    async def _accept(self, request: web.Request) -> Delivery:
        settings = self.rt.settings
        cap = settings.webhook_max_bytes
        if request.content_length is not None and request.content_length > cap:
            raise intake.too_large(cap)
        event = _header(request, "X-GitHub-Event", _EVENT_NAME)
        delivery_id = _header(request, "X-GitHub-Delivery", _HEADER_VALUE)
        hook_id = request.headers.get("X-GitHub-Hook-ID", NO_HOOK_ID)
        if not _HEADER_VALUE.fullmatch(hook_id):
            raise ApiError(400, "invalid X-GitHub-Hook-ID header", "Expected GitHub's hook id.")
        signature = request.headers.get("X-Hub-Signature-256")
        if not signature:
            raise ApiError(401, "missing signature", "X-Hub-Signature-256 is required.")
        if request.content_type not in (JSON_TYPE, FORM_TYPE):
            raise ApiError(415, "unsupported content type", f"Use {JSON_TYPE} or {FORM_TYPE}.")
        intake.refuse_encoded(request)
        # Chunked (no Content-Length) may grow to the cap: reserve all of it.
        size = cap if request.content_length is None else request.content_length
        with self.budget.reserve(size):
            timeout, what = settings.webhook_read_timeout_seconds, f"webhook delivery {delivery_id}"
            body = await intake.read_within(request, size, timeout, what)
            if not verify_signature(body, signature, settings.webhook_secrets):
                log.info("webhook delivery %s refused: bad signature", delivery_id)
                raise ApiError(401, "bad signature", "X-Hub-Signature-256 does not match the body.")
            payload = parse_payload(request.content_type, body)
        action = payload.get("action")
        return Delivery(
            event,
            action if isinstance(action, str) else None,
            delivery_id,
            hook_id,
            payload,
            hashlib.sha256(body).hexdigest(),
        )

    async def _queue(self, delivery: Delivery) -> web.Response:
        received = time.time_ns()
        planned, ignored, early, afters = await self._plan_or_refuse(delivery)
        try:
            async with asyncio.timeout(ACCEPT_TIMEOUT_SECONDS):  # No extra task, unlike wait_for.
                first, recorded = await self.rt.deliveries.accept(
                    delivery.delivery_id, delivery.body_sha256, planned
                )
        except NotReplicated as exc:
            # Queued on the primary only: a failover now could lose it, so no 202; a
            # redelivery finds the record and creates nothing twice.
            metrics.WEBHOOK_DELIVERIES.labels(result="unreplicated").inc()
            log.warning("webhook delivery %s refused: %s", delivery.delivery_id, exc)
            raise ApiError(
                503,
                "store not replicated",
                f"{exc} in time; redeliver it later (it is recognised, nothing is created twice).",
            ) from exc
        except (RedisError, TimeoutError) as exc:
            # Nothing is queued unless Redis said so: refuse, and GitHub can redeliver.
            raise _store_unavailable(delivery, exc) from exc
        # A comment command acts only for the first copy of a delivery, and only once per
        # comment: after the replay check, never before it (see _command).
        command = await self._command(delivery, first)
        if not first:
            # Only what the first delivery decided, even if agents changed since.
            planned = [p for p in planned if p.key in recorded]
        if first and early:
            await self._enqueue_early(early)
        if first:
            await _after_accepting(self.rt, afters)
        if planned and self.dispatcher is not None:
            self.dispatcher.notify()
        if first:
            await _trace(self.rt, delivery, planned, received)
        await _record_started_on(self.rt, delivery, planned)
        jobs = _answered_jobs(planned, recorded, first)
        result = "duplicate" if not first else ("accepted" if jobs else "ignored")
        metrics.WEBHOOK_DELIVERIES.labels(result=result).inc()
        log.info(
            "webhook delivery %s (%s): %s, %d job(s)",
            delivery.delivery_id,
            delivery.event,
            result,
            len(jobs),
        )
        body = {
            "delivery": delivery.delivery_id,
            "jobs": jobs,
            "duplicate": not first,
            "ignored": ignored,
        }
        if command is not None:
            if command["result"] != commands.DUPLICATE:
                command["reply"] = commandreplies.answer(self.rt, delivery.payload, command)
            body["command"] = command
        return json_response(body, status=202 if jobs else 200)

    async def _command(self, delivery: Delivery, first: bool) -> dict[str, Any] | None:
        """Apply the delivery's ``/agentchain`` comment command, at most once per comment.

        A duplicate delivery (replayed, or redelivered by GitHub) applies nothing; nor does
        a new delivery of a comment whose command already acted (another delivery id,
        another body): the comment id is claimed in Redis before the command acts.  A
        claim Redis does not answer applies nothing either, as the delivery itself is
        already recorded and a redelivery would be a duplicate: the commenter can comment
        again.
        """
        parsed = commands.parse(delivery.event, delivery.payload)
        if parsed is None:
            return None
        verb, comment_id = parsed
        if not first:
            return commands.duplicate(verb, "this delivery was already received")
        try:
            acting = await githubrecords.claim_command(self.rt.redis, comment_id)
        except RedisError as exc:
            log.warning("comment %d: command not applied, redis: %s", comment_id, exc)
            return commands.unapplied(verb, "the store did not answer; comment again")
        if not acting:
            return commands.duplicate(verb, "this comment's command was already applied")
        login = commands.commenter_login(delivery.payload)

        async def permission() -> str | None:
            return await collaborators.permission_of(self.rt, delivery.payload, login)

        agents = await self.agents.get()
        return await commands.handle(
            delivery.event, delivery.payload, agents, self.rt.operator_keys, permission
        )

    async def _enqueue_early(self, early: list[groupstamps.Early]) -> None:
        """Concurrency-group queues, in delivery order, before any job exists (flowhooks)."""
        try:
            await groupstamps.enqueue(AdmissionStore(self.rt.redis), early)
        except RedisError as exc:  # The engine queues them when it sees them.
            log.warning("early concurrency queueing failed: %s", type(exc).__name__)

    async def _plan_or_refuse(
        self, delivery: Delivery
    ) -> tuple[list[Planned], list[dict[str, str]], list[groupstamps.Early], list[After]]:
        """:meth:`_plan`, or a 503 when Redis does not answer (a follow-up round's records
        are read there): nothing is queued, and GitHub can redeliver."""
        try:
            return await self._plan(delivery)
        except RedisError as exc:
            raise _store_unavailable(delivery, exc) from exc

    async def _plan(
        self, delivery: Delivery
    ) -> tuple[list[Planned], list[dict[str, str]], list[groupstamps.Early], list[After]]:
        grouped = await self.agents.get()
        keys = self.rt.operator_keys
        event = event_from_payload(
            delivery.event,
            delivery.payload,
            delivery_id=delivery.delivery_id,
            hook_id=delivery.hook_id,
        )
        wanted = any(needs_app_slug(agents) for agents in grouped.values())
        slug = await self.app_slug.get() if wanted else None
        planned: list[Planned] = []
        ignored: list[dict[str, str]] = []
        early: list[groupstamps.Early] = []
        for namespace in sorted(grouped):
            matches, refused = match_event(
                delivery.event, delivery.action, delivery.payload, grouped[namespace], app_slug=slug
            )
            mine = [_planned(keys, namespace, m, delivery, event) for m in matches]
            early.extend(groupstamps.stamp(mine, groupstamps.specs_of(grouped[namespace])))
            planned.extend(mine)
            ignored.extend(_ignored(namespace, i) for i in refused)
        rounds, limits = await followrounds.plan(
            self.rt, delivery.event, delivery.action, delivery.payload, event, grouped
        )
        planned.extend(_round_planned(keys, r, delivery) for r in rounds)
        pushes = await followrounds.pushes(
            self.rt,
            delivery.event,
            delivery.action,
            delivery.payload,
            grouped,
            await self._app_login(delivery),
        )
        return planned, ignored, early, [*limits, *pushes]

    async def _app_login(self, delivery: Delivery) -> str | None:
        """The App's bot login, asked only for a push to a pull request (a round's own push
        is the App's, and supersedes nothing)."""
        if (delivery.event, delivery.action) != ("pull_request", "synchronize"):
            return None
        slug = await self.app_slug.get()
        return f"{slug}[bot]" if slug else None


def _planned(
    keys: OperatorKeys, namespace: str, match: Match, delivery: Delivery, event: JobEvent
) -> Planned:
    seed = f"{delivery.hook_id}/{delivery.delivery_id}"
    name = naming.root_job_name(match.agent, seed)
    position = chains.root_position(naming.chain_id_for(f"{seed}/{match.agent}"), match.agent)
    spec = AgentJobSpec(agent_role=match.agent, event=event_for(event, match), origin="github")
    # Sealed: only the webhook vouches for a GitHub event (core.rules.provenance).
    body = sealing.seal_job(keys, bodies.agentjob_body(namespace, name, spec, position, None))
    return Planned(namespace, name, body, match.agent)


async def _record_started_on(rt: Runtime, delivery: Delivery, planned: list[Planned]) -> None:
    """Record the pull request a delivery's chains start on as each one's (the first
    keeps it; for a comment or a review on it, with its head unknown until a round is
    due), so its failing checks and reviews start rounds: done for
    every copy of the delivery, as a process killed after accepting it records nothing
    and the redelivery's chains are the same ones."""
    on = followups.started_on(delivery.event, delivery.payload)
    if on is None:
        return
    for plan in planned:
        if models.CONTINUES in plan.body["metadata"]["labels"]:
            continue  # A round records nothing: its chain continues the recorded one.
        chain_id = plan.body["metadata"]["annotations"][models.CHAIN_ID]
        try:
            await roundrecords.record_pull(
                rt.redis,
                rt.operator_keys,
                on.repository,
                on.pull,
                plan.namespace,
                chain_id,
                head=on.head,
                fork=on.fork,
                unknown=not on.known,
            )
        except RedisError as exc:
            log.warning("pull request %s#%d not recorded: %s", on.repository, on.pull, exc)


After = followrounds.Limit | followrounds.Push
"""What the first copy of a delivery does once it is recorded, besides queueing jobs."""


async def _after_accepting(rt: Runtime, afters: list[After]) -> None:
    """Say on each pull request whose rounds this delivery ended that they are over, and
    supersede the rounds a person's push made stale (through their group's
    cancel-in-progress).  A failure here is logged: the delivery is recorded, and a round
    left running finds its push refused (``WorkspacePushRefused``)."""
    for after in afters:
        if isinstance(after, followrounds.Push):
            try:
                stopped = await admitting.supersede_holders(
                    rt, after.namespace, after.group, after.holder, after.reason
                )
            except (RedisError, apierrors.KubeError) as exc:
                log.warning("round of %s not superseded: %s", after.group[1:], exc)
                continue
            log.info("%s: superseded %s", after.reason, stopped or "nothing")
            continue
        limit = after
        roundrecords.say_limit(
            rt,
            limit.installation_id,
            limit.repository,
            limit.pull,
            limit.agent,
            limit.max_rounds,
            limit.chain_id,
            limit.fork,
        )


def _round_planned(keys: OperatorKeys, round_: followrounds.Round, delivery: Delivery) -> Planned:
    """A follow-up round's root AgentJob: named after the delivery, the agent and the pull
    request (a redelivery names the same one), labelled with the chain it continues."""
    seed = f"{delivery.hook_id}/{delivery.delivery_id}/pull-{round_.pull}"
    name = naming.root_job_name(round_.agent, seed)
    position = chains.root_position(naming.chain_id_for(f"{seed}/{round_.agent}"), round_.agent)
    spec = AgentJobSpec(agent_role=round_.agent, event=round_.event, origin="github")
    body = bodies.agentjob_body(round_.namespace, name, spec, position, None)
    body["metadata"]["labels"][models.CONTINUES] = str(round_.event.continues)
    body = sealing.seal_job(keys, body)
    return Planned(round_.namespace, name, body, round_.agent)


async def _trace(rt: Runtime, delivery: Delivery, planned: list[Planned], received: int) -> None:
    """The root span of each chain this delivery starts: the delivery itself."""
    if not rt.traces.enabled:
        return  # Not even built when off: its digests are a few percent of a delivery.
    name = f"webhook {delivery.event}" + (f".{delivery.action}" if delivery.action else "")
    for plan in planned:
        chain_id = plan.body["metadata"]["annotations"][models.CHAIN_ID]
        attributes = {
            "github.delivery": delivery.delivery_id,
            "github.event": delivery.event,
            "agentchain.job.namespace": plan.namespace,
            "agentchain.job.name": plan.name,
            "gen_ai.agent.name": plan.agent,
        }
        root = spans.root_span(chain_id, name, received, time.time_ns(), attributes)
        await rt.traces.record(root)


def _answered_jobs(
    planned: list[Planned], recorded: Sequence[str], first: bool
) -> list[dict[str, Any]]:
    """The answer's jobs: what was queued, and on a duplicate what the record names."""
    jobs: list[dict[str, Any]] = [
        {"namespace": p.namespace, "name": p.name, "agent": p.agent, "created": first}
        for p in planned
    ]
    if not first:
        seen = {p.key for p in planned}
        for key in recorded:
            if key not in seen:
                namespace, _, name = key.partition("/")
                jobs.append({"namespace": namespace, "name": name, "agent": None, "created": False})
    return jobs


def _ignored(namespace: str, ignored: Ignored) -> dict[str, str]:
    return {"namespace": namespace, "agent": ignored.agent, "reason": ignored.reason}


async def _tune_gc(app: web.Application) -> None:
    """Keep garbage collection pauses out of the 202 path (once per process).

    Profiling a burst of deliveries showed one full (generation 2) collection over
    the ~170k objects the imports leave behind pausing the event loop for 100+ ms,
    more than the whole burst's work, and young collections every 700 allocations
    adding ~10 ms more.  What exists at start-up (modules, clients, settings) lives
    as long as the process, so it is frozen out of every collection; and the young
    generation is collected every :data:`GC_YOUNG_THRESHOLD` allocations, so most
    of a request's short-lived objects are gone before a collection looks at them.
    """
    _tune_gc_once()


@functools.cache
def _tune_gc_once() -> None:
    gc.collect()  # First, so no garbage is frozen with the long-lived objects.
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def add_routes(app: web.Application, rt: Runtime, dispatcher: Dispatcher | None) -> None:
    """Mount the endpoint; raises :class:`WebhookNotConfigured` without a secret."""
    app.router.add_post(PATH, GithubWebhook(rt, dispatcher).handle)
    app.on_startup.append(_tune_gc)


def _store_unavailable(delivery: Delivery, exc: BaseException) -> ApiError:
    """The 503 for a delivery refused because Redis did not answer, counted and logged."""
    metrics.WEBHOOK_DELIVERIES.labels(result="unavailable").inc()
    log.warning(
        "webhook delivery %s refused: redis unavailable (%s)",
        delivery.delivery_id,
        type(exc).__name__,
    )
    return ApiError(
        503, "store unavailable", "Redis did not answer; nothing was queued, retry later."
    )
