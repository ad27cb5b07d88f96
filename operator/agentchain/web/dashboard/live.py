"""Live dashboard pages: server-sent events fed by the operator's own AgentJob watch.

No stream polls the API server.  The AgentJob handler publishes every change it sees
into ``Runtime.feed`` (``core/feeds.py``); each open page holds one subscription:

* ``/ui/api/events`` sends each changed job (``job`` events, the list's and a job
  page's view), filtered to the namespaces the session may see and the page's
  ``namespace``/``chain``/``job``;
* ``/ui/api/chains/<ns>/<id>/events`` sends the whole laid-out chain (``chain``
  events): read once when the page subscribes, then kept from the feed's changes
  and the chain's Redis record, and sent again at most every :data:`BATCH_SECONDS`;
* ``/ui/api/jobs/<ns>/<name>/log`` follows the running pod's log (``pods/log``
  with ``follow``), one API stream per viewer for as long as the page is open; it
  ends with ``end`` when the container has (the page stops listening), or ``pause``
  when the stream ran its time on a pod still running (the browser reconnects).

A subscriber that falls behind is sent ``reload`` and the stream ends (the page
reads afresh and subscribes again); streams end when the listener shuts down.  A
comment line every :data:`HEARTBEAT_SECONDS` finds viewers that left.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from agentchain.core.feeds import Change, Subscription
from agentchain.hop.rules import jobspec
from agentchain.kube import viewing
from agentchain.web import auth, serializers
from agentchain.web.dashboard import chainview
from agentchain.web.jobapi import reads
from agentchain.web.responses import SECURITY_HEADERS

Obj = dict[str, Any]
HEARTBEAT_SECONDS = 15.0
BATCH_SECONDS = 0.1
CLOSING_KEY = web.AppKey("agentchain.live-closing", asyncio.Event)


def frame(event: str, data: object) -> bytes:
    """One server-sent event; JSON has no raw newline, so one ``data:`` line holds it."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=True)}\n\n".encode()


async def open_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            **SECURITY_HEADERS,
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",  # nginx-style proxies: do not hold events back.
        }
    )
    await response.prepare(request)
    return response


async def _next(sub: Subscription, closing: asyncio.Event) -> Change | None:
    """The next change, None on a heartbeat tick; raises CancelledError when closing."""
    getting = asyncio.ensure_future(sub.queue.get())
    stopping = asyncio.ensure_future(closing.wait())
    done, pending = await asyncio.wait(
        (getting, stopping), timeout=HEARTBEAT_SECONDS, return_when=asyncio.FIRST_COMPLETED
    )
    for task in pending:
        task.cancel()
    if getting in done:
        return getting.result()
    if stopping in done:
        raise asyncio.CancelledError  # The listener is shutting down: end the stream.
    return None


def row_view(obj: Obj, *, deleted: bool = False) -> Obj:
    """A job as the list shows it: the API's view, its display state, whether deleted."""
    return {**serializers.job_view(obj), "state": chainview.display_state(obj), "deleted": deleted}


def visible(principal: auth.Principal, change: Change, query: Obj) -> bool:
    namespaces = getattr(principal, "namespaces", ())
    if namespaces and change.namespace not in namespaces:
        return False
    if query.get("namespace") and change.namespace != query["namespace"]:
        return False
    if query.get("job") and change.name != query["job"]:
        return False
    return not query.get("chain") or serializers.chain_id_of(change.obj) == query["chain"]


async def job_events(request: web.Request) -> web.StreamResponse:
    principal = auth.principal_of(request)
    query = {k: request.query.get(k) for k in ("namespace", "chain", "job")}
    rt = request.app[reads.RUNTIME_KEY]
    response = await open_stream(request)
    with contextlib.suppress(asyncio.CancelledError, ConnectionError), rt.feed.subscribe() as sub:
        while True:
            change = await _next(sub, request.app[CLOSING_KEY])
            if sub.overflowed:
                await response.write(frame("reload", {}))
                break
            if change is None:
                await response.write(b": heartbeat\n\n")
            elif visible(principal, change, query):
                view = row_view(change.obj, deleted=change.deleted)
                await response.write(frame("job", view))
    return response


