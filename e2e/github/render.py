"""JSON bodies for the stand-in's objects, shaped by the description's own examples.

Each body starts from the example GitHub publishes for that schema (so every field a
client may read is there, with a realistic value), has the example's host and
``octocat/Hello-World`` rewritten to the stand-in's base URL and repository, and then
gets the fields that carry state (ids, bodies, users, timestamps) from the model. The
server validates every body against the response schema before sending it, so a field
this module gets wrong fails the test that caused it rather than confusing a client.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import Any

from e2e.github import model
from e2e.github.spec import Spec

_EXAMPLE_API = "https://api.github.com"
_EXAMPLE_HTML = "https://github.com"


class Renderer:
    def __init__(self, spec: Spec, base_url: str) -> None:
        self.spec = spec
        self.api = base_url.rstrip("/")
        self.html = self.api  # one origin serves both, as far as a client can tell
        self.git = self.api  # where clone_url points; the git stand-in sets its own origin

    def _example(self, name: str, repo: str | None = None) -> dict[str, Any]:
        value = self.spec.document["components"]["examples"][name]["value"]
        text = json.dumps(value)
        if repo is not None:
            for sample in ("octocat/Hello-World", "github/hello-world"):
                text = text.replace(sample, repo)
        text = text.replace(_EXAMPLE_API, self.api).replace(_EXAMPLE_HTML, self.html)
        result: dict[str, Any] = json.loads(text)
        return result

    def user(self, login: str, kind: str = "User", user_id: int = 1) -> dict[str, Any]:
        base = f"{self.api}/users/{login}"
        return {
            "login": login, "id": user_id, "node_id": f"U_{user_id}",
            "avatar_url": f"{self.html}/avatars/{login}", "gravatar_id": "",
            "url": base, "html_url": f"{self.html}/{login}",
            "followers_url": f"{base}/followers",
            "following_url": f"{base}/following{{/other_user}}",
            "gists_url": f"{base}/gists{{/gist_id}}",
            "starred_url": f"{base}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{base}/subscriptions",
            "organizations_url": f"{base}/orgs", "repos_url": f"{base}/repos",
            "events_url": f"{base}/events{{/privacy}}",
            "received_events_url": f"{base}/received_events",
            "type": kind, "site_admin": False,
        }  # fmt: skip

    def _stamp(self, target: dict[str, Any], **fields: Any) -> dict[str, Any]:
        for key, value in fields.items():
            target[key] = model.iso(value) if isinstance(value, datetime) else value
        return target

    def collaborator_permission(self, repo: model.Repo, login: str) -> dict[str, Any]:
        permission, role = repo.permission_of(login)
        user = self.user(login)
        flags = ("pull", "triage", "push", "maintain", "admin")
        held = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}[role]
        user["permissions"] = {flag: i < held for i, flag in enumerate(flags)}
        user["role_name"] = role
        return {"permission": permission, "role_name": role, "user": user}

    def repository(self, repo: model.Repo, full: bool = True) -> dict[str, Any]:
        body = self._example("full-repository", repo.full_name)
        if not full:
            for key in ("organization", "parent", "source", "template_repository"):
                body.pop(key, None)
        body.setdefault("has_discussions", False)
        body["owner"] = self.user(repo.owner, "Organization")
        return self._stamp(
            body, id=repo.id, node_id=f"R_{repo.id}", name=repo.name,
            full_name=repo.full_name, private=repo.private,
            visibility="private" if repo.private else "public",
            default_branch=repo.default_branch,
            clone_url=f"{self.git}/{repo.full_name}.git",
            git_url=f"git://127.0.0.1/{repo.full_name}.git",
            ssh_url=f"git@127.0.0.1:{repo.full_name}.git",
            svn_url=f"{self.html}/{repo.full_name}", mirror_url=None, homepage=None,
            description=None, fork=False, archived=False, disabled=False,
            created_at=repo.created_at, updated_at=repo.created_at, pushed_at=repo.created_at,
        )  # fmt: skip

    def comment(self, comment: model.Comment) -> dict[str, Any]:
        body = self._example("issue-comment", comment.repo)
        repo_api = f"{self.api}/repos/{comment.repo}"
        body.pop("pin", None)
        return self._stamp(
            body, id=comment.id, node_id=f"IC_{comment.id}",
            url=f"{repo_api}/issues/comments/{comment.id}",
            html_url=f"{self.html}/{comment.repo}/issues/{comment.issue_number}"
            f"#issuecomment-{comment.id}",
            issue_url=f"{repo_api}/issues/{comment.issue_number}",
            body=comment.body, user=self.user(comment.author, comment.author_type),
            author_association="NONE" if comment.app_id else "OWNER",
            created_at=comment.created_at, updated_at=comment.updated_at,
        )  # fmt: skip

    def issue(self, issue: model.Issue, comments: int) -> dict[str, Any]:
        body = self._example("issue", issue.repo)
        api = f"{self.api}/repos/{issue.repo}/issues/{issue.number}"
        for key in ("pinned_comment", "closed_by", "milestone", "assignee"):
            body[key] = None
        body.pop("pull_request", None)
        if issue.is_pull_request:
            pulls = f"{self.api}/repos/{issue.repo}/pulls/{issue.number}"
            html = f"{self.html}/{issue.repo}/pull/{issue.number}"
            body["pull_request"] = {
                "url": pulls,
                "html_url": html,
                "diff_url": f"{html}.diff",
                "patch_url": f"{html}.patch",
                "merged_at": None,
            }
        return self._stamp(
            body, id=issue.id, node_id=f"I_{issue.id}", number=issue.number, url=api,
            title=issue.title, body=issue.body, state="open", state_reason=None,
            user=self.user(issue.author), labels=[], assignees=[], comments=comments,
            comments_url=f"{api}/comments", events_url=f"{api}/events",
            labels_url=f"{api}/labels{{/name}}",
            html_url=f"{self.html}/{issue.repo}/issues/{issue.number}",
            repository_url=f"{self.api}/repos/{issue.repo}", locked=False, closed_at=None,
            active_lock_reason=None, author_association="OWNER",
            created_at=issue.created_at, updated_at=issue.created_at,
        )  # fmt: skip

    def reaction(self, reaction: model.Reaction) -> dict[str, Any]:
        return {
            "id": reaction.id, "node_id": f"REA_{reaction.id}",
            "user": self.user(reaction.author, reaction.author_type),
            "content": reaction.content, "created_at": model.iso(reaction.created_at),
        }  # fmt: skip

    def app(self, app: model.App) -> dict[str, Any]:
        body = self._example("integration")
        return self._stamp(
            body, id=app.id, slug=app.slug, node_id=f"A_{app.id}", client_id=app.client_id,
            owner=self.user(app.owner, "Organization"), name=app.name,
            html_url=f"{self.html}/apps/{app.slug}", permissions=dict(app.permissions),
            events=list(app.events), created_at=app.created_at, updated_at=app.created_at,
        )  # fmt: skip

    def installation(self, inst: model.Installation, app: model.App) -> dict[str, Any]:
        body = self._example("base-installation")
        return self._stamp(
            body, id=inst.id, app_id=inst.app_id, app_slug=app.slug, target_id=inst.id,
            target_type="Organization", account=self.user(inst.account, "Organization"),
            repository_selection="all" if inst.repositories is None else "selected",
            access_tokens_url=f"{self.api}/app/installations/{inst.id}/access_tokens",
            repositories_url=f"{self.api}/installation/repositories",
            html_url=f"{self.html}/organizations/{inst.account}/settings/installations/{inst.id}",
            permissions=dict(inst.permissions), events=list(inst.events),
            created_at=inst.created_at, updated_at=inst.created_at,
        )  # fmt: skip

    def token(self, token: model.Token, repos: list[model.Repo]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "token": token.value, "expires_at": model.iso(token.expires_at),
            "permissions": dict(token.permissions),
            "repository_selection": "all" if token.repositories is None else "selected",
        }  # fmt: skip
        if token.repositories is not None:
            body["repositories"] = [self.repository(r, full=False) for r in repos]
        return body

    def check_run(self, run: model.CheckRun, app: model.App) -> dict[str, Any]:
        body = self._example("check-run", run.repo)
        output = {
            "title": None,
            "summary": None,
            "text": None,
            "annotations_count": 0,
            "annotations_url": f"{self.api}/repos/{run.repo}/check-runs/{run.id}/annotations",
        }
        output.update({k: run.output.get(k) for k in ("title", "summary", "text")})
        when = {
            k: model.iso(v) if v else None
            for k, v in (("started_at", run.started_at), ("completed_at", run.completed_at))
        }
        return self._stamp(
            body, id=run.id, node_id=f"CR_{run.id}", head_sha=run.head_sha, name=run.name,
            external_id=run.external_id, details_url=run.details_url, status=run.status,
            conclusion=run.conclusion, output=output, app=self.app(app), pull_requests=[],
            url=f"{self.api}/repos/{run.repo}/check-runs/{run.id}",
            html_url=f"{self.html}/{run.repo}/runs/{run.id}", **when,
        )  # fmt: skip

    def pull(self, pull: model.PullRequest, repo: model.Repo) -> dict[str, Any]:
        body = self._example("pull-request", pull.repo)
        number, api = pull.number, f"{self.api}/repos/{pull.repo}"
        repo_body = self.repository(repo, full=False)
        body["head"].update(
            ref=pull.head,
            sha=pull.head_sha,
            label=f"{repo.owner}:{pull.head}",
            repo=copy.deepcopy(repo_body),
            user=self.user(repo.owner),
        )
        body["base"].update(
            ref=pull.base,
            label=f"{repo.owner}:{pull.base}",
            repo=repo_body,
            user=self.user(repo.owner),
        )
        return self._stamp(
            body, id=pull.id, node_id=f"PR_{pull.id}", number=number, state=pull.state,
            title=pull.title, body=pull.body, draft=pull.draft, merged=False,
            user=self.user(pull.author, pull.author_type),
            url=f"{api}/pulls/{number}", issue_url=f"{api}/issues/{number}",
            html_url=f"{self.html}/{pull.repo}/pull/{number}",
            created_at=pull.created_at, updated_at=pull.updated_at, closed_at=None,
            merged_at=None, merge_commit_sha=None, merged_by=None, comments=0,
            labels=[], assignee=None, assignees=[], milestone=None, requested_reviewers=[],
            requested_teams=[], auto_merge=None, mergeable=None, rebaseable=None,
            mergeable_state="unknown", locked=False, active_lock_reason=None,
            author_association="NONE" if pull.author_type == "Bot" else "OWNER",
        )  # fmt: skip

    def diff_entry(self, f: model.PullFile, pull: model.PullRequest) -> dict[str, object]:
        blob = f"{self.html}/{pull.repo}/blob/{pull.head_sha}/{f.filename}"
        body: dict[str, object] = {
            "sha": f.sha, "filename": f.filename, "status": f.status,
            "additions": f.additions, "deletions": f.deletions,
            "changes": f.additions + f.deletions, "blob_url": blob,
            "raw_url": f"{self.html}/{pull.repo}/raw/{pull.head_sha}/{f.filename}",
            "contents_url": f"{self.api}/repos/{pull.repo}/contents/{f.filename}"
            f"?ref={pull.head_sha}",
        }  # fmt: skip
        if f.patch is not None:
            body["patch"] = f.patch
        return body

    def review(self, review: model.Review) -> dict[str, Any]:
        body = self._example("pull-request-review", review.repo)
        pull = f"{self.api}/repos/{review.repo}/pulls/{review.number}"
        html = f"{self.html}/{review.repo}/pull/{review.number}#pullrequestreview-{review.id}"
        return self._stamp(
            body, id=review.id, node_id=f"PRR_{review.id}",
            user=self.user(review.author, review.author_type), body=review.body,
            state=review.state, html_url=html, pull_request_url=pull,
            _links={"html": {"href": html}, "pull_request": {"href": pull}},
            submitted_at=review.submitted_at, commit_id=review.commit_id,
            author_association="NONE" if review.app_id else "OWNER",
        )  # fmt: skip

    def review_comment(self, review: model.Review, comment: model.ReviewComment) -> dict[str, Any]:
        items: Any = self._example("review-comment-items", review.repo)  # A list of one.
        body: dict[str, Any] = dict(items[0])
        pull = f"{self.api}/repos/{review.repo}/pulls/{review.number}"
        html = f"{self.html}/{review.repo}/pull/{review.number}#discussion_r{comment.id}"
        url = f"{self.api}/repos/{review.repo}/pulls/comments/{comment.id}"
        body.pop("in_reply_to_id", None)
        if comment.in_reply_to is not None:
            body["in_reply_to_id"] = comment.in_reply_to
        start, start_side = comment.start_line, comment.side if comment.start_line else None
        return self._stamp(
            body, id=comment.id, node_id=f"PRRC_{comment.id}", url=url,
            pull_request_review_id=review.id, path=comment.path, line=comment.line,
            original_line=comment.line, side=comment.side, body=comment.body,
            start_line=start, original_start_line=start, start_side=start_side,
            user=self.user(review.author, review.author_type), commit_id=review.commit_id,
            original_commit_id=review.commit_id, html_url=html, pull_request_url=pull,
            _links={"self": {"href": url}, "html": {"href": html}, "pull_request": {"href": pull}},
            author_association="OWNER",
        )  # fmt: skip

    def job(
        self, repo: str, run_id: int, job_id: int, name: str, conclusion: str
    ) -> dict[str, Any]:
        body = self._example("job", repo)
        url = f"{self.api}/repos/{repo}/actions/jobs/{job_id}"
        return self._stamp(
            body, id=job_id, run_id=run_id, node_id=f"CR_{job_id}", name=name,
            status="completed", conclusion=conclusion, url=url,
            run_url=f"{self.api}/repos/{repo}/actions/runs/{run_id}",
            check_run_url=f"{self.api}/repos/{repo}/check-runs/{job_id}",
            created_at=model.now(),  # Required, and missing from GitHub's example.
        )  # fmt: skip

    def rate_limit(self, remaining: int, limit: int, reset: int) -> dict[str, Any]:
        body = self._example("rate-limit-overview")
        core = {"limit": limit, "remaining": remaining, "reset": reset, "used": limit - remaining}
        body["rate"] = dict(core)
        body["resources"]["core"] = dict(core)
        return body
