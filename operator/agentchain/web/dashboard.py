"""A read-only HTML dashboard: the jobs list, a job's detail, a chain's tree.

Off by default.  It has no login of its own, so it is mounted only when
``AGENTCHAIN_DASHBOARD=true`` (the Helm chart leaves it off), and only on the
internal listener, never the port GitHub reaches; whoever turns it on exposes job
metadata and outputs to anyone who can reach that port, and should put it behind
``kubectl port-forward`` or an authenticating proxy.  Its style sheet is a file,
not inline, so the Content-Security-Policy every answer carries (``default-src
'self'``) allows no inline code at all.  Everything
shown comes from the same serializers as the JSON API.

Job text (prompts, issue titles, agent output) is untrusted, so templates are
rendered by jinja2 with autoescape forced on for every template regardless of
its file name, and links are built with ``urlencode``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from agentchain.kube import resources
from agentchain.web import api, listing, serializers

TEMPLATES = Path(__file__).with_name("static")
JOBS_SHOWN = 200
STYLESHEET = (TEMPLATES / "dashboard.css").read_text(encoding="utf-8")

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def render(template: str, **context: Any) -> web.Response:
    html = _env.get_template(template).render(**context)
    return web.Response(text=html, content_type="text/html")


async def jobs_page(request: web.Request) -> web.Response:
    rt = request.app[api.RUNTIME_KEY]
    objs = await listing.list_in(rt.settings.namespaces, resources.AGENTJOBS)
    newest = sorted(objs, key=serializers.sort_key, reverse=True)[:JOBS_SHOWN]
    return render("jobs.html", jobs=[serializers.job_view(o) for o in newest])


async def job_page(request: web.Request) -> web.Response:
    rt = request.app[api.RUNTIME_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    api.check_names(namespace, name)
    if rt.settings.namespaces and namespace not in rt.settings.namespaces:
        raise web.HTTPNotFound()
    obj = await resources.get(namespace, resources.AGENTJOBS, name)
    if obj is None:
        raise web.HTTPNotFound()
    record = await rt.outputs.get(namespace, name)
    reason = "Output not captured yet (the job has not ended, or it expired)."
    if record is not None and not record.available:
        reason, record = f"Output unavailable: {record.unavailable_reason}", None
    return render("job.html", job=serializers.job_view(obj), output=record, output_reason=reason)


async def chain_page(request: web.Request) -> web.Response:
    rt = request.app[api.RUNTIME_KEY]
    namespace, chain_id = request.match_info["namespace"], request.match_info["chain_id"]
    api.check_namespace(namespace)
    if rt.settings.namespaces and namespace not in rt.settings.namespaces:
        raise web.HTTPNotFound()
    jobs = await api.chain_jobs(namespace, chain_id)
    record = await rt.chains.get(namespace, chain_id)
    if not jobs and record is None:
        raise web.HTTPNotFound()
    tree = serializers.chain_tree(chain_id, namespace, jobs, record)
    return render("chain.html", chain=tree)


async def stylesheet(request: web.Request) -> web.Response:
    # A file, not an inline <style>: the pages' Content-Security-Policy allows no inline code.
    return web.Response(text=STYLESHEET, content_type="text/css")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", jobs_page)
    app.router.add_get("/dashboard.css", stylesheet)
    app.router.add_get("/jobs/{namespace}/{name}", job_page)
    app.router.add_get("/chains/{namespace}/{chain_id}", chain_page)
