"""A real client library against the stand-in: githubkit (the library the product is to
use) with App and installation auth, typed models parsed from the stand-in's answers,
and its own rate-limit handling reacting to the stand-in's injected signals."""

from __future__ import annotations

from typing import cast

import pytest
from githubkit import AppAuthStrategy, GitHub
from githubkit.exception import RequestFailed
from githubkit_schemas.latest.models import IssueComment, PullRequestSimple

from e2e.github import GitHubStandIn
from e2e.github.testing import FULL_NAME, OWNER, REPO, World, world


@pytest.fixture
def w(github: GitHubStandIn) -> World:
    return world(github)


def _app_client(w: World) -> GitHub[AppAuthStrategy]:
    auth = AppAuthStrategy(w.app.app_id, w.app.private_key_pem.decode())
    return GitHub(auth, base_url=w.github.url + "/", http_cache=False)


def test_githubkit_app_flow_comment_and_check_run(w: World) -> None:
    app = _app_client(w)
    installation = app.rest.apps.get_repo_installation(OWNER, REPO).parsed_data
    assert installation.id == w.installation.id
    me = app.rest.apps.get_authenticated().parsed_data
    assert me is not None and me.slug == "agentchain-test"
    scoped = app.with_auth(
        app.auth.as_installation(
            installation.id, repositories=[REPO], permissions={"issues": "write", "checks": "write"}
        )
    )
    comment = scoped.rest.issues.create_comment(OWNER, REPO, 1, body="Chain running").parsed_data
    scoped.rest.issues.update_comment(OWNER, REPO, comment.id, body="Chain done")
    # githubkit's list-returning methods are annotated list[...] inside classes that have a
    # method named ``list``, which mypy cannot resolve; cast restores the intended type.
    listed = cast(
        "list[IssueComment]", scoped.rest.issues.list_comments(OWNER, REPO, 1).parsed_data
    )
    assert [(c.id, c.body) for c in listed] == [(comment.id, "Chain done")]
    assert listed[0].user is not None and listed[0].user.login == "agentchain-test[bot]"
    run = scoped.rest.checks.create(OWNER, REPO, name="agentchain", head_sha="a" * 40).parsed_data
    done = scoped.rest.checks.update(
        OWNER, REPO, run.id, conclusion="success", output={"title": "Done", "summary": "ok"}
    ).parsed_data
    assert (done.status, done.conclusion) == ("completed", "success")
    (mint,) = w.github.requests("apps/create-installation-access-token")
    assert mint.body == {
        "repositories": [REPO],
        "permissions": {"issues": "write", "checks": "write"},
    }


def test_githubkit_token_outside_its_scope_is_refused(w: World) -> None:
    app = _app_client(w)
    scoped = app.with_auth(
        app.auth.as_installation(
            w.installation.id, repositories=[REPO], permissions={"issues": "read"}
        )
    )
    with pytest.raises(RequestFailed) as refused:
        scoped.rest.issues.create_comment(OWNER, REPO, 1, body="x")
    assert refused.value.response.status_code == 403
    with pytest.raises(RequestFailed) as hidden:
        scoped.rest.repos.get(OWNER, "secret-plans")
    assert hidden.value.response.status_code == 404


@pytest.mark.parametrize("kind", ["rate_limit", "secondary_rate_limit"])
def test_githubkit_waits_out_an_injected_rate_limit(w: World, kind: str) -> None:
    token = w.github.mint_token(w.installation, [REPO], {"issues": "write"})
    client = GitHub(token, base_url=w.github.url + "/", http_cache=False)
    w.github.inject(kind, times=1, route="issues/create-comment", retry_after=1)
    client.rest.issues.create_comment(OWNER, REPO, 1, body="after the limit")
    attempts = w.github.requests("issues/create-comment")
    assert [(a.status, a.fault) for a in attempts] == [
        (429 if kind == "rate_limit" else 403, kind),
        (201, None),
    ]
    assert [c.body for c in w.github.comments(FULL_NAME, 1)] == ["after the limit"]


async def test_githubkit_async_and_revocation(w: World) -> None:
    token = w.github.mint_token(w.installation, [REPO], {"pull_requests": "write"})
    client = GitHub(token, base_url=w.github.url + "/", http_cache=False, auto_retry=False)
    made = await client.rest.pulls.async_create(
        OWNER, REPO, title="Fix", head="agentchain/c1", base="main", body="Closes #1"
    )
    assert made.parsed_data.number == 2
    pulls = await client.rest.pulls.async_list(OWNER, REPO, head=f"{OWNER}:agentchain/c1")
    assert [p.number for p in cast("list[PullRequestSimple]", pulls.parsed_data)] == [2]
    await client.rest.apps.async_revoke_installation_access_token()
    with pytest.raises(RequestFailed) as revoked:
        await client.rest.pulls.async_get(OWNER, REPO, 2)
    assert revoked.value.response.status_code == 401
    assert not w.github.token_usable(token)
