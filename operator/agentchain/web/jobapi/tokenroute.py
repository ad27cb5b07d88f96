"""``POST /api/github/token``: a running job's fresh GitHub installation token.

Installation tokens live one hour; a job that runs longer asks here with its own job
token (``AGENT_TOKEN``) and gets a new one for the scope recorded when it was
launched: the event's repository and its AiAgent's declared permissions
(``github/tokenminting.py``).  Nothing in the request can change that scope, and only
a job's own token may ask (an admin token is refused: it is no job's), for its own
incarnation: an AgentJob deleted and created again under the same name has a new uid
and refreshes nothing of the old one's.  The token is
revoked with the job's others when the job ends.

Answers: 200 ``{token, expiresAt, repository, permissions}``; 403 for an admin token;
404 when the operator has no App or the job's agent declares no permissions; 429 past
24 tokens for one job (each lives an hour); 502 with
the reason when GitHub refuses (``NotInstalled``, ``PermissionMissing``, ...) and 503
when it is unreachable or rate-limited.
"""

from __future__ import annotations

from aiohttp import web

from agentchain.github import tokenminting
from agentchain.github.appruntime import side_of
from agentchain.github.githuberrors import RATE_LIMITED, UNAVAILABLE, GitHubError
from agentchain.web import auth
from agentchain.web.jobapi import reads
from agentchain.web.responses import ApiError, json_response

PATH = "/api/github/token"


async def fresh_token(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    principal = auth.principal_of(request)
    if not isinstance(principal, auth.JobCaller):
        raise ApiError(403, "forbidden", "Only a job's own token may ask for its GitHub token.")
    scope = principal.scope
    try:
        minted = await tokenminting.refresh(rt, scope.tenant, scope.job_name, scope.uid)
    except tokenminting.Refused as refused:
        raise ApiError(refused.status, "no github token", refused.message) from None
    except GitHubError as exc:
        status = 503 if exc.reason in (RATE_LIMITED, UNAVAILABLE) else 502
        raise ApiError(status, "github refused", f"{exc.reason}: {exc}") from None
    presented = auth.bearer_token(request.headers.get("Authorization")) or ""
    if await rt.tokens.resolve(presented) is None:
        # The job ended while the token was minted: its end revoked the others already.
        side = side_of(rt)
        if side is not None:
            await tokenminting.revoke(side, scope.tenant, scope.job_name, scope.uid)
        raise ApiError(401, "unauthorized", "The job ended; its tokens are revoked.")
    record = await tokenminting.scope_record(rt, scope.tenant, scope.job_name, scope.uid)
    return json_response(
        {
            "token": minted.token,
            "expiresAt": minted.expires_at.isoformat().replace("+00:00", "Z"),
            "repository": record.get("repository"),
            "permissions": record.get("permissions"),
        }
    )


def add_routes(app: web.Application) -> None:
    app.router.add_post(PATH, fresh_token)
