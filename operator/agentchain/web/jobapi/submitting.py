"""``POST /api/jobs``: a manual run (admin token) or a delegation (job token).

The token decides which, not the body: an admin starts a root AgentJob in a
namespace it names; a job token can only delegate, within its own namespace
and chain, with itself as the parent.  Delegation follows seed 000: the
caller's immutable snapshot (``spec.delegation``) is extended by the pure
``prompts.rules.delegation.extend_delegation`` and the refusals come back verbatim as
409s ("Agent 'x' already in delegation chain", "Maximum delegation depth
reached").  The delegated job carries its own new snapshot, so what it may
delegate to is fixed when it is created.  Then the target decides whether it
accepts the caller at all (``prompts.rules.delegation.check_caller``: its own chains'
agents, its ``spec.delegation.allowedFrom``, and its sender policy against the
GitHub event the job carries); a refusal is a 403 whose ``reason`` says which.

Names are deterministic, as everywhere in the operator: a delegated job is
named from (caller, target), so a caller retrying after a lost answer gets the
same job back (200 instead of 201) instead of a second one.  ``?wait=SECONDS``
(≤ 300) waits until the job is terminal, so an agent can delegate and use
the answer in one call; the wait listens to a watch shared by all waiting
requests, and each token holds a bounded number of them (``waiting.py``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

from aiohttp import web

from agentchain import models
from agentchain.aiagents.rules import resolution
from agentchain.core.rules import naming, provenance
from agentchain.core.runtime import Runtime
from agentchain.flow.rules import concurrency
from agentchain.hop.rules import chains
from agentchain.kube import resources
from agentchain.models.agentjob import AgentJob, AgentJobSpec, JobEvent
from agentchain.models.aiagent import AiAgentSpec
from agentchain.models.conditions import Reason
from agentchain.prompts.rules.delegation import DelegationRefused, check_caller, extend_delegation
from agentchain.store import sealing
from agentchain.store.signing import OperatorKeys
from agentchain.traces.rules import spans
from agentchain.web import auth, listing
from agentchain.web.jobapi import bodies, reads, waiting
from agentchain.web.requests import parse_query, read_json, validate
from agentchain.web.responses import ApiError, json_response
from agentchain.web.schemas import AdminJobRequest, DelegationRequest, WaitQuery

Obj = dict[str, Any]
WAITS_KEY = web.AppKey("agentchain.waits", waiting.Waits)


async def post_job(request: web.Request) -> web.Response:
    principal = auth.principal_of(request)
    wait = parse_query(WaitQuery, request).wait
    waits = request.app[WAITS_KEY]
    # The wait's slot is taken before anything is created: a refusal creates nothing.
    with waits.slot(principal) if wait else contextlib.nullcontext():
        if isinstance(principal, auth.Admin):
            received = time.time_ns()
            rt = request.app[reads.RUNTIME_KEY]
            obj, created = await _manual(rt.operator_keys, principal, await _manual_run(request))
            if created:
                await _trace(rt, principal, obj, received)
        else:
            obj, created = await _delegate(request, principal, await _delegation(request))
        terminal = waiting.terminal(obj)
        if wait and not terminal:
            obj, terminal = await waits.until_terminal(obj, wait)
    [job] = await reads.job_views(request.app[reads.RUNTIME_KEY], [obj])
    view = {**job, "created": created, "terminal": terminal}
    return json_response(view, status=201 if created else 200)


async def _trace(rt: Runtime, principal: auth.Admin, obj: Obj, received: int) -> None:
    """The root span of the chain this call started: the call itself, from its arrival
    to the job's creation (``spans.started_root``).  It names its caller as far as the
    operator knows one: an admin token (never which: a token is a secret), and the
    namespaces it may act in."""
    meta = obj["metadata"]
    chain_id = (meta.get("annotations") or {}).get(models.CHAIN_ID)
    if not rt.traces.enabled or not chain_id:
        return
    scope = ",".join(principal.namespaces) or "*"
    root = spans.started_root(
        chain_id, meta["name"], "api", received, caller=f"admin ({scope})", end_ns=time.time_ns()
    )
    await rt.traces.record(root)


async def _manual_run(request: web.Request) -> AdminJobRequest:
    data = await read_json(request)
    if isinstance(data, dict) and "namespace" not in data and _is_delegation(data):
        # The document's other choice, valid as such: only a job token delegates.
        raise ApiError(
            403, "forbidden", "A delegation needs a job token; a manual run names its namespace."
        )
    return validate(AdminJobRequest, data)


def _is_delegation(data: Obj) -> bool:
    try:
        validate(DelegationRequest, data)
    except ApiError:
        return False
    return True


async def _delegation(request: web.Request) -> DelegationRequest:
    data = await read_json(request)
    if isinstance(data, dict) and "namespace" in data:
        raise ApiError(403, "forbidden", "A job token delegates within its own namespace only.")
    return validate(DelegationRequest, data)


async def _require_agent(namespace: str, agent: str) -> tuple[AiAgentSpec, list[AiAgentSpec]]:
    """The agent ``agent`` and every agent of ``namespace``; 422 when it is unknown."""
    grouped = await listing.agents_by_namespace([namespace])
    candidates = [(c.name, c) for c in grouped.get(namespace, [])]
    found = resolution.resolve(agent, candidates, lambda c: c.spec.trigger_name)
    if found is None:
        raise ApiError(
            422, "unknown agent", f"No AiAgent with triggerName {agent} in namespace {namespace}."
        )
    if isinstance(found, resolution.Ambiguous):  # Never run on one of them (SPEC §1).
        raise ApiError(
            409,
            "ambiguous agent",
            f"In namespace {namespace}: {found.message}",
            reason=Reason.DUPLICATE_TRIGGER_NAME,
            agents=list(found.agents),
        )
    return found.spec, [c.spec for _, c in candidates]


def _check_caller(
    caller: str, event: JobEvent | None, target: AiAgentSpec, team: list[AiAgentSpec]
) -> None:
    """403 when the target does not accept delegations from the caller's agent."""
    try:
        check_caller(caller, target, team, event)
    except DelegationRefused as exc:
        raise ApiError(403, "forbidden", exc.message, reason=exc.reason) from exc


