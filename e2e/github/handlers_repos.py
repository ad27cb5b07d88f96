"""Repository endpoints: the repository, issue comments and their reactions, check runs
and pull requests, each with the permission GitHub asks an installation token for."""

from __future__ import annotations

import hashlib
from typing import Any

from e2e.github import model
from e2e.github.calls import Answer, Call, handles


def _check_since(call: Call, items: list[model.Comment]) -> list[model.Comment]:
    since = call.arg("since")
    return [c for c in items if since is None or model.iso(c.updated_at) >= since]


@handles("repos/get")
def get_repo(call: Call) -> Answer:
    return Answer(200, call.render.repository(call.repo("metadata", "read")))


@handles("repos/get-collaborator-permission-level")
def get_collaborator_permission(call: Call) -> Answer:
    repo = call.repo("metadata", "read")
    return Answer(200, call.render.collaborator_permission(repo, call.params["username"]))


def _issue(call: Call, repo: model.Repo, number: int) -> model.Issue:
    issue = call.state.issues.get((repo.full_name, number))
    if issue is None:
        raise model.Refused(404, "Not Found")
    return issue


def _issue_repo(call: Call, number: int, level: str) -> tuple[model.Repo, model.Issue]:
    """Comments on a pull request need issues OR pull_requests permission, as on GitHub."""
    try:
        repo = call.repo("issues", level)
    except model.Refused as refused:
        repo = call.repo("pull_requests", level)  # raises if this does not help either
        issue = _issue(call, repo, number)
        if not issue.is_pull_request:
            raise refused from None
        return repo, issue
    return repo, _issue(call, repo, number)


@handles("issues/get")
def get_issue(call: Call) -> Answer:
    repo, issue = _issue_repo(call, call.int_param("issue_number"), "read")
    count = sum(
        1
        for c in call.state.comments.values()
        if c.repo == repo.full_name and c.issue_number == issue.number
    )
    return Answer(200, call.render.issue(issue, count))


@handles("issues/list-comments")
def list_comments(call: Call) -> Answer:
    repo, issue = _issue_repo(call, call.int_param("issue_number"), "read")
    comments = [
        c
        for c in call.state.comments.values()
        if c.repo == repo.full_name and c.issue_number == issue.number
    ]
    page = call.page(_check_since(call, sorted(comments, key=lambda c: c.id)))
    return Answer(200, [call.render.comment(c) for c in page])


@handles("issues/create-comment")
def create_comment(call: Call) -> Answer:
    repo, issue = _issue_repo(call, call.int_param("issue_number"), "write")
    author, kind, app_id = _author(call)
    comment = model.Comment(
        call.state.next_id(), repo.full_name, issue.number, call.body["body"], author, kind, app_id
    )
    call.state.comments[comment.id] = comment
    body = call.render.comment(comment)
    return Answer(201, body, {"Location": body["url"]})


def _author(call: Call) -> tuple[str, str, int | None]:
    app_id = call.identity.app_id
    if app_id is None:
        return "octocat", "User", None
    return call.state.apps[app_id].bot_login, "Bot", app_id


def _comment(call: Call, level: str) -> model.Comment:
    comment = call.state.comments.get(call.int_param("comment_id"))
    _issue_repo(call, comment.issue_number if comment else 0, level)
    if comment is None or comment.repo.lower() != _full_name(call):
        raise model.Refused(404, "Not Found")
    return comment


def _full_name(call: Call) -> str:
    return f"{call.params['owner']}/{call.params['repo']}".lower()


@handles("issues/get-comment")
def get_comment(call: Call) -> Answer:
    return Answer(200, call.render.comment(_comment(call, "read")))


@handles("issues/update-comment")
def update_comment(call: Call) -> Answer:
    comment = _comment(call, "write")
    comment.body = call.body["body"]
    comment.updated_at = model.now()
    return Answer(200, call.render.comment(comment))


@handles("issues/delete-comment")
def delete_comment(call: Call) -> Answer:
    comment = _comment(call, "write")
    del call.state.comments[comment.id]
    return Answer(204)


@handles("reactions/list-for-issue-comment")
def list_reactions(call: Call) -> Answer:
    comment = _comment(call, "read")
    content = call.arg("content")
    found = [
        r
        for r in call.state.reactions.values()
        if r.comment_id == comment.id and content in (None, r.content)
    ]
    return Answer(200, [call.render.reaction(r) for r in call.page(found)])


