"""The git stand-in: real ``git clone``/``git push`` over smart HTTP with installation
tokens, allowed and refused as GitHub allows and refuses them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from e2e.github import GitHubStandIn
from e2e.github.gitserver import GitServer
from e2e.github.testing import FULL_NAME, OWNER, World, world


@pytest.fixture
def w(github: GitHubStandIn, git_server: GitServer) -> World:
    git_server.create_repo(FULL_NAME, {"src/widget.py": "WOBBLE = True\n"})
    git_server.create_repo(f"{OWNER}/secret-plans")
    return world(github)


def git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_AUTHOR_NAME": "Agent",
           "GIT_AUTHOR_EMAIL": "agent@example.com", "GIT_COMMITTER_NAME": "Agent",
           "GIT_COMMITTER_EMAIL": "agent@example.com"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def _commit(clone: Path) -> str:
    (clone / "src" / "widget.py").write_text("WOBBLE = False\n")
    assert git("commit", "-qam", "Stop the wobble", cwd=clone).returncode == 0
    return git("rev-parse", "HEAD", cwd=clone).stdout.strip()


def test_clone_with_a_read_token_sees_the_commits(w: World, git_server: GitServer,
                                                  tmp_path: Path) -> None:  # fmt: skip
    token = w.token({"contents": "read"})
    cloned = git("clone", "-q", git_server.clone_url(FULL_NAME, token), str(tmp_path / "c"))
    assert cloned.returncode == 0, cloned.stderr
    assert (tmp_path / "c" / "src" / "widget.py").read_text() == "WOBBLE = True\n"
    log = git("log", "--format=%s", cwd=tmp_path / "c").stdout.split("\n")
    assert log[:3] == ["Change 3", "Change 2", "Change 1"]


def test_push_needs_contents_write(w: World, git_server: GitServer, tmp_path: Path) -> None:
    clone = tmp_path / "c"
    read = w.token({"contents": "read"})
    assert git("clone", "-q", git_server.clone_url(FULL_NAME, read), str(clone)).returncode == 0
    sha = _commit(clone)
    refused = git("push", "origin", "HEAD:refs/heads/agentchain/c1", cwd=clone)
    assert refused.returncode != 0 and "403" in refused.stderr
    assert git_server.resolve(FULL_NAME, "agentchain/c1") is None
    write = w.token({"contents": "write"})
    pushed = git("push", git_server.clone_url(FULL_NAME, write), "HEAD:refs/heads/agentchain/c1",
                 cwd=clone)  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr
    assert git_server.resolve(FULL_NAME, "agentchain/c1") == sha
    (push,) = [p for p in git_server.pushes if p.status == 200]
    assert [(u.new, u.ref) for u in push.updates] == [(sha, "refs/heads/agentchain/c1")]
    assert push.identity == f"installation:{w.installation.id}"


@pytest.mark.parametrize("case", ["no-token", "bad-token", "revoked", "expired", "other-repo",
                                  "no-contents"])  # fmt: skip
def test_clone_refused_as_github_refuses(w: World, git_server: GitServer, tmp_path: Path,
                                         case: str) -> None:  # fmt: skip
    token = w.token({"contents": "read"})
    repo, expected = FULL_NAME, "Authentication failed"
    if case == "no-token":
        token, expected = "", "could not read Username"
    elif case == "bad-token":
        token = "ghs_" + "0" * 36
    elif case == "revoked":
        w.call("DELETE", "/installation/token", token=token)
    elif case == "expired":
        w.github.expire_token(token)
    elif case == "other-repo":
        repo, expected = f"{OWNER}/secret-plans", "not found"
    else:
        token, expected = w.token({"issues": "write"}), "403"
    cloned = git("clone", "-q", git_server.clone_url(repo, token or None), str(tmp_path / "c"))
    assert cloned.returncode != 0
    assert expected in cloned.stderr, cloned.stderr


def test_pull_request_head_comes_from_the_git_server(w: World, git_server: GitServer,
                                                     tmp_path: Path) -> None:  # fmt: skip
    token = w.token({"contents": "write", "pull_requests": "write"})
    clone = tmp_path / "c"
    assert git("clone", "-q", git_server.clone_url(FULL_NAME, token), str(clone)).returncode == 0
    sha = _commit(clone)
    assert git("push", "-q", "origin", "HEAD:refs/heads/fix", cwd=clone).returncode == 0
    pulls = f"/repos/{FULL_NAME}/pulls"
    made = w.call("POST", pulls, token=token, json={"title": "Fix", "head": "fix", "base": "main"})
    assert made.status_code == 201 and made.json()["head"]["sha"] == sha
    missing = w.call(
        "POST", pulls, token=token, json={"title": "Nope", "head": "no-such-branch", "base": "main"}
    )
    assert missing.status_code == 422
    assert [p.head for p in w.github.pulls(FULL_NAME)] == ["fix"]
    assert made.json()["base"]["repo"]["clone_url"] == git_server.clone_url(FULL_NAME)
