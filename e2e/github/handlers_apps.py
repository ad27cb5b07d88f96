"""App-level endpoints: the App itself, its installations, token minting and revocation."""

from __future__ import annotations

from e2e.github import access, model
from e2e.github.calls import Answer, Call, handles


@handles("apps/get-authenticated")
def get_app(call: Call) -> Answer:
    app = call.state.apps[access.require_app(call.identity)]
    return Answer(200, call.render.app(app))


def _own_installation(call: Call) -> tuple[model.App, model.Installation]:
    app = call.state.apps[access.require_app(call.identity)]
    installation = call.state.installations.get(call.int_param("installation_id"))
    if installation is None or installation.app_id != app.id:
        raise model.Refused(404, "Not Found")
    return app, installation


@handles("apps/get-installation")
def get_installation(call: Call) -> Answer:
    app, installation = _own_installation(call)
    return Answer(200, call.render.installation(installation, app))


@handles("apps/get-repo-installation")
def get_repo_installation(call: Call) -> Answer:
    app = call.state.apps[access.require_app(call.identity)]
    repo = call.state.repo(call.params["owner"], call.params["repo"])
    installation = call.state.installation_for(repo, app.id) if repo else None
    if installation is None:
        raise model.Refused(404, "Not Found")
    return Answer(200, call.render.installation(installation, app))


@handles("apps/create-installation-access-token")
def create_token(call: Call) -> Answer:
    _, installation = _own_installation(call)
    body = call.body or {}
    token = call.state.mint_token(
        installation.id,
        body.get("repositories"),
        body.get("repository_ids"),
        body.get("permissions"),
    )
    return Answer(201, call.render.token(token, call.state.repos_of(token)))


@handles("apps/revoke-installation-access-token")
def revoke_token(call: Call) -> Answer:
    token = access.require_installation(call.identity)
    token.revoked = True
    return Answer(204)


@handles("rate-limit/get")
def rate_limit(call: Call) -> Answer:
    # GitHub does not count this call against the budget it reports.
    limit, remaining, reset = call.state.spend(str(call.identity), cost=0)
    return Answer(200, call.render.rate_limit(remaining, limit, reset))