@handles("reactions/create-for-issue-comment")
def create_reaction(call: Call) -> Answer:
    comment = _comment(call, "write")
    author, kind, _ = _author(call)
    for reaction in call.state.reactions.values():
        if (reaction.comment_id, reaction.author, reaction.content) == (
            comment.id,
            author,
            call.body["content"],
        ):
            return Answer(200, call.render.reaction(reaction))
    reaction = model.Reaction(call.state.next_id(), comment.id, call.body["content"], author, kind)
    call.state.reactions[reaction.id] = reaction
    return Answer(201, call.render.reaction(reaction))


def _check_app(call: Call) -> model.App:
    if call.identity.app_id is None:
        raise model.Refused(403, "You must authenticate via a GitHub App.")
    return call.state.apps[call.identity.app_id]


def _apply_check_fields(run: model.CheckRun, body: dict[str, Any]) -> None:
    for key in ("name", "details_url", "external_id", "status", "conclusion"):
        if key in body:
            setattr(run, key, body[key])
    if "output" in body:
        run.output = dict(body["output"])
    if "conclusion" in body:
        run.status = "completed"  # GitHub: a conclusion completes the run
    if run.status != "queued" and run.started_at is None:
        run.started_at = model.now()
    if run.status == "completed":
        if run.conclusion is None:
            raise model.Refused(
                422,
                "Validation Failed",
                errors=[{"resource": "CheckRun", "field": "conclusion", "code": "missing_field"}],
            )
        run.completed_at = run.completed_at or model.now()


@handles("checks/create")
def create_check_run(call: Call) -> Answer:
    repo = call.repo("checks", "write")
    app = _check_app(call)
    run = model.CheckRun(
        call.state.next_id(), repo.full_name, app.id, call.body["name"], call.body["head_sha"]
    )
    _apply_check_fields(run, call.body)
    call.state.check_runs[run.id] = run
    return Answer(201, call.render.check_run(run, app))


def _check_run(call: Call, level: str) -> tuple[model.CheckRun, model.App]:
    repo = call.repo("checks", level)
    run = call.state.check_runs.get(call.int_param("check_run_id"))
    if run is None or run.repo != repo.full_name:
        raise model.Refused(404, "Not Found")
    return run, call.state.apps[run.app_id]


@handles("checks/get")
def get_check_run(call: Call) -> Answer:
    run, app = _check_run(call, "read")
    return Answer(200, call.render.check_run(run, app))


@handles("checks/update")
def update_check_run(call: Call) -> Answer:
    run, app = _check_run(call, "write")
    if app.id != call.identity.app_id:
        raise model.Refused(
            403,
            f"Invalid app_id `{call.identity.app_id}` - check run can only be modified "
            "by the GitHub App that created it.",
        )
    _apply_check_fields(run, call.body)
    return Answer(200, call.render.check_run(run, app))


@handles("checks/list-for-ref")
def list_check_runs(call: Call) -> Answer:
    repo = call.repo("checks", "read")
    runs = [
        r
        for r in call.state.check_runs.values()
        if r.repo == repo.full_name
        and r.head_sha == call.params["ref"]
        and call.arg("check_name") in (None, r.name)
    ]
    body = [call.render.check_run(r, call.state.apps[r.app_id]) for r in call.page(runs)]
    return Answer(200, {"total_count": len(runs), "check_runs": body})


def _head_sha(call: Call, repo: model.Repo, ref: str) -> str:
    resolver = call.state.ref_resolver
    if resolver is None:  # no git server attached: a stable made-up commit
        return hashlib.sha1(f"{repo.full_name}:{ref}".encode()).hexdigest()
    sha = resolver(repo.full_name, ref)
    if sha is None:
        raise model.Refused(
            422,
            "Validation Failed",
            errors=[{"resource": "PullRequest", "field": "head", "code": "invalid"}],
        )
    return sha


@handles("pulls/create")
def create_pull(call: Call) -> Answer:
    repo = call.repo("pull_requests", "write")
    head = call.body["head"].split(":")[-1]
    for pull in call.state.pulls.values():
        if pull.repo == repo.full_name and pull.head == head and pull.state == "open":
            raise model.Refused(
                422,
                "Validation Failed",
                errors=[
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"A pull request already exists for {repo.owner}:{head}.",
                    }
                ],
            )
    author, kind, _ = _author(call)
    issue = call.state.add_issue(
        repo.full_name,
        call.body.get("title", ""),
        call.body.get("body") or "",
        author=author,
        pull_request=True,
    )
    pull = model.PullRequest(
        call.state.next_id(),
        repo.full_name,
        issue.number,
        issue.title,
        call.body.get("body"),
        head,
        call.body["base"],
        _head_sha(call, repo, head),
        author,
        kind,
        draft=bool(call.body.get("draft", False)),
    )
    call.state.pulls[(repo.full_name, pull.number)] = pull
    body = call.render.pull(pull, repo)
    return Answer(201, body, {"Location": body["url"]})