async def _manual(
    keys: OperatorKeys, principal: auth.Admin, req: AdminJobRequest
) -> tuple[Obj, bool]:
    auth.require_namespace(principal, req.namespace)
    await _require_agent(req.namespace, req.agent_role)
    name = req.name or naming.root_job_name(req.agent_role, f"api/{uuid.uuid4().hex}")
    chain_id = naming.chain_id_for(f"api/{req.namespace}/{name}")
    spec = AgentJobSpec(agent_role=req.agent_role, type=req.type, prompt=req.prompt, origin="api")
    position = chains.root_position(chain_id, req.agent_role)
    body = bodies.agentjob_body(req.namespace, name, spec, position, None)
    if req.concurrency_group:  # The engine admits it into this group.
        body["metadata"]["annotations"][concurrency.GROUP] = req.concurrency_group
    return await resources.create(req.namespace, resources.AGENTJOBS, sealing.seal_job(keys, body))


async def _delegate(
    request: web.Request, principal: auth.JobCaller, req: DelegationRequest
) -> tuple[Obj, bool]:
    rt = request.app[reads.RUNTIME_KEY]
    scope = principal.scope
    caller_obj = await resources.get(scope.tenant, resources.AGENTJOBS, scope.job_name)
    if caller_obj is None:
        raise ApiError(404, "job not found", "The calling job no longer exists.")
    caller = AgentJob.model_validate(
        {"spec": caller_obj.get("spec") or {}, "status": caller_obj.get("status") or {}}
    )
    # The caller's event counts (sender policy, what the delegated job may derive) only
    # under the operator's seal, as everywhere (core.rules.provenance).
    event = provenance.handed_on(caller.spec.event, sealing.vouched(rt.operator_keys, caller_obj))
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
    target_spec, team = await _require_agent(scope.tenant, target)
    _check_caller(caller.spec.agent_role, event, target_spec, team)
    spec = AgentJobSpec(
        agent_role=target,
        type=req.type,
        prompt=req.text,
        event=event,
        origin="delegation",
        delegation=list(snapshot),
    )
    name = naming.root_job_name(target, f"delegation/{scope.job_name}")
    body = bodies.agentjob_body(scope.tenant, name, spec, position, scope.job_name)
    return await resources.create(
        scope.tenant, resources.AGENTJOBS, sealing.seal_job(rt.operator_keys, body)
    )


def _position(obj: Obj, chain_id: str, agent: str) -> chains.ChainPosition:
    try:
        found = chains.position_from_annotations(obj["metadata"].get("annotations") or {})
    except chains.ChainMetadataError as exc:
        raise ApiError(409, "unreadable chain metadata", str(exc)) from exc
    return found if found is not None else chains.root_position(chain_id, agent)


def _chain_text(caller: AgentJob, target: str) -> str:
    hops = " ".join(f"[{h.source}→{h.target}]" for h in caller.spec.delegation) or "(none)"
    return f"{caller.spec.agent_role} asked for {target}; delegation chain so far: {hops}."


def add_routes(app: web.Application) -> None:
    waits = waiting.Waits()
    app[WAITS_KEY] = waits

    async def close(_: web.Application) -> None:
        await waits.close()

    app.on_cleanup.append(close)
    app.router.add_post("/api/jobs", post_job)
