"""The dashboard under ``/ui/``: one page shell, its script, and the JSON it reads.

On by default on the internal listener, behind a login with the job API's admin
tokens (``logins.py``).  Every page (``/ui/``, ``/ui/jobs/<ns>/<name>``,
``/ui/chains/<ns>/<id>``) is the same static shell; its script (``static/app.js``)
reads the path, calls the JSON endpoints below and draws the page, so no server
template ever puts job text into HTML.  The script writes text only through
``textContent`` and attribute setters, and the pages' Content-Security-Policy
allows scripts from this origin only (no ``unsafe-inline``) and requires Trusted
Types, so an ``innerHTML`` with a string throws in the browser: agent output
containing ``<script>`` is shown as those characters, never run.

The JSON endpoints see what an admin token of the job API sees (the operator's
namespaces) and read through the same paths: the label-selected, paged listing
(``uilisting.py``), the chain's jobs and record (``chainview.py``), a job with its
record, output, anchors and Events (``jobdetail.py``).  Live updates are
server-sent events (``live.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from agentchain import models
from agentchain.flow import budgeting
from agentchain.kube import apierrors as kube_errors
from agentchain.kube import resources, viewing
from agentchain.models.agentjob import AgentJob
from agentchain.models.aiagent import AiAgent
from agentchain.prompts.rules import assembly
from agentchain.store import sealing
from agentchain.traces.rules import spans
from agentchain.web import auth, listing, serializers
from agentchain.web.dashboard import chainview, jobdetail, live, logins
from agentchain.web.dashboard import uilisting as jobs_list
from agentchain.web.jobapi import reads, stoproutes
from agentchain.web.requests import parse_query
from agentchain.web.responses import ApiError, Handler, json_response

STATIC = Path(__file__).with_name("static")
# The dashboard's files, read once: the only ones served, so no path reaches the disk.
ASSETS: dict[str, tuple[bytes, str]] = {
    name: ((STATIC / name).read_bytes(), kind)
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css"))
}
SHELL = (STATIC / "index.html").read_bytes()
# Stricter than every answer's default: nothing but this origin's script, style and
# JSON; no inline code; Trusted Types so no string can become HTML in the page.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)
# Full output opened on its own: plain text that can run nothing even if sniffed.
OUTPUT_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"


async def shell(request: web.Request) -> web.Response:
    """Every page: the shell (answered 401 by the session middleware without a login)."""
    return web.Response(
        body=SHELL,
        content_type="text/html",
        charset="utf-8",
        headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"},
    )


async def asset(request: web.Request) -> web.Response:
    found = ASSETS.get(request.match_info["name"])
    if found is None:
        raise ApiError(404, "not found", "No such dashboard file.")
    body, kind = found
    return web.Response(body=body, content_type=kind, charset="utf-8")


async def to_ui(request: web.Request) -> web.Response:
    raise web.HTTPFound("/ui/")


async def list_jobs(request: web.Request) -> web.Response:
    query = parse_query(jobs_list.UiJobQuery, request)
    phases = None
    if query.phase is not None:
        phases = jobs_list.phases_for(query.phase)
        if phases is None:
            raise ApiError(422, "invalid phase", "Use an AgentJob phase or a seed 003 status.")
    principal = auth.principal_of(request)
    namespaces = list(getattr(principal, "namespaces", ()))
    if query.namespace is not None:
        auth.require_namespace(principal, query.namespace)
        namespaces = [query.namespace]
    after = reads.decode_cursor(query.continue_) if query.continue_ else None
    selector = listing.job_selector(query.chain, query.agent)
    if selector is None:
        return json_response({"items": [], "next": None, "total": 0})
    objs = await listing.list_in(namespaces, resources.AGENTJOBS, selector or None)
    rows, last, total = jobs_list.page(
        (o for o in objs if jobs_list.matches(o, query, phases)), query, after
    )
    return json_response(
        {
            "items": [live.row_view(o) for o in rows],
            "next": reads.encode_cursor(last) if last else None,
            "total": total,
        }
    )


async def _original_prompt(rt: Any, namespace: str, job: AgentJob) -> str:
    if job.spec.prompt:
        return job.spec.prompt
    try:
        agent = await rt.agents.by_trigger(namespace, job.spec.agent_role)
    except kube_errors.KubeError:
        agent = None
    template = agent.spec.prompt_template if isinstance(agent, AiAgent) else None
    try:
        return assembly.render_prompt(template, job.spec.event, agent=job.spec.agent_role)
    except assembly.PromptRenderError as exc:
        return f"(the prompt could not be rendered again: {exc})"


async def _events(namespace: str, name: str) -> dict[str, Any]:
    try:
        found = await viewing.events_for(namespace, "AgentJob", name)
    except kube_errors.KubeError as exc:
        return {"events": [], "eventsUnavailable": f"Events could not be read: {exc}"}
    return {"events": jobdetail.events_view(found), "eventsUnavailable": None}


async def job_detail(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    obj = await reads.load_job(auth.principal_of(request), namespace, name)
    job = AgentJob.model_validate(obj)
    chain_id = serializers.chain_id_of(obj)
    record, output, anchor, team, events = await asyncio.gather(
        rt.chains.get(namespace, chain_id) if chain_id else _none(),
        rt.outputs.get(namespace, name, reads.uid_of(obj)),
        rt.anchors.get_job_anchor(namespace, name, reads.uid_of(obj)),
        rt.anchors.get_team_anchor(namespace, chain_id) if chain_id else _none(),
        _events(namespace, name),
    )
    body = jobdetail.detail(
        obj,
        original=await _original_prompt(rt, namespace, job),
        record=record,
        output=jobdetail.output_summary(output),
        anchor=anchor,
        teamAnchor=team,
        currency=await _currency(rt, obj),
        traceUrl=spans.trace_url(rt.settings.trace_url, chain_id or ""),
        **events,
    )
    return json_response(body)


async def _currency(rt: Any, obj: dict[str, Any]) -> str | None:
    """The currency the job's chain budget counts in (None: the default)."""
    try:
        budget = await budgeting.budget_of(rt, obj)
    except (kube_errors.KubeError, IndexError, KeyError):
        return None
    return budget.currency if budget is not None else None