async def _drain(sub: Subscription) -> list[Change]:
    await asyncio.sleep(BATCH_SECONDS)  # Changes arrive in bursts: send one layout for each.
    out: list[Change] = []
    while not sub.queue.empty():
        out.append(sub.queue.get_nowait())
    return out


async def chain_events(request: web.Request) -> web.StreamResponse:
    rt = request.app[reads.RUNTIME_KEY]
    namespace, chain_id = request.match_info["namespace"], request.match_info["chain_id"]
    auth.require_chain(auth.principal_of(request), namespace, chain_id)
    reads.check_namespace(namespace)
    response = await open_stream(request)
    with contextlib.suppress(asyncio.CancelledError, ConnectionError), rt.feed.subscribe() as sub:
        # Subscribed first, read second: a change in between is seen, not lost.
        jobs = {o["metadata"]["name"]: o for o in await reads.chain_jobs(namespace, chain_id)}
        await response.write(frame("chain", await _layout(rt, namespace, chain_id, jobs)))
        while True:
            change = await _next(sub, request.app[CLOSING_KEY])
            if sub.overflowed:
                await response.write(frame("reload", {}))
                break
            if change is None:
                await response.write(b": heartbeat\n\n")
                continue
            if not _apply(jobs, [change, *await _drain(sub)], namespace, chain_id):
                continue
            await response.write(frame("chain", await _layout(rt, namespace, chain_id, jobs)))
    return response


def _apply(jobs: dict[str, Obj], changes: list[Change], namespace: str, chain_id: str) -> bool:
    """Fold the chain's changes into ``jobs``; whether any was the chain's."""
    touched = False
    for change in changes:
        if change.namespace != namespace or serializers.chain_id_of(change.obj) != chain_id:
            continue
        touched = True
        if change.deleted:
            jobs.pop(change.name, None)
        else:
            jobs[change.name] = change.obj
    return touched


async def _layout(rt: Any, namespace: str, chain_id: str, jobs: dict[str, Obj]) -> Obj:
    record = await rt.chains.get(namespace, chain_id)
    agents = {agent.spec.trigger_name: agent.spec for _, agent in rt.agents.cached(namespace)}
    return chainview.layout(chain_id, namespace, list(jobs.values()), record, agents)


async def job_log(request: web.Request) -> web.StreamResponse:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    obj = await reads.load_job(auth.principal_of(request), namespace, name)
    pod = (obj.get("status") or {}).get("podName")
    response = await open_stream(request)
    with contextlib.suppress(asyncio.CancelledError, ConnectionError):
        await response.write(frame("reset", {"pod": pod}))
        began = time.monotonic()
        if pod:
            await _pump(response, viewing.follow_log(namespace, pod, jobspec.CONTAINER_NAME))
        # "end": the container ended (the log's EOF), the page stops listening; "pause":
        # the stream ran its time, and the browser's EventSource reconnects (the next
        # stream starts with "reset"). The AgentJob's phase cannot tell them apart: the
        # log ends before the operator has recorded the end.
        ran_its_time = time.monotonic() - began >= viewing.FOLLOW_MAX_SECONDS - 1
        await response.write(frame("pause" if ran_its_time else "end", {"pod": pod}))
    return response


async def _pump(response: web.StreamResponse, chunks: AsyncIterator[bytes]) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    async for chunk in chunks:
        text = decoder.decode(chunk)
        if text:
            await response.write(frame("log", text))


async def _closing(app: web.Application) -> None:
    app[CLOSING_KEY].set()


def add_routes(app: web.Application) -> None:
    app[CLOSING_KEY] = asyncio.Event()
    app.on_shutdown.append(_closing)
    app.router.add_get("/ui/api/events", job_events)
    app.router.add_get("/ui/api/chains/{namespace}/{chain_id}/events", chain_events)
    app.router.add_get("/ui/api/jobs/{namespace}/{name}/log", job_log)