@handles("pulls/list")
def list_pulls(call: Call) -> Answer:
    repo = call.repo("pull_requests", "read")
    state, head, base = call.arg("state", "open"), call.arg("head"), call.arg("base")
    pulls = [
        p
        for p in sorted(call.state.pulls.values(), key=lambda p: -p.number)
        if p.repo == repo.full_name
        and state in ("all", p.state)
        and (head is None or head == f"{repo.owner}:{p.head}")
        and base in (None, p.base)
    ]
    return Answer(200, [_simple(call.render.pull(p, repo)) for p in call.page(pulls)])


def _simple(full: dict[str, Any]) -> dict[str, Any]:
    # pull-request-simple: the full object without the counters only GET returns.
    for key in (
        "merged",
        "mergeable",
        "rebaseable",
        "mergeable_state",
        "merged_by",
        "comments",
        "review_comments",
        "maintainer_can_modify",
        "commits",
        "additions",
        "deletions",
        "changed_files",
    ):
        full.pop(key, None)
    return full


def _pull(call: Call, level: str) -> tuple[model.PullRequest, model.Repo]:
    repo = call.repo("pull_requests", level)
    pull = call.state.pulls.get((repo.full_name, call.int_param("pull_number")))
    if pull is None:
        raise model.Refused(404, "Not Found")
    # GitHub's head.sha follows the head branch: a push after the pull request was
    # opened moves it (what a review's commit_id and the changed files are read at).
    resolver = call.state.ref_resolver
    moved = resolver(pull.repo, pull.head) if resolver is not None else None
    if moved is not None:
        pull.head_sha = moved
    return pull, repo


@handles("pulls/get")
def get_pull(call: Call) -> Answer:
    pull, repo = _pull(call, "read")
    return Answer(200, call.render.pull(pull, repo))


@handles("pulls/update")
def update_pull(call: Call) -> Answer:
    pull, repo = _pull(call, "write")
    for key in ("title", "body", "state", "base"):
        if key in call.body:
            setattr(pull, key, call.body[key])
    pull.updated_at = model.now()
    return Answer(200, call.render.pull(pull, repo))


LOGS_PATH = "/_standin/logs/"
"""Where the stand-in serves a job's log: GitHub answers the log request with a redirect to
a short-lived URL of another host, which needs no GitHub credential."""


@handles("actions/download-job-logs-for-workflow-run")
def download_job_logs(call: Call) -> Answer:
    repo = call.repo("actions", "read")
    job_id = call.int_param("job_id")
    if (repo.full_name.lower(), job_id) not in call.state.job_logs:
        raise model.Refused(404, "Not Found")
    where = f"{call.render.api}{LOGS_PATH}{repo.full_name.lower()}/{job_id}"
    return Answer(302, None, {"Location": where})


@handles("actions/list-jobs-for-workflow-run")
def list_jobs_for_run(call: Call) -> Answer:
    repo = call.repo("actions", "read")
    run_id = call.int_param("run_id")
    jobs = call.state.run_jobs.get((repo.full_name.lower(), run_id))
    if jobs is None:
        raise model.Refused(404, "Not Found")
    body = [call.render.job(repo.full_name, run_id, *job) for job in call.page(jobs)]
    return Answer(200, {"total_count": len(jobs), "jobs": body})


ACTIONS = model.App(15368, "github-actions", "GitHub Actions", "github", b"", {}, [], "Iv1.0")
"""The App GitHub Actions' check runs belong to (its public id)."""


@handles("checks/list-for-suite")
def list_check_runs_for_suite(call: Call) -> Answer:
    repo = call.repo("checks", "read")
    found = call.state.suite_runs.get((repo.full_name.lower(), call.int_param("check_suite_id")))
    if found is None:
        raise model.Refused(404, "Not Found")
    runs = [
        model.CheckRun(
            id, repo.full_name, ACTIONS.id, name, "0" * 40, "completed", conclusion, model.now()
        )
        for id, name, conclusion in found
        if call.arg("check_name") in (None, name)
    ]
    body = [call.render.check_run(r, ACTIONS) for r in call.page(runs)]
    return Answer(200, {"total_count": len(runs), "check_runs": body})