async def _none() -> None:
    return None


async def job_output(request: web.Request) -> web.Response:
    """The full captured output as plain text (the page links here)."""
    rt = request.app[reads.RUNTIME_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    obj = await reads.load_job(auth.principal_of(request), namespace, name)
    record = await rt.outputs.get(namespace, name, reads.uid_of(obj))
    summary = jobdetail.output_summary(record)
    if record is None or not summary["available"]:
        raise ApiError(404, "output not available", str(summary.get("reason") or ""))
    return web.Response(
        text=record.text,
        content_type="text/plain",
        charset="utf-8",
        headers={"Content-Security-Policy": OUTPUT_CSP},
    )


async def chain_layout(rt: Any, namespace: str, chain_id: str) -> dict[str, Any] | None:
    jobs = await reads.chain_jobs(namespace, chain_id)
    record = await rt.chains.get(namespace, chain_id)
    if not jobs and record is None:
        return None
    agents = await reads.agent_specs(rt, namespace)
    view = chainview.layout(chain_id, namespace, jobs, record, agents)
    rounds = await listing.list_in(
        [namespace], resources.AGENTJOBS, f"{models.CONTINUES}={chain_id}"
    )
    lineage = chainview.lineage(
        chain_id,
        [(o, sealing.vouched(rt.operator_keys, o)) for o in jobs if not _parent(o)],
        [(o, sealing.vouched(rt.operator_keys, o)) for o in rounds],
    )
    return view | lineage | {"traceUrl": spans.trace_url(rt.settings.trace_url, chain_id)}


def _parent(obj: dict[str, Any]) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(models.PARENT_JOB)


async def chain(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    namespace, chain_id = request.match_info["namespace"], request.match_info["chain_id"]
    auth.require_chain(auth.principal_of(request), namespace, chain_id)
    reads.check_namespace(namespace)
    found = await chain_layout(rt, namespace, chain_id)
    if found is None:
        raise ApiError(404, "chain not found", f"No chain {chain_id} in namespace {namespace}.")
    return json_response(found)


def add_routes(app: web.Application) -> None:
    rt = app[reads.RUNTIME_KEY]
    logins.add_routes(app, rt)
    app.router.add_get("/", to_ui)
    app.router.add_get("/ui", to_ui)
    app.router.add_get("/ui/", shell)
    app.router.add_get("/ui/jobs/{namespace}/{name}", shell)
    app.router.add_get("/ui/chains/{namespace}/{chain_id}", shell)
    app.router.add_get("/ui/static/{name}", asset)
    app.router.add_get("/ui/api/jobs", list_jobs)
    app.router.add_get("/ui/api/jobs/{namespace}/{name}", job_detail)
    app.router.add_get("/ui/api/jobs/{namespace}/{name}/output", job_output)
    app.router.add_get("/ui/api/chains/{namespace}/{chain_id}", chain)
    live.add_routes(app)
    _add_buttons(app)


# The buttons -------------------------------------------------------------------------
# Stop a job or a chain, approve or reject a job's start. Each is the job API's
# flow-control route (``stoproutes.py``), served by the very same handler: the session
# middleware (``logins.py``) has already refused a request without a session (401),
# from another origin or without the session's CSRF token (403), and made the caller an
# admin of the operator's namespaces, which is what a dashboard session is. So a click
# takes exactly the API's path (the same checks, annotations and 202); only who asked
# differs: ``dashboard`` instead of ``api`` (sessions hold a digest of their admin
# token, not a name).

ACTOR = "dashboard"


def _as_dashboard(handler: Handler) -> Handler:
    async def acting(request: web.Request) -> web.StreamResponse:
        request[stoproutes.ACTOR_KEY] = ACTOR
        return await handler(request)

    return acting


def _add_buttons(app: web.Application) -> None:
    """The buttons: each the job API's flow-control route under ``/ui/api/``."""
    job = "/ui/api/jobs/{namespace}/{name}"
    app.router.add_post(f"{job}/stop", _as_dashboard(stoproutes.stop_job))
    app.router.add_post(f"{job}/approve", _as_dashboard(stoproutes.approve_job))
    app.router.add_post(f"{job}/reject", _as_dashboard(stoproutes.reject_job))
    chain = _as_dashboard(stoproutes.stop_chain)
    app.router.add_post("/ui/api/chains/{namespace}/{chain_id}/stop", chain)
