"""``POST /api/jobs``: a manual run (admin token) or a delegation (job token).

The token decides which, not the body: an admin starts a root AgentJob in a
namespace it names; a job token can only delegate, within its own namespace
and chain, with itself as the parent.  Delegation follows seed 000: the
caller's immutable snapshot (``spec.delegation``) is extended by the pure
``policy.delegation.extend_delegation`` and the refusals come back verbatim as
409s ("Agent 'x' already in delegation chain", "Maximum delegation depth
reached").  The delegated job carries its own new snapshot, so what it may
delegate to is fixed when it is created.

Names are deterministic, as everywhere in the operator: a delegated job is
named from (caller, target), so a caller retrying after a lost answer gets the
same job back (200 instead of 201) instead of a second one.  ``?wait=SECONDS``
(≤ 300) long-polls until the job is terminal, so an agent can delegate and use
the answer in one call.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from aiohttp import web

from agentchain.kube import resources
from agentchain.models.agentjob import TERMINAL_PHASES, AgentJob, AgentJobSpec
from agentchain.models.conditions import Reason
from agentchain.policy import agents, chains, naming
from agentchain.policy.delegation import DelegationRefused, extend_delegation
from agentchain.web import api, auth, bodies, listing, serializers
from agentchain.web.requests import parse_body, parse_query, read_json, validate
from agentchain.web.responses import ApiError, json_response
from agentchain.web.schemas import AdminJobRequest, DelegationRequest, WaitQuery

Obj = dict[str, Any]
POLL_SECONDS = 0.5


async def post_job(request: web.Request) -> web.Response:
    principal = auth.principal_of(request)
    wait = parse_query(WaitQuery, request).wait
    if isinstance(principal, auth.Admin):
        obj, created = await _manual(principal, await parse_body(AdminJobRequest, request))
    else:
        obj, created = await _delegate(request, principal, await _delegation(request))
    terminal = _terminal(obj)
    if wait and not terminal:
        obj, terminal = await wait_for_end(obj, wait)
    view = {**serializers.job_view(obj), "created": created, "terminal": terminal}
    return json_response(view, status=201 if created else 200)


async def _delegation(request: web.Request) -> DelegationRequest:
    data = await read_json(request)
    if isinstance(data, dict) and "namespace" in data:
        raise ApiError(403, "forbidden", "A job token delegates within its own namespace only.")
    return validate(DelegationRequest, data)


async def _require_agent(namespace: str, agent: str) -> None:
    grouped = await listing.agents_by_namespace([namespace])
    candidates = [(c.name, c) for c in grouped.get(namespace, [])]
    found = agents.resolve(agent, candidates, lambda c: c.spec.trigger_name)
    if found is None:
        raise ApiError(
            422, "unknown agent", f"No AiAgent with triggerName {agent} in namespace {namespace}."
        )
    if isinstance(found, agents.Ambiguous):  # Never run on one of them (SPEC §1).
        raise ApiError(
            409,
            "ambiguous agent",
            f"In namespace {namespace}: {found.message}",
            reason=Reason.DUPLICATE_TRIGGER_NAME,
            agents=list(found.agents),
        )


async def _manual(principal: auth.Admin, req: AdminJobRequest) -> tuple[Obj, bool]:
    auth.require_namespace(principal, req.namespace)
    await _require_agent(req.namespace, req.agent_role)
    name = req.name or naming.root_job_name(req.agent_role, f"api/{uuid.uuid4().hex}")
    chain_id = naming.chain_id_for(f"api/{req.namespace}/{name}")
    spec = AgentJobSpec(agent_role=req.agent_role, type=req.type, prompt=req.prompt, origin="api")
    position = chains.root_position(chain_id, req.agent_role)
    body = bodies.agentjob_body(req.namespace, name, spec, position, None)
    return await resources.create(req.namespace, resources.AGENTJOBS, body)


async def _delegate(
    request: web.Request, principal: auth.JobCaller, req: DelegationRequest
) -> tuple[Obj, bool]:
    rt = request.app[api.RUNTIME_KEY]
    scope = principal.scope
    caller_obj = await resources.get(scope.tenant, resources.AGENTJOBS, scope.job_name)
    if caller_obj is None:
        raise ApiError(404, "job not found", "The calling job no longer exists.")
    caller = AgentJob.model_validate(
        {"spec": caller_obj.get("spec") or {}, "status": caller_obj.get("status") or {}}
    )
    source, target = caller.spec.agent_role, req.agent_role
    try:
        snapshot = extend_delegation(caller.spec.delegation, source, target)
    except DelegationRefused as exc:
        raise ApiError(409, exc.message, _chain_text(caller, target), reason=exc.reason) from exc
    here = _position(caller_obj, scope.chain_id, source)
    position = chains.ChainPosition(here.chain_id, here.depth + 1, (*here.path, target))
    if position.depth >= rt.settings.max_chain_jobs:
        raise ApiError(
            409,
            "Max chain depth exceeded",
            f"{target} would be job {position.depth + 1} of at most "
            f"{rt.settings.max_chain_jobs} in chain {here.chain_id}.",
            reason="MaxChainDepthExceeded",
        )
    await _require_agent(scope.tenant, target)
    spec = AgentJobSpec(
        agent_role=target,
        type=req.type,
        prompt=req.text,
        event=caller.spec.event,
        origin="delegation",
        delegation=list(snapshot),
    )
    name = naming.root_job_name(target, f"delegation/{scope.job_name}")
    body = bodies.agentjob_body(scope.tenant, name, spec, position, scope.job_name)
    return await resources.create(scope.tenant, resources.AGENTJOBS, body)


def _position(obj: Obj, chain_id: str, agent: str) -> chains.ChainPosition:
    try:
        found = chains.position_from_annotations(obj["metadata"].get("annotations") or {})
    except chains.ChainMetadataError as exc:
        raise ApiError(409, "unreadable chain metadata", str(exc)) from exc
    return found if found is not None else chains.root_position(chain_id, agent)


def _chain_text(caller: AgentJob, target: str) -> str:
    hops = " ".join(f"[{h.source}→{h.target}]" for h in caller.spec.delegation) or "(none)"
    return f"{caller.spec.agent_role} asked for {target}; delegation chain so far: {hops}."


def _terminal(obj: Obj) -> bool:
    return (obj.get("status") or {}).get("phase") in TERMINAL_PHASES


async def wait_for_end(obj: Obj, seconds: float) -> tuple[Obj, bool]:
    """Poll the job until it is terminal or ``seconds`` pass: (latest object, terminal)."""
    namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        fresh = await resources.get(namespace, resources.AGENTJOBS, name)
        if fresh is None:
            raise ApiError(404, "job not found", f"AgentJob {name} was deleted while waiting.")
        obj = fresh
        if _terminal(obj):
            return obj, True
    return obj, False


def add_routes(app: web.Application) -> None:
    app.router.add_post("/api/jobs", post_job)
