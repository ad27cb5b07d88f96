"""The GitHub API stand-in itself: description checks, state, tokens, JWTs and faults.

No control plane: these start only the stand-in (a thread) and talk HTTP to it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from e2e.github import GitHubStandIn, ViolationsFound
from e2e.github.faults import SECONDARY_MESSAGE
from e2e.github.fixtures import require_spec
from e2e.github.standin import new_private_key
from e2e.github.testing import FULL_NAME, OWNER, REPO, World, world

COMMENTS = f"/repos/{FULL_NAME}/issues/1/comments"


@pytest.fixture
def w(github: GitHubStandIn) -> World:
    return world(github)


def _schema_valid(github: GitHubStandIn, operation_id: str, status: int, body: Any) -> None:
    assert github.spec.check_response(github.spec.by_id[operation_id], status, body) == []


def test_comment_lifecycle_is_answered_from_state_and_recorded(w: World) -> None:
    token = w.token({"issues": "write"})
    created = w.call("POST", COMMENTS, token=token, json={"body": "Chain started"})
    assert created.status_code == 201, created.text
    comment = created.json()
    _schema_valid(w.github, "issues/create-comment", 201, comment)
    assert comment["user"]["login"] == "agentchain-test[bot]"
    assert created.headers["Location"] == comment["url"]
    path = f"/repos/{FULL_NAME}/issues/comments/{comment['id']}"
    edited = w.call("PATCH", path, token=token, json={"body": "Chain done"})
    assert edited.status_code == 200 and edited.json()["body"] == "Chain done"
    assert w.call("GET", path, token=token).json()["body"] == "Chain done"
    listed = w.call("GET", COMMENTS, token=token, params={"per_page": 10}).json()
    assert [c["id"] for c in listed] == [comment["id"]]
    assert [c.body for c in w.github.comments(FULL_NAME, 1)] == ["Chain done"]
    (post,) = w.github.requests("issues/create-comment")
    assert (post.status, post.body, post.identity) == (
        201,
        {"body": "Chain started"},
        f"installation:{w.installation.id}",
    )
    assert post.headers["X-GitHub-Api-Version"] == "2022-11-28"


def test_comment_on_missing_issue_is_404(w: World) -> None:
    token = w.token({"issues": "write"})
    answer = w.call(
        "POST", f"/repos/{FULL_NAME}/issues/99/comments", token=token, json={"body": "x"}
    )
    assert answer.status_code == 404


@pytest.mark.parametrize(
    ("query", "body", "status", "problem"),
    [
        ({}, {"body": 42}, 422, "42 is not of type 'string'"),
        ({}, {}, 422, "'body' is a required property"),
        ({}, {"body": "x", "bodyy": "typo"}, 422, "unknown property 'bodyy'"),
        ({"pager": "2"}, {"body": "x"}, 422, "unknown query parameter 'pager'"),
    ],
    ids=["wrong-type", "missing-field", "unknown-property", "unknown-parameter"],
)
def test_request_off_the_description_is_refused_and_a_violation(
    w: World, query: dict[str, str], body: dict[str, Any], status: int, problem: str
) -> None:
    answer = w.call("POST", COMMENTS, token=w.token(), params=query, json=body)
    assert answer.status_code == status
    assert answer.json()["message"].startswith("Invalid request.")
    (violation,) = w.github.take_violations()
    assert violation.kind == "request" and violation.operation_id == "issues/create-comment"
    assert any(problem in p for p in violation.problems), violation.problems
    assert w.github.comments(FULL_NAME, 1) == []


def test_query_value_of_wrong_type_and_enum_are_violations(w: World) -> None:
    token = w.token()
    assert w.call("GET", COMMENTS, token=token, params={"per_page": "ten"}).status_code == 422
    pulls = w.call("GET", f"/repos/{FULL_NAME}/pulls", token=token, params={"state": "merged"})
    assert pulls.status_code == 422
    assert [v.operation_id for v in w.github.take_violations()] == [
        "issues/list-comments",
        "pulls/list",
    ]


def test_unparsable_json_is_400_and_path_of_wrong_type_404(w: World) -> None:
    bad = w.call(
        "POST",
        COMMENTS,
        token=w.token(),
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert bad.status_code == 400 and bad.json()["message"] == "Problems parsing JSON"
    assert (
        w.call("GET", f"/repos/{FULL_NAME}/issues/one/comments", token=w.token()).status_code == 404
    )
    assert len(w.github.take_violations()) == 2


def test_unknown_route_and_method_are_404_and_violations(w: World) -> None:
    unknown = w.call("GET", f"/repos/{FULL_NAME}/comments-of-issues", token=w.token())
    assert unknown.status_code == 404
    assert w.call("PUT", COMMENTS, token=w.token(), json={"body": "x"}).status_code == 404
    kinds = [v.kind for v in w.github.take_violations()]
    assert kinds == ["unknown-route", "unknown-route"]


def test_assert_clean_fails_a_test_that_made_a_bad_request(w: World) -> None:
    w.call("POST", COMMENTS, token=w.token(), json={"bdy": "typo"})
    with pytest.raises(ViolationsFound, match="unknown property 'bdy'"):
        w.github.assert_clean()
    w.github.take_violations()


def test_operation_known_to_github_but_not_implemented_is_flagged(w: World) -> None:
    answer = w.call("GET", f"/repos/{FULL_NAME}/branches", token=w.token())
    assert answer.status_code == 501
    assert [v.kind for v in w.github.take_violations()] == ["unimplemented"]


# -- installation tokens ------------------------------------------------------------------
def test_minted_token_is_narrowed_to_repositories_and_permissions(w: World) -> None:
    answer = w.call(
        "POST",
        f"/app/installations/{w.installation.id}/access_tokens",
        jwt=True,
        json={"repositories": [REPO], "permissions": {"issues": "write"}},
    )
    assert answer.status_code == 201, answer.text
    body = answer.json()
    _schema_valid(w.github, "apps/create-installation-access-token", 201, body)
    assert body["token"].startswith("ghs_") and len(body["token"]) == 40
    assert body["permissions"] == {"issues": "write", "metadata": "read"}
    assert [r["full_name"] for r in body["repositories"]] == [FULL_NAME]
    expires = time.mktime(time.strptime(body["expires_at"], "%Y-%m-%dT%H:%M:%SZ"))
    assert 3500 < expires - time.mktime(time.gmtime()) <= 3600


@pytest.mark.parametrize(
    "request_body",
    [
        {"repositories": ["not-installed"]},
        {"permissions": {"administration": "write"}},
        {"repository_ids": [424242]},
    ],
    ids=["unknown-repo", "permission-not-granted", "unknown-repo-id"],
)
def test_token_cannot_be_wider_than_the_installation(w: World, request_body: Any) -> None:
    # The default installation: every repository of acme, the App's permissions.
    answer = w.call(
        "POST", f"/app/installations/{w.installation.id}/access_tokens", jwt=True, json=request_body
    )
    assert answer.status_code == 422


def test_token_reaches_only_its_repositories(w: World) -> None:
    token = w.token({"issues": "write", "contents": "read"})
    secret = w.call("GET", f"/repos/{OWNER}/secret-plans", token=token)
    assert secret.status_code == 404  # private and outside the token: not even there
    public = w.call("GET", f"/repos/{OWNER}/public-site", token=token)
    assert public.status_code == 200  # public data stays readable...
    w.github.add_issue(f"{OWNER}/public-site")
    write = w.call(
        "POST", f"/repos/{OWNER}/public-site/issues/1/comments", token=token, json={"body": "x"}
    )
    assert write.status_code == 403  # ...but not writable


def test_missing_permission_is_403(w: World) -> None:
    token = w.token({"contents": "read"})
    answer = w.call("POST", COMMENTS, token=token, json={"body": "x"})
    assert answer.status_code == 403
    assert answer.json()["message"] == "Resource not accessible by integration"
    read_only = w.token({"issues": "read"})
    assert w.call("GET", COMMENTS, token=read_only).status_code == 200
    assert w.call("POST", COMMENTS, token=read_only, json={"body": "x"}).status_code == 403


def test_revoked_and_expired_tokens_are_401(w: World) -> None:
    token = w.token({"issues": "write"})
    assert w.call("DELETE", "/installation/token", token=token).status_code == 204
    assert w.call("GET", COMMENTS, token=token).status_code == 401
    expiring = w.token({"issues": "write"})
    w.github.expire_token(expiring)
    answer = w.call("GET", COMMENTS, token=expiring)
    assert answer.status_code == 401 and answer.json()["message"] == "Bad credentials"
    assert w.call("GET", COMMENTS, token="ghs_" + "x" * 36).status_code == 401


# -- App JWT ----------------------------------------------------------------------------
def _app_get(w: World, token: str, path: str = "/app") -> httpx.Response:
    return w.call("GET", path, headers={"Authorization": f"Bearer {token}"})


def test_app_jwt_is_verified_like_github(w: World) -> None:
    ok = _app_get(w, w.app.jwt())
    assert ok.status_code == 200 and ok.json()["id"] == w.app.app_id
    _schema_valid(w.github, "apps/get-authenticated", 200, ok.json())
    assert _app_get(w, w.app.jwt(issued_at=time.time() - 1200)).status_code == 401  # expired
    assert _app_get(w, w.app.jwt(lifetime=900)).status_code == 401  # over 10 minutes
    forged = jwt.encode(
        {"iat": int(time.time()) - 60, "exp": int(time.time()) + 300, "iss": str(w.app.app_id)},
        new_private_key(),
        algorithm="RS256",
    )
    assert _app_get(w, forged).status_code == 401
    unknown = jwt.encode(
        {"iat": int(time.time()) - 60, "exp": int(time.time()) + 300, "iss": "7"},
        w.app.private_key_pem,
        algorithm="RS256",
    )
    assert _app_get(w, unknown).status_code == 401
    no_exp = jwt.encode(
        {"iat": int(time.time()) - 60, "iss": str(w.app.app_id)},
        w.app.private_key_pem,
        algorithm="RS256",
    )
    assert _app_get(w, no_exp).status_code == 401


def test_jwt_and_installation_token_each_only_where_github_takes_them(w: World) -> None:
    assert w.call("GET", "/app", token=w.token()).status_code == 401
    assert w.call("GET", COMMENTS, jwt=True).status_code == 403
    found = w.call("GET", f"/repos/{FULL_NAME}/installation", jwt=True)
    assert found.status_code == 200 and found.json()["id"] == w.installation.id
    assert w.call("GET", f"/app/installations/{w.installation.id}", jwt=True).status_code == 200
    other = w.github.register_app("someone-else")
    foreign = _app_get(w, other.jwt(), f"/app/installations/{w.installation.id}")
    assert foreign.status_code == 404
    assert _app_get(w, other.jwt(), f"/repos/{FULL_NAME}/installation").status_code == 404


# -- faults -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "status", "message"),
    [
        ("forbidden", 403, "Resource not accessible by integration"),
        ("not_found", 404, "Not Found"),
        ("rate_limit", 429, "API rate limit exceeded for installation."),
        ("secondary_rate_limit", 403, SECONDARY_MESSAGE),
        ("server_error", 500, "Server Error"),
    ],
)
def test_injected_fault_answers_the_next_matching_requests(
    w: World, kind: str, status: int, message: str
) -> None:
    token = w.token({"issues": "write"})
    w.github.inject(kind, times=2, method="POST", route="issues/create-comment", retry_after=7)
    assert w.call("GET", COMMENTS, token=token).status_code == 200  # other route: untouched
    for _ in range(2):
        answer = w.call("POST", COMMENTS, token=token, json={"body": "x"})
        assert (answer.status_code, answer.json()["message"]) == (status, message)
    if "rate_limit" in kind:
        assert answer.headers["Retry-After"] == "7"
        assert int(answer.headers["X-RateLimit-Reset"]) >= int(time.time()) + 6
        remaining = answer.headers["X-RateLimit-Remaining"]
        assert (remaining == "0") == (kind == "rate_limit")
    assert w.call("POST", COMMENTS, token=token, json={"body": "x"}).status_code == 201
    assert [e.fault for e in w.github.requests("issues/create-comment")] == [kind, kind, None]
    assert len(w.github.comments(FULL_NAME, 1)) == 1


def test_faults_can_be_ordered_over_http(w: World) -> None:
    ordered = httpx.post(
        f"{w.github.origin}/_standin/faults",
        json={"kind": "server_error", "times": 1, "route": COMMENTS},
    )
    assert ordered.status_code == 201
    assert w.call("GET", COMMENTS, token=w.token()).status_code == 500
    assert w.call("GET", COMMENTS, token=w.token()).status_code == 200
    recorded = httpx.get(f"{w.github.origin}/_standin/requests").json()
    assert [r["status"] for r in recorded] == [500, 200]
    bad = httpx.post(f"{w.github.origin}/_standin/faults", json={"kind": "gremlins", "times": 1})
    assert bad.status_code == 400


def test_every_answer_carries_rate_limit_headers_and_rate_limit_reports_them(w: World) -> None:
    token = w.token()
    first = w.call("GET", f"/repos/{FULL_NAME}", token=token)
    second = w.call("GET", f"/repos/{FULL_NAME}", token=token)
    used = [int(a.headers["X-RateLimit-Used"]) for a in (first, second)]
    assert used[1] == used[0] + 1 and first.headers["X-RateLimit-Limit"] == "5000"
    overview = w.call("GET", "/rate_limit", token=token).json()
    assert overview["resources"]["core"]["used"] == used[1]
    _schema_valid(w.github, "rate-limit/get", 200, overview)


def test_api_version_header_is_checked_and_echoed(w: World) -> None:
    token = w.token()
    default = w.call("GET", f"/repos/{FULL_NAME}", token=token, headers={})
    assert default.headers["X-GitHub-Api-Version-Selected"] == "2022-11-28"
    newer = w.call("GET", f"/repos/{FULL_NAME}", token=token,
                   headers={"X-GitHub-Api-Version": "2026-03-10"})  # fmt: skip
    assert newer.headers["X-GitHub-Api-Version-Selected"] == "2026-03-10"
    unknown = w.call("GET", f"/repos/{FULL_NAME}", token=token,
                     headers={"X-GitHub-Api-Version": "2099-01-01"})  # fmt: skip
    assert unknown.status_code == 400
    assert unknown.json()["message"] == "API version 2099-01-01 is not supported."
    assert len(w.github.take_violations()) == 1


def test_lists_are_paged_with_link_headers(w: World) -> None:
    token = w.token({"issues": "write"})
    for number in range(5):
        w.call("POST", COMMENTS, token=token, json={"body": f"comment {number}"})
    first = w.call("GET", COMMENTS, token=token, params={"per_page": 2})
    assert [c["body"] for c in first.json()] == ["comment 0", "comment 1"]
    assert 'rel="next"' in first.headers["Link"] and "page=3" in first.headers["Link"]
    last = w.call("GET", first.links["last"]["url"], token=token)
    assert [c["body"] for c in last.json()] == ["comment 4"]
    assert set(last.links) == {"prev", "first"}
    assert "Link" not in w.call("GET", COMMENTS, token=token).headers


def test_token_by_repository_id(w: World) -> None:
    repo_id = w.github.state.repo(OWNER, REPO)
    assert repo_id is not None
    answer = w.call("POST", f"/app/installations/{w.installation.id}/access_tokens", jwt=True,
                    json={"repository_ids": [repo_id.id]})  # fmt: skip
    assert answer.status_code == 201
    assert [r["id"] for r in answer.json()["repositories"]] == [repo_id.id]


@pytest.mark.parametrize(("ci", "outcome"), [("true", "Failed"), ("", "Skipped")])
def test_missing_description_fails_in_ci_and_skips_locally(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str, outcome: str
) -> None:
    monkeypatch.setenv("AGENTCHAIN_GITHUB_OPENAPI", str(tmp_path / "absent.json"))
    monkeypatch.setenv("CI", ci)
    with pytest.raises(BaseException) as stopped:
        require_spec()
    assert type(stopped.value).__name__ == outcome
    assert "e2e/setup.sh" in str(stopped.value)
