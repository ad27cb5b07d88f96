"""The dashboard's buttons: stop a job or a chain, approve or reject a job's start.

Each route is the job API's flow-control route (``stoproutes.py``) under ``/ui/api/``,
served by the very same handler: the session middleware (``sessions.py``) has
already refused a request without a session (401), from another origin or without
the session's CSRF token (403), and made the caller an admin of the operator's
namespaces, which is what a dashboard session is.  So a click takes exactly the
API's path: the same checks (403 outside the served namespaces, 422 for a bad body,
404, 409 for a job that has ended), the same annotations on the AgentJob, the same
202.  The only difference is who is recorded as having asked: ``dashboard``
instead of ``api`` (sessions hold a digest of their admin token, not a name).
"""

from __future__ import annotations

from aiohttp import web

from agentchain.web.jobapi import stoproutes
from agentchain.web.responses import Handler

ACTOR = "dashboard"


def _as_dashboard(handler: Handler) -> Handler:
    async def acting(request: web.Request) -> web.StreamResponse:
        request[stoproutes.ACTOR_KEY] = ACTOR
        return await handler(request)

    return acting


def add_routes(app: web.Application) -> None:
    job = "/ui/api/jobs/{namespace}/{name}"
    app.router.add_post(f"{job}/stop", _as_dashboard(stoproutes.stop_job))
    app.router.add_post(f"{job}/approve", _as_dashboard(stoproutes.approve_job))
    app.router.add_post(f"{job}/reject", _as_dashboard(stoproutes.reject_job))
    chain = _as_dashboard(stoproutes.stop_chain)
    app.router.add_post("/ui/api/chains/{namespace}/{chain_id}/stop", chain)
