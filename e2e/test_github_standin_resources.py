"""The stand-in's stateful resources beyond comments: reactions, check runs (also a
check suite's), pull requests (their files and reviews, multi-line comments too),
repositories and installations, each answer valid under GitHub's description."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from e2e.github import GitHubStandIn
from e2e.github.gitserver import GitServer
from e2e.github.testing import FULL_NAME, OWNER, World, world

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def w(github: GitHubStandIn) -> World:
    return world(github)


def _valid(w: World, operation_id: str, status: int, body: Any) -> None:
    assert w.github.spec.check_response(w.github.spec.by_id[operation_id], status, body) == []


def test_repository_reports_default_branch_and_visibility(w: World) -> None:
    w.github.add_repo(f"{OWNER}/trunk-based", default_branch="trunk", private=False)
    token = w.github.mint_token(w.installation)
    answer = w.call("GET", f"/repos/{OWNER}/trunk-based", token=token).json()
    assert (answer["default_branch"], answer["private"]) == ("trunk", False)
    _valid(w, "repos/get", 200, answer)
    assert w.call("GET", f"/repos/{FULL_NAME}", token=token).json()["private"] is True


def test_reactions_on_a_comment(w: World) -> None:
    token = w.token({"issues": "write"})
    comment = w.call("POST", f"/repos/{FULL_NAME}/issues/1/comments", token=token,
                     json={"body": "x"}).json()  # fmt: skip
    path = f"/repos/{FULL_NAME}/issues/comments/{comment['id']}/reactions"
    first = w.call("POST", path, token=token, json={"content": "eyes"})
    again = w.call("POST", path, token=token, json={"content": "eyes"})
    assert (first.status_code, again.status_code) == (201, 200)  # GitHub: 200 if it exists
    assert first.json()["id"] == again.json()["id"]
    listed = w.call("GET", path, token=token).json()
    assert [r["content"] for r in listed] == ["eyes"]
    assert w.call("POST", path, token=token, json={"content": "party"}).status_code == 422
    assert len(w.github.take_violations()) == 1  # "party" is not a reaction GitHub knows


def test_check_run_goes_queued_in_progress_completed(w: World) -> None:
    token = w.token({"checks": "write"})
    created = w.call(
        "POST",
        f"/repos/{FULL_NAME}/check-runs",
        token=token,
        json={"name": "agentchain", "head_sha": SHA, "status": "queued"},
    )
    assert created.status_code == 201, created.text
    run = created.json()
    assert (run["status"], run["conclusion"], run["started_at"]) == ("queued", None, None)
    path = f"/repos/{FULL_NAME}/check-runs/{run['id']}"
    started = w.call("PATCH", path, token=token, json={"status": "in_progress"}).json()
    assert started["status"] == "in_progress" and started["started_at"]
    done = w.call(
        "PATCH",
        path,
        token=token,
        json={"conclusion": "success", "output": {"title": "Chain done", "summary": "3 steps"}},
    )
    assert done.status_code == 200
    got = w.call("GET", path, token=token).json()
    assert (got["status"], got["conclusion"], got["output"]["summary"]) == (
        "completed",
        "success",
        "3 steps",
    )
    _valid(w, "checks/get", 200, got)
    listed = w.call("GET", f"/repos/{FULL_NAME}/commits/{SHA}/check-runs", token=token).json()
    assert [r["id"] for r in listed["check_runs"]] == [run["id"]]
    assert w.github.check_runs(FULL_NAME)[0].conclusion == "success"


def test_check_run_needs_checks_permission_and_a_conclusion_to_complete(w: World) -> None:
    no_checks = w.token({"issues": "write"})
    body = {"name": "agentchain", "head_sha": SHA}
    path = f"/repos/{FULL_NAME}/check-runs"
    assert w.call("POST", path, token=no_checks, json=body).status_code == 403
    token = w.token({"checks": "write"})
    incomplete = w.call("POST", path, token=token, json={**body, "status": "completed"})
    assert incomplete.status_code == 422


def test_check_run_is_changed_only_by_the_app_that_made_it(w: World) -> None:
    run = w.call("POST", f"/repos/{FULL_NAME}/check-runs", token=w.token({"checks": "write"}),
                 json={"name": "agentchain", "head_sha": SHA}).json()  # fmt: skip
    other = w.github.register_app("other-app")
    other_token = w.github.mint_token(w.github.install(other, OWNER), ["widgets"])
    answer = w.call("PATCH", f"/repos/{FULL_NAME}/check-runs/{run['id']}", token=other_token,
                    json={"conclusion": "failure"})  # fmt: skip
    assert answer.status_code == 403


def test_pull_request_create_list_get_update(w: World) -> None:
    token = w.token({"pull_requests": "write"})
    body = {"title": "Fix wobble", "head": "agentchain/c1", "base": "main",
            "body": "Closes #1"}  # fmt: skip
    created = w.call("POST", f"/repos/{FULL_NAME}/pulls", token=token, json=body)
    assert created.status_code == 201, created.text
    pull = created.json()
    assert (pull["number"], pull["head"]["ref"], pull["base"]["ref"]) == (
        2,
        "agentchain/c1",
        "main",
    )
    duplicate = w.call("POST", f"/repos/{FULL_NAME}/pulls", token=token, json=body)
    assert duplicate.status_code == 422
    assert "already exists" in duplicate.json()["errors"][0]["message"]
    listed = w.call(
        "GET",
        f"/repos/{FULL_NAME}/pulls",
        token=token,
        params={"head": f"{OWNER}:agentchain/c1", "state": "open"},
    ).json()
    assert [p["number"] for p in listed] == [2]
    _valid(w, "pulls/list", 200, listed)
    path = f"/repos/{FULL_NAME}/pulls/2"
    updated = w.call("PATCH", path, token=token, json={"body": "Closes #1\n\nDone."}).json()
    assert updated["body"] == "Closes #1\n\nDone."
    assert w.call("GET", path, token=token).json()["title"] == "Fix wobble"
    assert (
        w.call(
            "POST",
            f"/repos/{FULL_NAME}/issues/2/comments",
            token=token,
            json={"body": "pull requests are issues too"},
        ).status_code
        == 201
    )
    assert (
        w.call(
            "POST",
            f"/repos/{FULL_NAME}/pulls",
            token=w.token({"issues": "write"}),
            json={**body, "head": "other"},
        ).status_code
        == 403
    )


def test_api_under_a_path_prefix_as_on_github_enterprise_server() -> None:
    from e2e.github.fixtures import require_spec

    require_spec()
    with GitHubStandIn(prefix="/api/v3") as enterprise:
        w = world(enterprise)
        assert w.github.url.endswith("/api/v3")
        answer = w.call("GET", "/app", jwt=True)
        assert answer.status_code == 200
        assert answer.json()["html_url"].startswith(enterprise.url)
        enterprise.assert_clean()


def test_issue_is_readable_with_issues_read(w: World) -> None:
    token = w.token({"issues": "read"})
    answer = w.call("GET", f"/repos/{FULL_NAME}/issues/1", token=token)
    assert answer.status_code == 200, answer.text
    issue = answer.json()
    assert (issue["title"], issue["body"], issue["comments"]) == (
        "Widgets wobble",
        "They wobble.",
        0,
    )
    assert "pull_request" not in issue
    _valid(w, "issues/get", 200, issue)
    assert (
        w.call("GET", f"/repos/{FULL_NAME}/issues/1", token=w.token({"checks": "read"})).status_code
        == 403
    )


def _branch_with_a_fix(git_server: GitServer, tmp_path: Path) -> None:
    """``acme/widgets`` on the git server, and a branch ``fix`` that changes its README."""
    git_server.create_repo(FULL_NAME, {"README.md": "Hello Wrold\nline 2\nline 3\n"})
    work = tmp_path / "work"
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"}  # fmt: skip
    bare = str(git_server.bare_path(FULL_NAME))
    for args in (
        ["clone", "-q", bare, str(work)],
        ["-C", str(work), "checkout", "-q", "-b", "fix"],
    ):
        subprocess.run(["git", *args], check=True, env=env)
    (work / "README.md").write_text("Hello World\nline 2\nline 3\n")
    (work / "NEW.md").write_text("new\n")
    for args in (["add", "--all"], ["commit", "-qm", "Fix"], ["push", "-q", "origin", "fix"]):
        subprocess.run(["git", "-C", str(work), *args], check=True, env=env)


def test_pull_request_files_and_reviews_with_inline_comments(
    w: World, git_server: GitServer, tmp_path: Path
) -> None:
    """Files come from the git server's diff; a review's inline comments must be on diff
    lines; nobody approves or requests changes on their own pull request; a comment or
    changes requested needs a body; reviews are listed."""
    _branch_with_a_fix(git_server, tmp_path)
    token = w.token({"pull_requests": "write"})
    body = {"title": "Fix", "head": "fix", "base": "main"}
    number = w.call("POST", f"/repos/{FULL_NAME}/pulls", token=token, json=body).json()["number"]
    path = f"/repos/{FULL_NAME}/pulls/{number}"
    files = w.call("GET", f"{path}/files", token=token).json()
    _valid(w, "pulls/list-files", 200, files)
    assert {f["filename"]: f["status"] for f in files} == {
        "NEW.md": "added",
        "README.md": "modified",
    }
    readme = next(f for f in files if f["filename"] == "README.md")
    assert readme["patch"].startswith("@@ -1,3 +1,3 @@") and "+Hello World" in readme["patch"]
    assert (readme["additions"], readme["deletions"]) == (1, 1)

    def review(**fields: Any) -> Any:
        return w.call("POST", f"{path}/reviews", token=token, json=fields)

    inline = [
        {"path": "README.md", "line": 1, "side": "RIGHT", "body": "Fixed."},
        {"path": "README.md", "line": 1, "side": "LEFT", "body": "Was wrong."},
        {"path": "NEW.md", "line": 1, "body": "New."},
    ]
    off = {"path": "README.md", "line": 9, "body": "Not in the diff."}
    assert review(event="COMMENT", body="x", comments=[*inline, off]).status_code == 422
    refused = review(event="APPROVE", body="x")
    assert refused.status_code == 422 and "your own" in refused.json()["errors"][0]
    assert review(event="COMMENT").status_code == 422  # No body.
    made = review(event="COMMENT", body="Looks right.", comments=inline)
    assert made.status_code == 200, made.text
    _valid(w, "pulls/create-review", 200, made.json())
    assert made.json()["state"] == "COMMENTED"
    (recorded,) = w.github.reviews(FULL_NAME, number)
    assert [(c.path, c.line, c.side) for c in recorded.comments] == [
        ("README.md", 1, "RIGHT"),
        ("README.md", 1, "LEFT"),
        ("NEW.md", 1, "RIGHT"),
    ]
    listed = w.call("GET", f"{path}/reviews", token=token).json()
    _valid(w, "pulls/list-reviews", 200, listed)
    assert [r["id"] for r in listed] == [recorded.id]
    assert w.call("GET", f"{path}/files", token=w.token({"issues": "write"})).status_code == 403
    with w.github.state.lock:  # Someone else's pull request: the App may approve it.
        w.github.state.pulls[(FULL_NAME, number)].author = "octocat"
    assert review(event="APPROVE").json()["state"] == "APPROVED"


def test_a_multi_line_review_comment_must_lie_within_one_hunk(
    w: World, git_server: GitServer, tmp_path: Path
) -> None:
    """``start_line``/``start_side``: every line of the range on the diff, on one side,
    before ``line``; the comment keeps its range when listed."""
    _branch_with_a_fix(git_server, tmp_path)
    token = w.token({"pull_requests": "write"})
    body = {"title": "Fix", "head": "fix", "base": "main"}
    number = w.call("POST", f"/repos/{FULL_NAME}/pulls", token=token, json=body).json()["number"]
    path = f"/repos/{FULL_NAME}/pulls/{number}"

    def review(**comment: Any) -> Any:
        comment = {"path": "README.md", "body": "These lines.", **comment}
        return w.call(
            "POST", f"{path}/reviews", token=token,
            json={"event": "COMMENT", "body": "x", "comments": [comment]},
        )  # fmt: skip

    assert review(start_line=2, line=9).status_code == 422  # Past the hunk.
    assert review(start_line=3, line=3).status_code == 422  # Not before line.
    assert review(start_line=1, start_side="LEFT", line=3).status_code == 422  # Two sides.
    made = review(start_line=1, start_side="RIGHT", line=3, side="RIGHT")
    assert made.status_code == 200, made.text
    listed = w.call("GET", f"{path}/reviews/{made.json()['id']}/comments", token=token).json()
    _valid(w, "pulls/list-comments-for-review", 200, listed)
    assert [(c["start_line"], c["line"], c["start_side"]) for c in listed] == [(1, 3, "RIGHT")]


def test_a_check_suites_check_runs_are_listed(w: World) -> None:
    w.github.add_suite_runs(FULL_NAME, 5, [(51, "lint", "success"), (52, "tests", "failure")])
    token = w.token({"checks": "read"})
    found = w.call("GET", f"/repos/{FULL_NAME}/check-suites/5/check-runs", token=token)
    assert found.status_code == 200, found.text
    _valid(w, "checks/list-for-suite", 200, found.json())
    runs = found.json()["check_runs"]
    assert [(r["id"], r["name"], r["conclusion"]) for r in runs] == [
        (51, "lint", "success"),
        (52, "tests", "failure"),
    ]
    unknown = w.call("GET", f"/repos/{FULL_NAME}/check-suites/6/check-runs", token=token)
    assert unknown.status_code == 404
