"""Bearer tokens for the job API: who is calling, and what they may see.

Two kinds of principal (SPEC §7):

* **Admin** — a token from ``Settings.admin_tokens`` (a mounted Secret).  Sees
  every namespace the operator serves, may start jobs; may not write a job's
  anchor (only that job may).
* **Job** — a token minted per AgentJob (``TokenStore``), resolved on every
  request, so it is dead the moment the operator revokes it when the job ends.
  It sees only its own namespace *and* its own chain, writes only its own
  anchor and its own namespace's store.

:func:`auth_middleware` resolves the principal for ``/api/`` paths once (401
without a valid one) and stores it on the request; handlers then call the
``require_*`` helpers, which raise 403 outside the scope.  Tokens and the
``Authorization`` header are never logged.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

from agentchain.core.runtime import Runtime
from agentchain.prompts.rules import storetrust
from agentchain.store.tokens import TokenScope
from agentchain.web.responses import ApiError, Handler

BEARER = "bearer "
# Paths under /api/ that are public: the API's own description.
PUBLIC_API_PATHS = frozenset({"/api/openapi.json"})


@dataclass(frozen=True)
class Admin:
    """An operator administrator; ``namespaces`` empty means every namespace."""

    namespaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobCaller:
    """A running job acting through its own token."""

    scope: TokenScope


Principal = Admin | JobCaller
PRINCIPAL_KEY: web.RequestKey[Principal] = web.RequestKey("agentchain.principal")


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if header is None or not header[: len(BEARER)].lower() == BEARER:
        return None
    token = header[len(BEARER) :].strip()
    return token or None


def is_admin_token(token: str, admin_tokens: Sequence[str]) -> bool:
    """Constant-time comparison against every admin token (none configured → never)."""
    presented = token.encode("utf-8", "surrogatepass")
    found = False
    for candidate in admin_tokens:
        if candidate:
            found |= hmac.compare_digest(candidate.encode("utf-8"), presented)
    return found


async def resolve(rt: Runtime, header: str | None) -> Principal | None:
    token = bearer_token(header)
    if token is None:
        return None
    if is_admin_token(token, rt.settings.admin_tokens):
        return Admin(rt.settings.namespaces)
    scope = await rt.tokens.resolve(token)
    return JobCaller(scope) if scope is not None else None


def auth_middleware(rt: Runtime) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/api/") and request.path not in PUBLIC_API_PATHS:
            principal = await resolve(rt, request.headers.get("Authorization"))
            if principal is None:
                raise ApiError(
                    401,
                    "unauthorized",
                    "Send 'Authorization: Bearer <token>' with an admin token or a live job token.",
                )
            request[PRINCIPAL_KEY] = principal
        return await handler(request)

    return middleware


def principal_of(request: web.Request) -> Principal:
    return request[PRINCIPAL_KEY]


def require_admin(principal: Principal) -> Admin:
    if not isinstance(principal, Admin):
        raise ApiError(403, "forbidden", "This needs an admin token.")
    return principal


def require_namespace(principal: Principal, namespace: str) -> None:
    """403 unless the principal may see ``namespace``."""
    if isinstance(principal, JobCaller):
        if principal.scope.tenant != namespace:
            raise ApiError(403, "forbidden", "A job token only sees its own namespace.")
    elif principal.namespaces and namespace not in principal.namespaces:
        raise ApiError(403, "forbidden", f"The operator does not serve namespace {namespace}.")


def require_chain(principal: Principal, namespace: str, chain_id: str | None) -> None:
    """403 unless the principal may see the chain ``chain_id`` in ``namespace``."""
    require_namespace(principal, namespace)
    if isinstance(principal, JobCaller) and principal.scope.chain_id != chain_id:
        raise ApiError(403, "forbidden", "A job token only sees its own chain.")


def require_job(principal: Principal, namespace: str, name: str) -> TokenScope:
    """403 unless the principal is the job ``namespace/name`` itself."""
    if not isinstance(principal, JobCaller):
        raise ApiError(403, "forbidden", "Only the job's own token may do this.")
    scope = principal.scope
    if scope.tenant != namespace or scope.job_name != name:
        raise ApiError(403, "forbidden", "Only the job's own token may do this.")
    return scope


def tenant_for(principal: Principal, requested: str | None) -> str:
    """The Kubernetes namespace a store call acts in: the token's, or an admin's choice."""
    if isinstance(principal, JobCaller):
        if requested is not None and requested != principal.scope.tenant:
            raise ApiError(403, "forbidden", "A job token only sees its own namespace's store.")
        return principal.scope.tenant
    if not requested:
        raise ApiError(422, "tenant required", "Admins name the namespace with ?tenant=<ns>.")
    require_namespace(principal, requested)
    return requested


def writer_for(principal: Principal) -> str:
    """Who a store write is recorded as: the token's job, never the request's claim."""
    if isinstance(principal, JobCaller):
        return principal.scope.job_name
    return "admin"


def trust_for(principal: Principal) -> str:
    """The trust mark a store write gets (``prompts/rules/storetrust.py``): the job's, fixed at
    its launch from its chain's event, or an admin's."""
    if isinstance(principal, JobCaller):
        return principal.scope.trust
    return storetrust.TRUSTED
