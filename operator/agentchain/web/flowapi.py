"""Flow-control routes of the job API: stop a job, stop a chain (admin token only).

A stop through the API writes the same annotations as ``kubectl annotate aj X
labrats.work/stop=true`` (with ``stopped-by: api`` and the body's reason), and answers
202: the engine (on the leader, which may be another replica) terminates the pod and
ends the job ``Cancelled``.  Writing the request into the AgentJob rather than acting
here keeps one path for every kind of stop, makes it durable before the answer, and
leaves the race with the job's natural end to the one place that decides it
(``engine/stopping.py``; ``engine/gating.py`` for a job not started yet).  A job that
had already ended is a 409 naming its phase.

Job tokens may not stop anything, not even their own job: an agent that wants to end
simply exits.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from agentchain.engine import records, stoprequests
from agentchain.policy import stops
from agentchain.policy.outcomes import is_terminal
from agentchain.web import api, auth
from agentchain.web.requests import read_json, validate
from agentchain.web.responses import ApiError, json_response
from agentchain.web.schemas import StopRequest

Obj = dict[str, Any]
STOPPED_BY_API = "api"


async def _request_of(request: web.Request) -> stops.StopRequest:
    """The stop the body asks for; an empty body is a stop without a reason."""
    body = await read_json(request) if request.can_read_body else {}
    parsed = validate(StopRequest, body if body is not None else {})
    return stops.StopRequest(by=STOPPED_BY_API, reason=stops.clean(parsed.reason))


async def stop_job(request: web.Request) -> web.Response:
    principal = auth.require_admin(auth.principal_of(request))
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    wanted = await _request_of(request)  # A bad body reads nothing.
    obj = await api.load_job(principal, namespace, name)
    status = records.parse(obj).status
    if is_terminal(status):
        raise ApiError(409, "already ended", f"{name} ended {status.phase}.", phase=status.phase)
    if await stoprequests.request_stop(namespace, name, wanted) is None:
        raise ApiError(404, "job not found", f"No AgentJob {name} in namespace {namespace}.")
    return json_response({"id": name, "namespace": namespace, "stopping": True}, status=202)


async def stop_chain(request: web.Request) -> web.Response:
    rt = request.app[api.RUNTIME_KEY]
    principal = auth.require_admin(auth.principal_of(request))
    namespace, chain_id = request.match_info["namespace"], request.match_info["chain_id"]
    auth.require_namespace(principal, namespace)
    api.check_namespace(namespace)
    wanted = await _request_of(request)  # A bad body reads nothing.
    jobs = await api.chain_jobs(namespace, chain_id)
    if not jobs:
        raise ApiError(404, "chain not found", f"No chain {chain_id} in namespace {namespace}.")
    asked = await stoprequests.request_chain_stop(rt, namespace, chain_id, jobs, wanted)
    view = {"chainId": chain_id, "namespace": namespace, "stopping": sorted(asked)}
    return json_response(view, status=202)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/api/jobs/{namespace}/{name}/stop", stop_job)
    app.router.add_post("/api/chains/{namespace}/{chain_id}/stop", stop_chain)
