"""The operator's GitHub client (``agentchain.github.apps``) against the stand-in.

No cluster here: the client alone, as the write-back worker and the token code use it,
every request checked against GitHub's description by the stand-in.

Aspects covered:
* an installation token minted for ONE repository and exactly the given permissions
  (the stand-in's record of the request), refused by GitHub for another repository,
  and dead once revoked (revoking twice is fine);
* comments: create, update, and find again by the marker, only among the App's own
  comments (a human's comment carrying the same marker is not ours);
* Check Runs: create with an ``external_id``, find again by it, update to a conclusion;
* failures as the engine needs them: a wrong key is ``BadAppKey``, an installation
  that does not reach the repository ``NotInstalled``, a permission the App lacks
  ``PermissionMissing``, 429 and secondary limits ``RateLimited`` with the
  ``Retry-After`` GitHub sent, 500 ``Unavailable``;
* GitHub Enterprise Server: the same client under ``/api/v3``.
"""

from __future__ import annotations

import pytest

from agentchain.github.apps import GitHubApp
from agentchain.github.githuberrors import GitHubError
from agentchain.github.rules.githubscope import Scope
from e2e.github import GitHubStandIn, model
from e2e.github.standin import new_private_key
from e2e.github.testing import FULL_NAME, REPO, World, world

MARKER = "<!-- agentchain:chain=ns/c1 -->"


@pytest.fixture
def w(github: GitHubStandIn) -> World:
    return world(github)


def _app(w: World, key: bytes | None = None) -> GitHubApp:
    pem = (key or w.app.private_key_pem).decode()
    return GitHubApp(w.app.app_id, pem, w.github.url)


def _scope(w: World, **permissions: str) -> Scope:
    return Scope(w.installation.id, FULL_NAME, permissions or {"issues": "write"})


async def test_mint_is_scoped_and_revocable(w: World) -> None:
    app = _app(w)
    minted = await app.mint(_scope(w, contents="read", issues="write"))
    (request,) = w.github.requests("apps/create-installation-access-token")
    assert request.body == {
        "repositories": [REPO],
        "permissions": {"contents": "read", "issues": "write"},
    }
    assert w.github.token_usable(minted.token)
    other = w.call("GET", "/repos/acme/secret-plans", token=minted.token)
    assert other.status_code == 404
    await app.revoke(minted.token)
    assert not w.github.token_usable(minted.token)
    await app.revoke(minted.token)  # Already dead: fine.


async def test_comment_round_trip_finds_only_its_own(w: World) -> None:
    app = _app(w)
    scope = _scope(w)
    with w.github.state.lock:  # A person quoting the marker: anyone can type it.
        cid = w.github.state.next_id()
        w.github.state.comments[cid] = model.Comment(
            cid, FULL_NAME, 1, MARKER, "mallory", "User", None
        )
    assert await app.find_comment(scope, 1, MARKER) is None
    made = await app.create_comment(scope, 1, MARKER + "\nrunning")
    assert await app.find_comment(scope, 1, MARKER) == made
    await app.update_comment(scope, made, MARKER + "\ndone")
    bodies = [c.body for c in w.github.comments(FULL_NAME, 1)]
    assert bodies[-1] == MARKER + "\ndone" and len(bodies) == 2


async def test_check_run_round_trip(w: World) -> None:
    app = _app(w)
    scope = _scope(w, checks="write")
    sha = "c" * 40
    assert await app.find_check_run(scope, "agentchain", sha, "agentchain:ns/c1") is None
    fields = {"status": "in_progress", "output": {"title": "Running", "summary": "s"}}
    run = await app.create_check_run(scope, "agentchain", sha, "agentchain:ns/c1", fields)
    assert await app.find_check_run(scope, "agentchain", sha, "agentchain:ns/c1") == run
    done = {
        "status": "completed",
        "conclusion": "success",
        "output": {"title": "Done", "summary": "s"},
    }
    await app.update_check_run(scope, run, done)
    (stored,) = w.github.check_runs(FULL_NAME)
    assert (stored.status, stored.conclusion, stored.external_id) == (
        "completed",
        "success",
        "agentchain:ns/c1",
    )


async def test_failures_have_reasons(w: World) -> None:
    with pytest.raises(GitHubError) as bad_key:
        await _app(w, new_private_key()).mint(_scope(w))
    assert bad_key.value.reason == "BadAppKey"
    elsewhere = w.github.install(w.app, "globex", repositories=[])
    w.github.add_repo("globex/site")
    with pytest.raises(GitHubError) as not_installed:
        await _app(w).mint(Scope(elsewhere.id, "globex/site", {"issues": "write"}))
    assert not_installed.value.reason == "NotInstalled"
    with pytest.raises(GitHubError) as missing:
        await _app(w).mint(_scope(w, administration="write"))
    assert missing.value.reason == "PermissionMissing"
    w.github.take_violations()


@pytest.mark.parametrize("kind", ["rate_limit", "secondary_rate_limit", "server_error"])
async def test_limits_and_errors(w: World, kind: str) -> None:
    app = _app(w)
    await app.token_for(_scope(w))
    w.github.inject(kind, route="issues/create-comment", retry_after=7)
    with pytest.raises(GitHubError) as failed:
        await app.create_comment(_scope(w), 1, "x")
    if kind == "server_error":
        assert failed.value.reason == "Unavailable"
    else:
        assert failed.value.reason == "RateLimited" and failed.value.retry_after == 7


async def test_enterprise_server_prefix() -> None:
    with GitHubStandIn(prefix="/api/v3") as ghes:
        w = world(ghes)
        made = await _app(w).create_comment(_scope(w), 1, "hello")
        assert [c.id for c in ghes.comments(FULL_NAME, 1)] == [made]
        ghes.assert_clean()
