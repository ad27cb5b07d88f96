"""The shared context store and anchors over HTTP, scoped by the caller's token.

Tenancy is taken from the token, never from the request: a job token acts in
its own Kubernetes namespace (the store's tenant) and is recorded as the
writer; an admin names the tenant with ``?tenant=`` and writes as ``admin``.
Each entry also records its writer's trust mark (``prompts/rules/storetrust.py``), which
decides the agents' prompts it may reach; reading through the API ignores it.
``{namespace}`` in the path is the *store* namespace of seed 000
(``performance``, ``memory:coder``...), not a Kubernetes one.

A job's anchor may be written only with that job's own token (403 for anyone
else, admins included: an anchor is the job's own recovery note); it may be
read by admins and by jobs of the same chain.  Store refusals map to HTTP the
way ``store/storeerrors.py`` intends: too large → 413 with size and limit, over the
namespace's store quota → 413 ``store quota exceeded`` with use and limit, Redis
full → 507, bad key or anchor shape → 422.
"""

from __future__ import annotations

from aiohttp import web

from agentchain.store.storeerrors import (
    InvalidAnchorError,
    InvalidKeyError,
    QuotaExceededError,
    StoreError,
    StoreFullError,
    ValueTooLargeError,
)
from agentchain.web import auth
from agentchain.web.jobapi import reads
from agentchain.web.requests import parse_body, parse_query, read_json
from agentchain.web.responses import ApiError, json_response
from agentchain.web.schemas import StoreQuery, StoreWrite, TenantQuery


def store_error(exc: StoreError) -> ApiError:
    if isinstance(exc, QuotaExceededError):
        return ApiError(413, "store quota exceeded", str(exc), used=exc.used, limit=exc.limit)
    if isinstance(exc, StoreFullError):
        return ApiError(507, "store full", str(exc))
    if isinstance(exc, ValueTooLargeError):
        return ApiError(413, "too large", str(exc), size=exc.size, limit=exc.limit)
    if isinstance(exc, InvalidKeyError | InvalidAnchorError):
        return ApiError(422, "invalid", str(exc))
    return ApiError(409, "store conflict", str(exc))


async def list_entries(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    query = parse_query(StoreQuery, request)
    principal = auth.principal_of(request)
    tenant = auth.tenant_for(principal, query.tenant)
    namespace = request.match_info["namespace"]
    try:
        if query.prefix is not None:
            entries = await rt.contexts.list_prefix(tenant, namespace, query.prefix, query.recent)
        else:
            entries = await rt.contexts.recent(tenant, namespace, query.recent)
    except StoreError as exc:
        raise store_error(exc) from exc
    return json_response({"items": [e.to_json() for e in entries]})


async def get_entry(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    query = parse_query(StoreQuery, request)
    tenant = auth.tenant_for(auth.principal_of(request), query.tenant)
    namespace, key = request.match_info["namespace"], request.match_info["key"]
    try:
        if query.extend:
            entry = await rt.contexts.get_and_extend(tenant, namespace, key)
        else:
            entry = await rt.contexts.get(tenant, namespace, key)
    except StoreError as exc:
        raise store_error(exc) from exc
    if entry is None:
        raise ApiError(404, "entry not found", f"No live entry {key!r} in {namespace!r}.")
    return json_response(entry.to_json())


async def put_entry(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    principal = auth.principal_of(request)
    tenant = auth.tenant_for(principal, parse_query(TenantQuery, request).tenant)
    body = await parse_body(StoreWrite, request)
    namespace, key = request.match_info["namespace"], request.match_info["key"]
    writer, trust = auth.writer_for(principal), auth.trust_for(principal)
    try:
        if body.persistent or body.ttl_seconds is not None:
            ttl = None if body.persistent else body.ttl_seconds
            entry = await rt.contexts.upsert(
                tenant, namespace, key, body.value, writer=writer, ttl_seconds=ttl, trust=trust
            )
        else:
            entry = await rt.contexts.write_and_extend(
                tenant, namespace, key, body.value, writer=writer, trust=trust
            )
    except StoreError as exc:
        raise store_error(exc) from exc
    return json_response(entry.to_json())


async def delete_entry(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    tenant = auth.tenant_for(auth.principal_of(request), parse_query(TenantQuery, request).tenant)
    namespace, key = request.match_info["namespace"], request.match_info["key"]
    try:
        deleted = await rt.contexts.delete(tenant, namespace, key)
    except StoreError as exc:
        raise store_error(exc) from exc
    if not deleted:
        raise ApiError(404, "entry not found", f"No entry {key!r} in {namespace!r}.")
    return web.Response(status=204)


async def get_job_anchor(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    principal = auth.principal_of(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    scope = principal.scope if isinstance(principal, auth.JobCaller) else None
    own = scope is not None and (scope.tenant, scope.job_name) == (namespace, name)
    if scope is not None and own and scope.uid:
        uid = scope.uid
    else:
        # 403/404 outside the chain; the anchor shown is the current object's.
        uid = reads.uid_of(await reads.load_job(principal, namespace, name))
    anchor = await rt.anchors.get_job_anchor(namespace, name, uid)
    if anchor is None:
        raise ApiError(404, "anchor not found", f"AgentJob {name} has written no anchor.")
    return json_response({"id": name, "namespace": namespace, "anchor": anchor})


async def put_job_anchor(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    principal = auth.principal_of(request)
    scope = auth.require_job(principal, namespace, name)
    anchor = await read_json(request)
    if not isinstance(anchor, dict):
        raise ApiError(422, "invalid anchor", "An anchor is a JSON object.")
    # The anchor belongs to the object the token was issued to; a token issued before
    # tokens recorded it stands for the current object of its name.
    uid = scope.uid or reads.uid_of(await reads.load_job(principal, namespace, name))
    try:
        size = await rt.anchors.put_job_anchor(namespace, name, uid, anchor)
    except StoreError as exc:
        raise store_error(exc) from exc
    return json_response({"id": name, "namespace": namespace, "size": size, "anchor": anchor})


async def get_team_anchor(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    namespace, chain_id = request.match_info["namespace"], request.match_info["chain_id"]
    auth.require_chain(auth.principal_of(request), namespace, chain_id)
    anchor = await rt.anchors.get_team_anchor(namespace, chain_id)
    if anchor is None:
        raise ApiError(404, "anchor not found", f"Chain {chain_id} has no team anchor.")
    return json_response({"chainId": chain_id, "namespace": namespace, "anchor": anchor})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/store/{namespace}", list_entries)
    app.router.add_get("/api/store/{namespace}/{key:.+}", get_entry)
    app.router.add_put("/api/store/{namespace}/{key:.+}", put_entry)
    app.router.add_delete("/api/store/{namespace}/{key:.+}", delete_entry)
    app.router.add_get("/api/jobs/{namespace}/{name}/anchor", get_job_anchor)
    app.router.add_put("/api/jobs/{namespace}/{name}/anchor", put_job_anchor)
    app.router.add_get("/api/chains/{namespace}/{chain_id}/anchor", get_team_anchor)
