"""Read side of the job API: jobs, a job's output, a chain's tree.

Scope comes first and before any lookup that could leak existence: a job
token asking for another namespace gets 403 without the operator reading
anything there.  Within its namespace a job token sees its own chain only;
for a single job that needs the job's chain id, so the object is read first
and an unknown name is a 404 either way (names are not secrets in a
namespace the caller may list).

Listing is newest first with a keyset cursor (``next``): the cursor encodes the
last item's (creation time, namespace, name), so a page never repeats or skips
an item because jobs were created in between, which offset paging would.

What a listing reads is bounded by the API server, not filtered here: the chain
and the agent go to the API server as a label selector (a job token's listing
always names its chain, so it reads that chain's jobs and no others), a name as a
field selector, and every read is paged with ``limit``/``continue``
(``listing.py``).  Only the phase, which is no label, is filtered here.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from aiohttp import web

from agentchain.core.runtime import Runtime
from agentchain.kube import apierrors as kube_errors
from agentchain.kube import resources
from agentchain.models.aiagent import AiAgentSpec
from agentchain.web import auth, listing, serializers
from agentchain.web.requests import parse_query
from agentchain.web.responses import ApiError, json_response
from agentchain.web.schemas import JobQuery

Obj = dict[str, Any]
Cursor = tuple[str, str, str]
RUNTIME_KEY = web.AppKey("agentchain.runtime", Runtime)
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def encode_cursor(key: Cursor) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode_cursor(raw: str) -> Cursor:
    try:
        value = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, binascii.Error) as exc:
        raise ApiError(422, "invalid cursor", "Pass back the 'next' value unchanged.") from exc
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, str) for v in value)):
        raise ApiError(422, "invalid cursor", "Pass back the 'next' value unchanged.")
    return value[0], value[1], value[2]


def _scope(principal: auth.Principal, query: JobQuery) -> tuple[list[str], str | None]:
    """The namespaces to read and the chain to keep, for this principal and query."""
    if isinstance(principal, auth.JobCaller):
        scope = principal.scope
        if query.namespace not in (None, scope.tenant) or query.chain_id not in (
            None,
            scope.chain_id,
        ):
            raise ApiError(403, "forbidden", "A job token only sees its own namespace and chain.")
        return [scope.tenant], scope.chain_id
    if query.namespace is not None:
        auth.require_namespace(principal, query.namespace)
        return [query.namespace], query.chain_id
    return list(principal.namespaces), query.chain_id


async def agent_specs(rt: Runtime, namespace: str) -> dict[str, AiAgentSpec]:
    """The namespace's AiAgents by triggerName, from the operator's catalog (a chain's
    currency, the dashboard's edge conditions); none when they cannot be read: the
    chain still draws, in the default currency."""
    try:
        entries = await rt.agents.agents_in(namespace)
    except kube_errors.KubeError:
        return {}
    return {agent.spec.trigger_name: agent.spec for _, agent in entries}


async def job_views(rt: Runtime, objs: list[Obj]) -> list[Obj]:
    """The jobs as the API shows them, a reported usage in its chain budget's currency:
    the AiAgents are looked up (once per namespace) only for jobs that reported usage."""
    agents: dict[str, dict[str, AiAgentSpec]] = {}
    views = []
    for obj in objs:
        currency = None
        if (obj.get("status") or {}).get("usage"):
            namespace = str(obj["metadata"]["namespace"])
            if namespace not in agents:
                agents[namespace] = await agent_specs(rt, namespace)
            currency = serializers.chain_currency([obj], agents[namespace])
        views.append(serializers.job_view(obj, currency))
    return views


async def job_view(request: web.Request, obj: Obj) -> web.Response:
    [view] = await job_views(request.app[RUNTIME_KEY], [obj])
    return json_response(view)


def _keep(obj: Obj, query: JobQuery, chain_id: str | None, phases: frozenset[str] | None) -> bool:
    if chain_id is not None and serializers.chain_id_of(obj) != chain_id:
        return False
    role = (obj.get("spec") or {}).get("agentRole")
    if query.agent_role is not None and role != query.agent_role:
        return False
    phase = (obj.get("status") or {}).get("phase") or "Pending"
    return phases is None or phase in phases


async def list_jobs(request: web.Request) -> web.Response:
    query = parse_query(JobQuery, request)
    phases = None
    if query.status is not None:
        phases = serializers.phases_for(query.status)
        if phases is None:
            raise ApiError(422, "invalid status", "Use a seed 003 status or an AgentJob phase.")
    namespaces, chain_id = _scope(auth.principal_of(request), query)
    after = decode_cursor(query.continue_) if query.continue_ else None
    selector = listing.job_selector(chain_id, query.agent_role)
    if selector is None:
        return json_response({"items": [], "next": None})
    objs = await listing.list_in(namespaces, resources.AGENTJOBS, selector or None)
    kept = sorted(
        (o for o in objs if _keep(o, query, chain_id, phases)),
        key=serializers.sort_key,
        reverse=True,
    )
    if after is not None:
        kept = [o for o in kept if serializers.sort_key(o) < after]
    page = kept[: query.limit]
    more = len(kept) > query.limit
    return json_response(
        {
            "items": await job_views(request.app[RUNTIME_KEY], page),
            "next": encode_cursor(serializers.sort_key(page[-1])) if more else None,
        }
    )


def check_namespace(namespace: str) -> None:
    """404 for a namespace no object can be in (so it never reaches the API server)."""
    if not _NAMESPACE.fullmatch(namespace):
        raise ApiError(404, "not found", "No object can be in that namespace.")


def check_names(namespace: str, name: str) -> None:
    """404 for names no object can have (so they never reach the API server)."""
    if not (_NAMESPACE.fullmatch(namespace) and len(name) <= 253 and _NAME.fullmatch(name)):
        raise ApiError(404, "job not found", "No AgentJob can have that namespace or name.")


async def load_job(principal: auth.Principal, namespace: str, name: str) -> Obj:
    """The job, if the principal may see it: 403 outside scope, 404 when unknown."""
    auth.require_namespace(principal, namespace)
    check_names(namespace, name)
    obj = await resources.get(namespace, resources.AGENTJOBS, name)
    if obj is None:
        raise ApiError(404, "job not found", f"No AgentJob {name} in namespace {namespace}.")
    auth.require_chain(principal, namespace, serializers.chain_id_of(obj))
    return obj


def uid_of(obj: Obj) -> str:
    """The AgentJob's uid: what it recorded of its run (output, anchor) is keyed by it,
    so an earlier object of the same name is never shown as this one."""
    return str(obj["metadata"].get("uid") or "")


async def get_job(request: web.Request) -> web.Response:
    info = request.match_info
    obj = await load_job(auth.principal_of(request), info["namespace"], info["name"])
    return await job_view(request, obj)


async def get_job_by_name(request: web.Request) -> web.Response:
    """``/api/jobs/{name}``: the one job of that name the caller can see."""
    principal = auth.principal_of(request)
    name = request.match_info["name"]
    if isinstance(principal, auth.JobCaller):
        obj = await load_job(principal, principal.scope.tenant, name)
        return await job_view(request, obj)
    if len(name) > 253 or not _NAME.fullmatch(name):
        raise ApiError(404, "job not found", f"No AgentJob named {name}.")
    found = [
        o
        for o in await listing.list_in(
            principal.namespaces, resources.AGENTJOBS, fields=f"metadata.name={name}"
        )
        if o["metadata"]["name"] == name
    ]
    if not found:
        raise ApiError(404, "job not found", f"No AgentJob named {name}.")
    if len(found) > 1:
        where = sorted(o["metadata"]["namespace"] for o in found)
        raise ApiError(
            409, "ambiguous job name", "Use /api/jobs/{namespace}/{name}.", namespaces=where
        )
    return await job_view(request, found[0])


async def get_output(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    obj = await load_job(auth.principal_of(request), namespace, name)
    record = await rt.outputs.get(namespace, name, uid_of(obj))
    if record is None:
        raise ApiError(
            404,
            "output not captured",
            "The job has not ended yet, or its output expired.",
            reason="NotCaptured",
        )
    if not record.available:
        raise ApiError(
            404, "output unavailable", record.unavailable_reason or "", reason="OutputLost"
        )
    return json_response(
        {
            "id": name,
            "namespace": namespace,
            "output": record.text,
            "head": record.head if record.truncated else None,
            "fullSize": record.full_size,
            "truncated": record.truncated,
            "capturedAt": record.captured_at,
        }
    )


async def chain_jobs(namespace: str, chain_id: str) -> list[Obj]:
    selector = listing.job_selector(chain_id, None)
    if selector is None:
        return []  # Not a label value: no chain has that id.
    objs = await listing.list_in([namespace], resources.AGENTJOBS, selector)
    return [o for o in objs if serializers.chain_id_of(o) == chain_id]


async def get_chain(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME_KEY]
    namespace, chain_id = request.match_info["namespace"], request.match_info["chain_id"]
    auth.require_chain(auth.principal_of(request), namespace, chain_id)
    check_namespace(namespace)
    jobs = await chain_jobs(namespace, chain_id)
    record = await rt.chains.get(namespace, chain_id)
    if not jobs and record is None:
        raise ApiError(404, "chain not found", f"No chain {chain_id} in namespace {namespace}.")
    currency = serializers.DEFAULT_CURRENCY
    if any((o.get("status") or {}).get("usage") for o in jobs):
        currency = serializers.chain_currency(jobs, await agent_specs(rt, namespace))
    return json_response(serializers.chain_tree(chain_id, namespace, jobs, record, currency))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/jobs", list_jobs)
    app.router.add_get("/api/jobs/{name}", get_job_by_name)
    app.router.add_get("/api/jobs/{namespace}/{name}", get_job)
    app.router.add_get("/api/jobs/{namespace}/{name}/output", get_output)
    app.router.add_get("/api/chains/{namespace}/{chain_id}", get_chain)
