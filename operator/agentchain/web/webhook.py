"""``POST /webhooks/github``: verify, deduplicate, and queue one AgentJob per match.

Checks run cheapest-first and the body is read last, so nothing unauthenticated
costs more than its headers: a declared ``Content-Length`` over the cap is
refused before a byte is read, headers and content type before the body, and
the body itself is read in chunks and refused the moment it passes the cap, so
a lying or absent ``Content-Length`` never makes the process buffer more than
the cap plus one chunk.  A 413 also closes the connection so the rest of an
oversized upload is not drained.

The endpoint answers fast because the work is only *queued*: it creates
AgentJobs and the engine runs them.  Names are derived from (hook id, delivery
id, agent), so creating is idempotent and a redelivery — days later, or after a
restart — finds the jobs already there.  The Redis delivery record (72 h) says
which jobs the first delivery created: a redelivery re-creates only those (a
no-op unless the first attempt died half-way), even if agents changed since.

Secrets, the signature and raw headers are never logged; only the delivery id.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from aiohttp import StreamReader, web

from agentchain import metrics
from agentchain.engine.runtime import Runtime
from agentchain.kube import resources
from agentchain.models.agentjob import AgentJobSpec, JobEvent
from agentchain.policy import chains, naming
from agentchain.policy.matching import Ignored, Match, event_from_payload, match_event
from agentchain.web import bodies, listing
from agentchain.web.responses import ApiError, json_response
from agentchain.web.signatures import verify_signature

log = logging.getLogger(__name__)

PATH = "/webhooks/github"
CHUNK_BYTES = 64 * 1024
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
NO_HOOK_ID = "unknown"
_HEADER_VALUE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_EVENT_NAME = re.compile(r"^[a-z_]{1,64}$")
_RESULT_BY_STATUS = {400: "invalid", 401: "unauthorized", 413: "too_large", 415: "invalid"}


class WebhookNotConfigured(RuntimeError):
    """No webhook secret is configured: the endpoint refuses to exist (fail closed)."""


@dataclass(frozen=True)
class Delivery:
    event: str
    action: str | None
    delivery_id: str
    hook_id: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Planned:
    namespace: str
    name: str
    agent: str
    body: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


async def read_capped(stream: StreamReader, cap: int) -> bytes:
    """The whole body, or 413 as soon as it passes ``cap`` bytes."""
    buf = bytearray()
    async for chunk in stream.iter_chunked(CHUNK_BYTES):
        if len(buf) + len(chunk) > cap:
            raise _too_large(cap)
        buf += chunk
    return bytes(buf)


def _too_large(cap: int) -> ApiError:
    return ApiError(413, "payload too large", f"The body is over {cap} bytes.", limit=cap)


def _header(request: web.Request, name: str, pattern: re.Pattern[str]) -> str:
    value = request.headers.get(name)
    if value is None or not pattern.fullmatch(value):
        raise ApiError(400, f"missing or invalid {name} header", f"GitHub always sends {name}.")
    return value


def parse_payload(content_type: str, body: bytes) -> dict[str, Any]:
    """The delivery's JSON object, from a JSON body or a form's ``payload`` field."""
    try:
        if content_type == FORM_TYPE:
            fields = urllib.parse.parse_qs(body.decode("utf-8"), max_num_fields=16, errors="strict")
            body = (fields.get("payload") or [""])[0].encode("utf-8")
        payload = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, "malformed payload", f"Not valid JSON: {type(exc).__name__}.") from exc
    if not isinstance(payload, dict):
        raise ApiError(400, "malformed payload", "The payload must be a JSON object.")
    return payload


class GithubWebhook:
    """The endpoint's state: the runtime, and secrets known to be configured."""

    def __init__(self, rt: Runtime) -> None:
        if not rt.settings.webhook_secrets or not all(rt.settings.webhook_secrets):
            raise WebhookNotConfigured(
                "no GitHub webhook secret configured (AGENTCHAIN_WEBHOOK_SECRETS or "
                "AGENTCHAIN_WEBHOOK_SECRETS_FILE): refusing to serve POST /webhooks/github"
            )
        self.rt = rt
        self.agents = listing.SharedAgentListing(rt.settings.namespaces)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            delivery = await self._accept(request)
        except ApiError as exc:
            metrics.WEBHOOK_DELIVERIES.labels(result=_RESULT_BY_STATUS[exc.status]).inc()
            response = exc.response()
            if exc.status == 413:
                response.force_close()  # Do not drain the rest of an oversized upload.
            return response
        if delivery.event == "ping":
            metrics.WEBHOOK_DELIVERIES.labels(result="accepted").inc()
            return json_response({"pong": True, "delivery": delivery.delivery_id})
        return await self._dispatch(delivery)

    async def _accept(self, request: web.Request) -> Delivery:
        cap = self.rt.settings.webhook_max_bytes
        if request.content_length is not None and request.content_length > cap:
            raise _too_large(cap)
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
        body = await read_capped(request.content, cap)
        if not verify_signature(body, signature, self.rt.settings.webhook_secrets):
            log.info("webhook delivery %s refused: bad signature", delivery_id)
            raise ApiError(401, "bad signature", "X-Hub-Signature-256 does not match the body.")
        payload = parse_payload(request.content_type, body)
        action = payload.get("action")
        return Delivery(
            event, action if isinstance(action, str) else None, delivery_id, hook_id, payload
        )

    async def _dispatch(self, delivery: Delivery) -> web.Response:
        planned, ignored = await self._plan(delivery)
        first, recorded = await self.rt.deliveries.claim(
            delivery.hook_id, delivery.delivery_id, [p.key for p in planned]
        )
        if not first:
            # Only what the first delivery decided, even if agents changed since.
            planned = [p for p in planned if p.key in recorded]
        created = await asyncio.gather(
            *(resources.create(p.namespace, resources.AGENTJOBS, p.body) for p in planned)
        )
        jobs: list[dict[str, Any]] = [
            {"namespace": p.namespace, "name": p.name, "agent": p.agent, "created": made}
            for p, (_, made) in zip(planned, created, strict=True)
        ]
        if not first:
            seen = {p.key for p in planned}
            for key in recorded:
                if key not in seen:
                    namespace, _, name = key.partition("/")
                    jobs.append(
                        {"namespace": namespace, "name": name, "agent": None, "created": False}
                    )
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
        return json_response(body, status=202 if jobs else 200)

    async def _plan(self, delivery: Delivery) -> tuple[list[Planned], list[dict[str, str]]]:
        grouped = await self.agents.get()
        event = event_from_payload(
            delivery.event,
            delivery.payload,
            delivery_id=delivery.delivery_id,
            hook_id=delivery.hook_id,
        )
        planned: list[Planned] = []
        ignored: list[dict[str, str]] = []
        for namespace in sorted(grouped):
            matches, refused = match_event(
                delivery.event, delivery.action, delivery.payload, grouped[namespace]
            )
            planned.extend(_planned(namespace, m, delivery, event) for m in matches)
            ignored.extend(_ignored(namespace, i) for i in refused)
        return planned, ignored


def _planned(namespace: str, match: Match, delivery: Delivery, event: JobEvent) -> Planned:
    seed = f"{delivery.hook_id}/{delivery.delivery_id}"
    name = naming.root_job_name(match.agent, seed)
    position = chains.root_position(naming.chain_id_for(f"{seed}/{match.agent}"), match.agent)
    spec = AgentJobSpec(agent_role=match.agent, event=event, origin="github")
    body = bodies.agentjob_body(namespace, name, spec, position, None)
    return Planned(namespace, name, match.agent, body)


def _ignored(namespace: str, ignored: Ignored) -> dict[str, str]:
    return {"namespace": namespace, "agent": ignored.agent, "reason": ignored.reason}


def add_routes(app: web.Application, rt: Runtime) -> None:
    """Mount the endpoint; raises :class:`WebhookNotConfigured` without a secret."""
    app.router.add_post(PATH, GithubWebhook(rt).handle)
