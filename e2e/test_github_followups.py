"""Follow-up rounds on red CI, on the real control plane with the GitHub stand-in and its
git server (every request checked against GitHub's OpenAPI description).

Aspects covered:
* a chain opens a pull request (the developer's workspace, published at the chain's end);
  the pull request's CI reports a failing ``check_run`` (``completed``, ``failure``) with
  its output and an Actions job log; the developer, which opted in
  (``spec.github.followUps.checks``), runs again: its prompt names the failed check and
  carries the check's output and the end of its job's log (read through GitHub's
  redirect to it, the log's start left out), it commits on
  the same branch in a volume of its own, and the push updates the same pull request
  (one pull request; its head branch holds both commits);
* exactly once: the same failing delivery redelivered starts nothing more; the operator
  SIGKILLed after numbering a round and before queueing it (crashpoint
  ``follow-up-round-claimed``): GitHub's redelivery starts that round, numbered 1, once;
* lineage: the round's root AgentJob is labelled with the chain it continues, and the
  round shows as a row of that chain's one comment on the issue (no comment of its own);
* the limit: with ``maxRounds: 1`` the next failing delivery starts nothing and one
  comment on the pull request says the rounds are over (a third says nothing more);
* fix on review: a review requesting changes from the repository's owner starts a round
  whose prompt has the review's inline comments (path, line, body, read from the
  stand-in's ``pulls/list-comments-for-review``); the same from a stranger (author
  association NONE, which the default sender policy refuses) starts nothing;
* budget: a round counts against the first chain's budget: with ``maxAttempts: 1`` the
  first chain's one attempt leaves the round none (Cancelled, BudgetExceeded);
* no cascade: three failing deliveries in a row leave one round running; the others end
  Cancelled (reason Superseded, cancel-in-progress of the pull request's round group), and
  one round's commit reaches the branch;
* the whole loop in one flow: the chain's pull request, a failing check with a log, a
  round that sees it and pushes its fix, a passing check on the new head (which starts
  nothing), and the reviewer, asked by a mention on the pull request, reviewing that
  head with two inline comments on changed lines (one on the round's fix) and one folded;
* a person's push (``pull_request.synchronize`` from a user) supersedes the running
  round (Cancelled, Superseded, naming who pushed) and starts none; the App's own push
  (a round's) leaves it running; what the superseded round had committed is not
  pushed: the branch stays as it was pushed;
* a reply in a review thread (``pull_request_review_comment.created`` with
  ``in_reply_to_id``) from the owner starts a round with that comment (path, line, body)
  in its prompt, and the round's answer is posted once as a reply in that thread
  (``pulls/create-reply-for-review-comment`` on the thread's first comment); the same
  from a stranger, or a new inline comment (which comes with its review's own
  delivery), starts nothing;
* a chain started on a person's pull request (``pull_request.opened``, its head a branch
  of the same repository) gets rounds too: a failing check there runs the developer on
  that branch's head, its commit is pushed to that branch (the pull request's own), and
  it shows as a row of the chain's comment on that pull request;
  a chain started on a fork's pull request gets none: the failing check starts nothing,
  and one comment there says the branch is a fork's (a second failure says nothing more);
  a round there that fails (so pushes nothing) still shows in the chain's comment;
* a chain started by a comment on a person's pull request (``issue_comment``, which
  does not say where the head is) gets rounds too: the first failing check reads the
  pull request (``pulls/get``) for its head branch, the round commits there, and a
  later failure does not ask again (the branch is recorded);
* a failing ``workflow_run`` or ``check_suite``: the round's prompt has the end of the
  log of its failed job (listed by ``actions/list-jobs-for-workflow-run``, or the suite's
  failed check run by ``checks/list-for-suite``; then its log), not of one that passed.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from agentchain.github import roundrecords
from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn, model, payloads
from e2e.github.gitserver import GitServer
from e2e.githubloop import ISSUE, REPOSITORY, Installed, app_delivery, app_operator, install
from e2e.test_workspaces import workspace_env

Obj = dict[str, Any]
# Every wait here is for a chain or a round to get somewhere: on the real node that is the
# agent's pod with its workspace clone, then the publish Job's pod, each a container start
# and a git run. Under a full CI run (load 15-25) one such chain took 49 s from the
# delivery to its pull request (5 s to the Job, 16 s to clone, 12 s the agent, 16 s to
# publish), past the 40 s this module waited: each wait gets what the suite gives a chain.
TIMEOUT = float(chaining.CHAIN_TIMEOUT_SECONDS)
FAILURE = "FAILED test_greet: expected 'Hello World', got 'Hello Wrold'"
LOG_END = "LOG: test_greet raised AssertionError in tests/test_greet.py line 3\n"
DEVELOPER = (
    'cd "$AGENT_WORKSPACE_REPO" && '
    'if grep -qE "requested changes on|in a review thread on" "$AGENT_PROMPT_FILE"; then '
    '  grep -A1 "README.md, line 1:" "$AGENT_PROMPT_FILE" > REVIEW.md && '
    "  git add REVIEW.md && "
    "  git -c user.name=Developer -c user.email=dev@example.com commit -qm 'Answer the review' && "
    "  echo 'Answered the review.'; "
    'elif grep -q "Checks failed on pull request" "$AGENT_PROMPT_FILE"; then '
    '  grep -o "FAILED test_greet[^<]*" "$AGENT_PROMPT_FILE" | head -n 1 > FIX.md && '
    '  { grep -o "LOG: [^<]*" "$AGENT_PROMPT_FILE" || true; } | head -n 1 > LOG.md && '
    "  git add FIX.md LOG.md && "
    "  git -c user.name=Developer -c user.email=dev@example.com commit -qm 'Fix the check' && "
    "  echo 'Fixed the check.'; "
    "else "
    "  sed -i s/Wrold/World/ README.md && "
    "  git -c user.name=Developer -c user.email=dev@example.com commit -qam 'Fix the typo' && "
    "  echo 'Fixed the typo.'; "
    "fi"
)


@pytest.fixture
def repo(
    github: GitHubStandIn, git_server: GitServer, tmp_path: Path, cluster_info: ClusterInfo
) -> Installed:
    installed = install(github, tmp_path)
    git_server.create_repo(REPOSITORY, {"README.md": "Hello Wrold\n"}, private=False)
    # Every test's stand-in numbers its pull requests from the same start, in one Redis:
    # forget which chain opened the pull requests of the tests before, and their rounds
    # (on GitHub a pull request's number is never given twice).
    client = redis.Redis.from_url(cluster_info.redis_url)
    try:
        for prefix in (roundrecords.PULL_CHAIN_PREFIX, roundrecords.ROUNDS_PREFIX):
            for key in client.scan_iter(match=f"{prefix}*"):
                client.delete(key)
    finally:
        client.close()
    return installed


def with_actions(github: GitHubStandIn, repo: Installed) -> None:
    """Grant the App (and its installation) Actions: read, which reading job logs needs."""
    with github.state.lock:
        github.state.apps[repo.app.app_id].permissions["actions"] = "read"
        github.state.installations[repo.installation.id].permissions["actions"] = "read"


def developer(
    max_rounds: int,
    reviews: bool = False,
    budget: Obj | None = None,
    command: str = DEVELOPER,
    events: tuple[str, ...] = ("issues.opened",),
) -> Obj:
    return chaining.ai_agent(
        "ai-developer",
        ["sh", "-c", command],
        object_name="developer",
        workspace={"publish": True, "keepFor": "0"},
        github={"followUps": {"checks": True, "reviews": reviews, "maxRounds": max_rounds}},
        budget=budget,
        triggers=[{"source": "github", "events": list(events)}],
    )


def failing_check(
    github: GitHubStandIn,
    installation: int,
    pull: model.PullRequest,
    conclusion: str = "failure",
    head_sha: str | None = None,
) -> Obj:
    """GitHub's ``check_run.completed`` example as CI on ``pull`` would send it, failed
    (or with another ``conclusion``, on ``head_sha`` when the branch moved on)."""
    payload = app_delivery("check_run", "completed", installation)
    run = payload["check_run"]
    head = head_sha or pull.head_sha
    run.update(
        id=payloads.unique_id(),
        name="tests",
        conclusion=conclusion,
        head_sha=head,
        output={"title": "1 test failed", "summary": FAILURE, "text": "assert greet() == ..."},
        app={**(run.get("app") or {}), "id": 15368, "name": "GitHub Actions"},
        pull_requests=[payloads.check_pull_item(github.url, pull, head)],
    )
    return payload


def deliver(op: operating.OperatorProcess, payload: Obj, event: str, delivery: str) -> Obj:
    body, headers = delivering.signed(op.webhook_secret, payload, event=event, delivery=delivery)
    status, answer = delivering.send(op, body, headers)
    assert status in (200, 202), answer
    return answer


def file_on(git_server: GitServer, ref: str, path: str) -> str:
    return git_server.file_at(REPOSITORY, ref, path)


def commits_on(git_server: GitServer, ref: str) -> list[str]:
    return git_server.subjects(REPOSITORY, ref)


def open_pull(
    op: operating.OperatorProcess, info: ClusterInfo, namespace: str, repo: Installed, agent: Obj
) -> model.PullRequest:
    """Apply ``agent``, start its chain with ``issues.opened`` and wait for the chain's pull
    request."""
    info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(agent))
    payload = app_delivery("issues", "opened", repo.installation.id)
    payload["issue"]["id"] = uuid.uuid4().int >> 80  # Unique: one body is one delivery.
    deliver(op, payload, "issues", f"issue-{uuid.uuid4()}")
    github = repo.github
    operating.wait_until(
        lambda: len(github.pulls(REPOSITORY)) == 1, timeout=TIMEOUT, what="the chain's pull request"
    )
    (pull,) = github.pulls(REPOSITORY)
    return pull


def fail_check(op: operating.OperatorProcess, repo: Installed, pull: model.PullRequest) -> Obj:
    """Deliver a new failing check run on ``pull``; the operator's answer."""
    failing = failing_check(repo.github, repo.installation.id, pull)
    return deliver(op, failing, "check_run", f"check-{uuid.uuid4()}")


def wait_for_commit(git_server: GitServer, pull: model.PullRequest, subject: str) -> None:
    """Wait until ``subject`` is the last commit on ``pull``'s branch."""
    operating.wait_until(
        lambda: commits_on(git_server, pull.head)[0] == subject,
        timeout=TIMEOUT,
        what=f"{subject!r} on the pull request's branch",
    )


def rounds_of(info: ClusterInfo, namespace: str) -> list[Obj]:
    out = info.kubectl(
        "get", "agentjobs", "-n", namespace, "-l", "labrats.work/continues", "-o", "json"
    )
    items: list[Obj] = json.loads(out.stdout)["items"]
    return items


def test_a_failing_check_runs_the_developer_again_on_the_same_branch(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info, github = cluster_info, repo.github
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        pull = open_pull(op, info, namespace, repo, developer(3))
        operating.wait_until(
            lambda: "Succeeded" in repo.comments(ISSUE)[0].body if repo.comments(ISSUE) else False,
            timeout=TIMEOUT,
            what="the chain's comment to say it succeeded",
        )
        failing = failing_check(github, repo.installation.id, pull)
        with_actions(github, repo)
        noise = "".join(f"step {n}: ok\n" for n in range(20_000))  # Past what is kept.
        github.add_job_log(REPOSITORY, failing["check_run"]["id"], noise + LOG_END)
        delivery = f"check-{uuid.uuid4()}"
        answer = deliver(op, failing, "check_run", delivery)
        assert [j["agent"] for j in answer["jobs"]] == ["ai-developer"], answer
        again = deliver(op, failing, "check_run", delivery)  # Redelivered.
        assert again["duplicate"] and not [j for j in again["jobs"] if j["created"]]
        wait_for_commit(git_server, pull, "Fix the check")
        operating.wait_until(
            lambda: (
                "(round 1)" in repo.comments(ISSUE)[0].body
                and "**Succeeded**" in repo.comments(ISSUE)[0].body
            ),
            timeout=TIMEOUT,
            what="the chain's comment to show the round, ended",
        )
        (round_root,) = rounds_of(info, namespace)
        round_chain = round_root["metadata"]["labels"]["labrats.work/chain-id"]
        external = f"agentchain:{namespace}/{round_chain}"

        def runs() -> list[model.CheckRun]:
            return [r for r in github.check_runs(REPOSITORY) if r.external_id == external]

        operating.wait_until(
            lambda: [r.conclusion for r in runs()] == ["success"],
            timeout=TIMEOUT,
            what="the round's Check Run to say it succeeded",
        )
        time.sleep(3)  # Past the write-back's delay: a comment of the round's own would show.
        comments_on_pull = github.comments(REPOSITORY, pull.number)

    # The round's own Check Run, once, on the head whose check failed (the chain's issue
    # has none: a chain started on an issue has no head of its own).
    (checked,) = runs()
    assert (checked.head_sha, checked.name) == (failing["check_run"]["head_sha"], "agentchain")
    assert "ai-developer (round 1)" in checked.output["summary"]
    assert commits_on(git_server, pull.head)[:2] == ["Fix the check", "Fix the typo"]
    assert file_on(git_server, pull.head, "FIX.md").strip() == FAILURE  # It saw the output,
    assert file_on(git_server, pull.head, "LOG.md").strip() == LOG_END.strip()  # and the log.
    # Read once, through GitHub's redirect: the redelivery does not ask again.
    assert len(github.requests("actions/download-job-logs-for-workflow-run", status=302)) == 1
    assert [p.number for p in github.pulls(REPOSITORY)] == [pull.number]  # The same one.
    chain_id = repo.comments(ISSUE)[0].body.split(f"chain={namespace}/", 1)[1].split(" ", 1)[0]
    assert round_root["metadata"]["labels"]["labrats.work/continues"] == chain_id
    event = round_root["spec"]["event"]
    assert (event["continues"], event["round"], event["number"]) == (chain_id, 1, pull.number)
    assert (len(repo.comments(ISSUE)), comments_on_pull) == (1, [])  # One comment: the chain's.


def test_the_round_limit_ends_the_loop_with_one_comment(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info, github = cluster_info, repo.github
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        pull = open_pull(op, info, namespace, repo, developer(1))
        operating.wait_until(
            lambda: bool(repo.comments(ISSUE)) and "**Succeeded**" in repo.comments(ISSUE)[0].body,
            timeout=TIMEOUT,
            what="the chain's comment to say it succeeded",
        )
        first = fail_check(op, repo, pull)
        assert len(first["jobs"]) == 1, first
        over = fail_check(op, repo, pull)
        assert over["jobs"] == [], over
        operating.wait_until(
            lambda: len(github.comments(REPOSITORY, pull.number)) == 1,
            timeout=TIMEOUT,
            what="the limit's comment on the pull request",
        )
        later = fail_check(op, repo, pull)
        assert later["jobs"] == [], later
        wait_for_commit(git_server, pull, "Fix the check")

    (said,) = github.comments(REPOSITORY, pull.number)
    assert said.body.startswith("<!-- agentchain:follow-up-limit=")
    assert "`ai-developer` has had its 1 follow-up round(s)" in said.body
    assert len(rounds_of(info, namespace)) == 1


def test_three_rapid_failures_leave_one_round(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info = cluster_info
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        pull = open_pull(op, info, namespace, repo, developer(5))
        for _ in range(3):
            answer = fail_check(op, repo, pull)
            assert len(answer["jobs"]) == 1, answer

        def ended() -> list[tuple[int, str, str]]:
            found = [
                (
                    r["spec"]["event"]["round"],
                    (r.get("status") or {}).get("phase", ""),
                    (r.get("status") or {}).get("reason", ""),
                )
                for r in rounds_of(info, namespace)
            ]
            done = all(p in ("Succeeded", "Cancelled", "Failed") for _, p, _ in found)
            return sorted(found) if len(found) == 3 and done else []

        operating.wait_until(ended, timeout=TIMEOUT, what="the three rounds to end")
        phases = ended()
        wait_for_commit(git_server, pull, "Fix the check")

    assert [p for _, p, _ in phases].count("Succeeded") == 1, phases
    assert phases[-1][1] == "Succeeded", phases  # The latest failure's round is the one.
    assert all(reason == "Superseded" for _, p, reason in phases if p == "Cancelled"), phases
    assert commits_on(git_server, pull.head)[:2] == ["Fix the check", "Fix the typo"]


def review_delivery(
    installation: int, pull: model.PullRequest, review: model.Review, login: str, association: str
) -> Obj:
    """GitHub's ``pull_request_review.submitted`` example for ``review`` of ``pull``."""
    payload = app_delivery("pull_request_review", "submitted", installation)
    payload["review"].update(
        id=review.id,
        state="changes_requested",
        body=review.body,
        commit_id=review.commit_id,
        author_association=association,
        user={**payload["review"]["user"], "login": login},
    )
    payload["pull_request"].update(number=pull.number, author_association="NONE")
    payload["sender"] = {**payload["sender"], "login": login}
    return payload


def test_changes_requested_by_an_allowed_reviewer_start_a_round_a_strangers_do_not(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info, github = cluster_info, repo.github
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        agent = developer(3, reviews=True)
        pull = open_pull(op, info, namespace, repo, agent)
        comments = [("README.md", 1, "Say hello to the world, politely.")]
        stranger = github.add_review(REPOSITORY, pull.number, "Go away.", comments, author="eve")
        payload = review_delivery(repo.installation.id, pull, stranger, "eve", "NONE")
        refused = deliver(op, payload, "pull_request_review", f"review-{uuid.uuid4()}")
        assert refused["jobs"] == [], refused
        owner = REPOSITORY.split("/")[0]
        review = github.add_review(REPOSITORY, pull.number, "Nearly.", comments, author=owner)
        payload = review_delivery(repo.installation.id, pull, review, owner, "OWNER")
        answer = deliver(op, payload, "pull_request_review", f"review-{uuid.uuid4()}")
        assert [j["agent"] for j in answer["jobs"]] == ["ai-developer"], answer
        wait_for_commit(git_server, pull, "Answer the review")

    assert file_on(git_server, pull.head, "REVIEW.md").splitlines() == [
        "- README.md, line 1:",
        "Say hello to the world, politely.",
    ]
    (round_root,) = rounds_of(info, namespace)
    assert round_root["spec"]["event"]["title"] == (
        f"Changes requested on pull request #{pull.number} by @{owner}"
    )
    assert len(github.requests("pulls/list-comments-for-review", status=200)) == 1


def test_a_round_counts_against_the_first_chains_budget(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info = cluster_info
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        agent = developer(3, budget={"maxAttempts": 1})
        pull = open_pull(op, info, namespace, repo, agent)
        answer = fail_check(op, repo, pull)
        assert len(answer["jobs"]) == 1, answer

        def ended() -> tuple[str, str] | None:
            found = rounds_of(info, namespace)
            status = (found[0].get("status") or {}) if found else {}
            phase = status.get("phase", "")
            done = phase in ("Succeeded", "Failed", "Cancelled")
            return (phase, status.get("reason", "")) if done else None

        operating.wait_until(ended, timeout=TIMEOUT, what="the round to end")
        outcome = ended()

    assert outcome == ("Cancelled", "BudgetExceeded"), outcome
    assert commits_on(git_server, pull.head)[0] == "Fix the typo"  # The round never ran.


def test_a_round_numbered_by_a_killed_webhook_starts_once_on_redelivery(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info, github = cluster_info, repo.github
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        pull = open_pull(op, info, namespace, repo, developer(3))
        failing = failing_check(github, repo.installation.id, pull)
        delivery = f"killed-{uuid.uuid4()}"

        def send_and_die() -> None:
            body, headers = delivering.signed(
                op.webhook_secret, failing, event="check_run", delivery=delivery
            )
            with contextlib.suppress(OSError):  # The operator dies before it answers.
                delivering.send(op, body, headers)

        assert op.crash_at("follow-up-round-claimed", send_and_die, timeout=TIMEOUT) != 0
        assert rounds_of(info, namespace) == []  # Numbered, never queued.
        op.start()
        answer = deliver(op, failing, "check_run", delivery)  # GitHub's redelivery.
        assert [j["created"] for j in answer["jobs"]] == [True], answer
        assert deliver(op, failing, "check_run", delivery)["duplicate"]
        wait_for_commit(git_server, pull, "Fix the check")
        (round_root,) = rounds_of(info, namespace)

    assert round_root["spec"]["event"]["round"] == 1  # The number the killed one took.


FLOW_REVIEW = {
    "verdict": "approve",
    "body": "Green now.",
    "comments": [
        {"path": "README.md", "line": 1, "side": "RIGHT", "body": "Right fix."},
        {"path": "FIX.md", "line": 1, "body": "The fix of the round."},
        {"path": "README.md", "line": 40, "body": "Off the diff."},
    ],
}
REVIEWER = (
    f"echo 'Reviewed.'; printf '```agentchain-review\\n%s\\n```\\n' '{json.dumps(FLOW_REVIEW)}'"
)


def mention_on(repo: Installed, pull: model.PullRequest, login: str, text: str) -> Obj:
    """``issue_comment.created`` for ``login``'s comment ``text`` on ``pull`` (GitHub
    delivers a pull request's conversation comments as an issue's, with ``pull_request``)."""
    comment = repo.github.add_comment(REPOSITORY, pull.number, text, author=login)
    person = payloads.person(login)
    issue = {
        "number": pull.number,
        "title": "Fix the typo",
        "user": payloads.person(f"{repo.app.slug}[bot]", "Bot"),
        "pull_request": {"url": f"{repo.github.url}/repos/{REPOSITORY}/pulls/{pull.number}"},
    }
    said = {"id": comment.id, "body": text, "author_association": "OWNER", "user": person}
    return payloads.from_app(
        "created", repo.installation.id, REPOSITORY, person, issue=issue, comment=said
    )


def test_the_loop_from_pull_request_to_green_check_to_review(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    """The whole loop in one flow: the chain opens the pull request, its check fails with a
    log, a round sees the failure and pushes a fix to the same branch, the check passes on
    the new head (which starts nothing), and the reviewer, asked on the pull request,
    reviews it with inline comments on the changed lines and one folded."""
    info, github = cluster_info, repo.github
    reviewer = chaining.ai_agent(
        "ai-reviewer",
        ["sh", "-c", REVIEWER],
        object_name="reviewer",
        github={"review": True},
        triggers=[
            {"source": "github", "events": ["issue_comment.created"], "filters": {"mention": True}}
        ],
    )
    env = {**workspace_env(git_server), "AGENTCHAIN_GITHUB_APP_SLUG": repo.app.slug}
    with app_operator(operator, info, namespace, repo, env) as op:
        info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(reviewer))
        pull = open_pull(op, info, namespace, repo, developer(3))
        with_actions(github, repo)
        failing = failing_check(github, repo.installation.id, pull)
        github.add_job_log(REPOSITORY, failing["check_run"]["id"], LOG_END)
        answer = deliver(op, failing, "check_run", f"check-{uuid.uuid4()}")
        assert [j["agent"] for j in answer["jobs"]] == ["ai-developer"], answer
        wait_for_commit(git_server, pull, "Fix the check")
        head = git_server.resolve(REPOSITORY, pull.head)
        passing = failing_check(github, repo.installation.id, pull, "success", head)
        green = deliver(op, passing, "check_run", f"check-{uuid.uuid4()}")
        assert green["jobs"] == [], green  # A passing check starts no round.
        owner = REPOSITORY.split("/")[0]
        asked = mention_on(repo, pull, owner, f"@{repo.app.slug} please review")
        review_answer = deliver(op, asked, "issue_comment", f"comment-{uuid.uuid4()}")
        assert [j["agent"] for j in review_answer["jobs"]] == ["ai-reviewer"], review_answer
        operating.wait_until(
            lambda: bool(github.reviews(REPOSITORY, pull.number)),
            timeout=TIMEOUT,
            what="the reviewer's review",
        )
        (review,) = github.reviews(REPOSITORY, pull.number)

    assert file_on(git_server, pull.head, "LOG.md").strip() == LOG_END.strip()  # It saw the log.
    assert commits_on(git_server, pull.head)[:2] == ["Fix the check", "Fix the typo"]
    assert [p.number for p in github.pulls(REPOSITORY)] == [pull.number]
    assert len(rounds_of(info, namespace)) == 1
    assert review.commit_id == head  # The green head, the round's fix on it.
    assert [(c.path, c.line, c.body) for c in review.comments] == [
        ("README.md", 1, "```text\nRight fix.\n```"),
        ("FIX.md", 1, "```text\nThe fix of the round.\n```"),
    ]
    assert "README.md, line 40 (right side):\n\n```text\nOff the diff.\n```" in review.body


def pushed(repo: Installed, pull: model.PullRequest, login: str, kind: str) -> Obj:
    """``pull_request.synchronize``: ``login`` pushed to ``pull``'s branch."""
    moved = payloads.app_pull(pull, repo.app.slug, head_sha=uuid.uuid4().hex + "00000000")
    return payloads.from_app(
        "synchronize", repo.installation.id, REPOSITORY, payloads.person(login, kind),
        number=pull.number, pull_request={**moved, "base": {"ref": pull.base}},
    )  # fmt: skip


def test_a_persons_push_supersedes_the_running_round_the_apps_does_not(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    """A round works on the branch's head as it started; a person pushing meanwhile makes
    that work stale, so the round is superseded through its pull request's group and
    starts no new round (nothing failed on the new head yet).  The round's own push comes
    from the App and supersedes nothing."""
    info = cluster_info
    # The round commits part of a fix, then works on for as long as the test waits for its
    # end: under load it is still running when the pushes come.
    slow = DEVELOPER.replace(
        'elif grep -q "Checks failed',
        'elif grep -q "Checks failed" "$AGENT_PROMPT_FILE" && echo half > HALF.md && '
        "git add HALF.md && git -c user.name=Developer -c user.email=dev@example.com "
        f"commit -qm 'Half a fix' && sleep {TIMEOUT:.0f}; then :; "
        'elif grep -q "Checks failed',
    )
    env = {**workspace_env(git_server), "AGENTCHAIN_GITHUB_APP_SLUG": repo.app.slug}
    with app_operator(operator, info, namespace, repo, env) as op:
        pull = open_pull(op, info, namespace, repo, developer(3, command=slow))
        assert len(fail_check(op, repo, pull)["jobs"]) == 1

        def phase() -> tuple[str, str, str]:
            (found,) = rounds_of(info, namespace) or [{}]
            status = found.get("status") or {}
            return status.get("phase", ""), status.get("reason", ""), status.get("message", "")

        operating.wait_until(
            lambda: phase()[0] == "Running", timeout=TIMEOUT, what="the round to run"
        )
        own = deliver(
            op,
            pushed(repo, pull, f"{repo.app.slug}[bot]", "Bot"),
            "pull_request",
            f"push-{uuid.uuid4()}",
        )
        time.sleep(2)  # Room for a stop, which must not come.
        assert phase()[0] == "Running", phase()
        person = deliver(
            op, pushed(repo, pull, "octocat", "User"), "pull_request", f"push-{uuid.uuid4()}"
        )
        operating.wait_until(
            lambda: phase()[0] == "Cancelled", timeout=TIMEOUT, what="the round to be superseded"
        )
        ended = phase()

    assert (own["jobs"], person["jobs"]) == ([], [])  # Neither push starts a round.
    assert ended[1] == "Superseded", ended
    assert "@octocat pushed to pull request" in ended[2], ended
    assert len(rounds_of(info, namespace)) == 1
    # The superseded round's commit is not pushed: the branch stays as pushed, the round's
    # work (on a head that is gone) is left in its volume for the workspace's keepFor.
    time.sleep(2)
    assert commits_on(git_server, pull.head)[0] == "Fix the typo"
    assert "Half a fix" not in commits_on(git_server, pull.head)


def thread_comment(
    repo: Installed, pull: model.PullRequest, login: str, association: str, reply_to: int | None
) -> Obj:
    """``pull_request_review_comment.created``: ``login``'s inline comment on README.md
    line 1 of ``pull``, a reply to comment ``reply_to`` when given."""
    person = payloads.person(login)
    comment: Obj = {
        "id": payloads.unique_id(),
        "path": "README.md",
        "line": 1,
        "side": "RIGHT",
        "body": "Say hello to the world, politely.",
        "commit_id": pull.head_sha,
        "author_association": association,
        "user": person,
    }
    if reply_to is not None:
        comment["in_reply_to_id"] = reply_to
    return payloads.from_app(
        "created", repo.installation.id, REPOSITORY, person,
        comment=comment, pull_request=payloads.app_pull(pull, repo.app.slug),
    )  # fmt: skip


def replies_to(repo: Installed, pull: model.PullRequest, top: int) -> list[model.ReviewComment]:
    """The App's replies in the thread of review comment ``top``."""
    return [
        c
        for r in repo.github.reviews(REPOSITORY, pull.number)
        if r.author == f"{repo.app.slug}[bot]"
        for c in r.comments
        if c.in_reply_to == top
    ]


def test_a_reply_in_a_review_thread_starts_a_round_with_the_comment(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info = cluster_info
    owner = REPOSITORY.split("/")[0]
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        pull = open_pull(op, info, namespace, repo, developer(3, reviews=True))
        event = "pull_request_review_comment"
        stranger = thread_comment(repo, pull, "eve", "NONE", reply_to=41)
        assert deliver(op, stranger, event, f"c-{uuid.uuid4()}")["jobs"] == []
        fresh = thread_comment(repo, pull, owner, "OWNER", reply_to=None)
        assert deliver(op, fresh, event, f"c-{uuid.uuid4()}")["jobs"] == []
        thread = repo.github.add_review(
            REPOSITORY, pull.number, "", [("README.md", 1, "Is this right?")], author=owner,
            state="COMMENTED",
        )  # fmt: skip
        top = thread.comments[0].id
        reply = thread_comment(repo, pull, owner, "OWNER", reply_to=top)
        answer = deliver(op, reply, event, f"c-{uuid.uuid4()}")
        assert [j["agent"] for j in answer["jobs"]] == ["ai-developer"], answer
        wait_for_commit(git_server, pull, "Answer the review")
        operating.wait_until(
            lambda: replies_to(repo, pull, top), timeout=TIMEOUT, what="the round's reply"
        )
        time.sleep(1)  # Room for a second reply, which must not come.
        (answered,) = replies_to(repo, pull, top)

    assert file_on(git_server, pull.head, "REVIEW.md").splitlines() == [
        "- README.md, line 1:",
        "Say hello to the world, politely.",
    ]
    (round_root,) = rounds_of(info, namespace)
    assert round_root["spec"]["event"]["title"] == (
        f"Review comment on pull request #{pull.number} by @{owner}"
    )
    assert round_root["spec"]["event"]["replyTo"] == top
    marker = f"<!-- agentchain:reply={namespace}/{round_root['metadata']['name']} -->"
    assert answered.body.startswith(marker)
    assert "answered in follow-up round 1" in answered.body
    assert "```text\nAnswered the review.\n```" in answered.body
    assert len(repo.github.requests("pulls/create-reply-for-review-comment", status=201)) == 1


def person_pull(
    repo: Installed, git_server: GitServer, head: str, author: str
) -> model.PullRequest:
    """``author``'s pull request from branch ``head`` (made at main's commit when it is in
    the repository) into main, as if opened on github.com."""
    main = git_server.resolve(REPOSITORY, "main")
    assert main is not None
    branch = head.split(":")[-1]
    if ":" not in head:
        bare = git_server.bare_path(REPOSITORY)
        subprocess.run(
            ["git", "--git-dir", str(bare), "update-ref", f"refs/heads/{branch}", main], check=True
        )
    state = repo.github.state
    issue = state.add_issue(REPOSITORY, "Greet politely", author=author, pull_request=True)
    with state.lock:
        pull = model.PullRequest(
            state.next_id(), REPOSITORY, issue.number, issue.title, "", branch, "main", main,
            author, "User",
        )  # fmt: skip
        state.pulls[(REPOSITORY, pull.number)] = pull
    return pull


def opened(repo: Installed, pull: model.PullRequest, head_repository: str) -> Obj:
    """``pull_request.opened`` for ``pull``, its head in ``head_repository``."""
    payload = app_delivery("pull_request", "opened", repo.installation.id)
    payload["number"] = pull.number
    payload["pull_request"].update(id=pull.id, number=pull.number)
    payload["pull_request"]["head"].update(ref=pull.head, sha=pull.head_sha)
    payload["pull_request"]["head"]["repo"]["full_name"] = head_repository
    return payload


def fork_comments(repo: Installed, pull: model.PullRequest) -> list[model.Comment]:
    """The comments on ``pull`` saying its rounds cannot push to a fork (the chain's own
    progress comment is there too)."""
    marker = "<!-- agentchain:follow-up-fork="
    return [c for c in repo.github.comments(REPOSITORY, pull.number) if c.body.startswith(marker)]


def test_a_chain_started_on_a_persons_pull_request_gets_rounds_on_its_branch_not_a_forks(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info, github = cluster_info, repo.github
    owner = REPOSITORY.split("/")[0]
    # The first run fails (so it publishes nothing and opens no pull request of its own:
    # the round is then the only thing on the person's pull request); the round fixes.
    first_fails = 'grep -q "Checks failed" "$AGENT_PROMPT_FILE" || exit 3; ' + DEVELOPER
    agent = developer(3, command=first_fails, events=("pull_request.opened",))
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(agent))
        own = person_pull(repo, git_server, "greeting", owner)
        started = deliver(op, opened(repo, own, REPOSITORY), "pull_request", f"pr-{uuid.uuid4()}")
        assert [j["agent"] for j in started["jobs"]] == ["ai-developer"], started
        fork = person_pull(repo, git_server, "mallory:patch", owner)
        forked = opened(repo, fork, "mallory/Hello-World")
        assert deliver(op, forked, "pull_request", f"pr-{uuid.uuid4()}")["jobs"]
        operating.wait_until(
            lambda: any("**Failed**" in c.body for c in github.comments(REPOSITORY, own.number)),
            timeout=TIMEOUT,
            what="the first chain to end",
        )
        answer = fail_check(op, repo, own)
        assert [j["agent"] for j in answer["jobs"]] == ["ai-developer"], answer
        wait_for_commit(git_server, own, "Fix the check")
        operating.wait_until(
            lambda: any("(round 1)" in c.body for c in github.comments(REPOSITORY, own.number)),
            timeout=TIMEOUT,
            what="the round in the chain's comment on the pull request",
        )
        assert fail_check(op, repo, fork)["jobs"] == []
        operating.wait_until(
            lambda: len(fork_comments(repo, fork)) == 1, timeout=TIMEOUT, what="the fork's comment"
        )
        assert fail_check(op, repo, fork)["jobs"] == []
        (round_root,) = rounds_of(info, namespace)
        time.sleep(1)  # Room for a second comment, which must not come.

    assert file_on(git_server, own.head, "FIX.md").strip() == FAILURE
    assert round_root["spec"]["event"]["headRef"] == "greeting"
    (said,) = fork_comments(repo, fork)
    assert "its branch is in a fork" in said.body
    assert fork_comments(repo, own) == []
    assert len(github.pulls(REPOSITORY)) == 2  # The person's two: no chain opened one.


def test_a_failed_round_on_a_persons_pull_request_shows_in_the_chains_comment(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    """Nothing is pushed, so nothing but the chain's own record says the round belongs on
    the person's pull request: its row must still reach the chain's comment there."""
    info, github = cluster_info, repo.github
    owner = REPOSITORY.split("/")[0]
    agent = developer(3, command="echo 'Cannot fix it.'; exit 3", events=("pull_request.opened",))
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(agent))
        own = person_pull(repo, git_server, "greeting", owner)
        started = deliver(op, opened(repo, own, REPOSITORY), "pull_request", f"pr-{uuid.uuid4()}")
        assert [j["agent"] for j in started["jobs"]] == ["ai-developer"], started

        def comment() -> str:
            found = [c.body for c in github.comments(REPOSITORY, own.number)]
            return found[0] if len(found) == 1 else ""

        operating.wait_until(
            lambda: "**Failed**" in comment(), timeout=TIMEOUT, what="the first chain to end"
        )
        assert len(fail_check(op, repo, own)["jobs"]) == 1
        operating.wait_until(
            lambda: "(round 1)" in comment() and "**Failed**" in comment(),
            timeout=TIMEOUT,
            what="the failed round in the chain's comment",
        )


LOOKER = (
    'cd "$AGENT_WORKSPACE_REPO" && '
    'if grep -q "Checks failed on pull request" "$AGENT_PROMPT_FILE"; then '
    "  echo fixed > FIX.md && git add FIX.md && "
    "  git -c user.name=Developer -c user.email=dev@example.com commit -qm 'Fix the check' && "
    "  echo 'Fixed the check.'; "
    "else echo 'Looked.'; fi"
)


def test_a_chain_started_by_a_comment_on_a_pull_request_gets_rounds_on_its_branch(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info, github = cluster_info, repo.github
    owner = REPOSITORY.split("/")[0]
    agent = developer(3, command=LOOKER, events=("issue_comment.created",))
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(agent))
        own = person_pull(repo, git_server, "greeting", owner)
        bare = git_server.bare_path(REPOSITORY)  # As GitHub keeps every pull request's head:
        pull_ref = f"refs/pull/{own.number}/head"  # the chain's workspace checks it out.
        update = ["git", "--git-dir", str(bare), "update-ref", pull_ref, own.head_sha]
        subprocess.run(update, check=True)
        asked = mention_on(repo, own, owner, "Please keep an eye on the checks.")
        started = deliver(op, asked, "issue_comment", f"comment-{uuid.uuid4()}")
        assert [j["agent"] for j in started["jobs"]] == ["ai-developer"], started
        operating.wait_until(
            lambda: any("**Succeeded**" in c.body for c in github.comments(REPOSITORY, own.number)),
            timeout=TIMEOUT,
            what="the first chain to end",
        )
        assert github.requests("pulls/get") == []  # Nothing asked before a round is due.
        answer = fail_check(op, repo, own)
        assert [j["agent"] for j in answer["jobs"]] == ["ai-developer"], answer
        assert len(github.requests("pulls/get", status=200)) == 1
        wait_for_commit(git_server, own, "Fix the check")
        again = fail_check(op, repo, own)
        assert [j["agent"] for j in again["jobs"]] == ["ai-developer"], again
        rounds = rounds_of(info, namespace)

    assert len(github.requests("pulls/get")) == 1  # Recorded: the second did not ask.
    assert {r["spec"]["event"]["headRef"] for r in rounds} == {"greeting"}
    assert file_on(git_server, own.head, "FIX.md").strip() == "fixed"
    assert [p.number for p in github.pulls(REPOSITORY)] == [own.number]  # No other opened.


# Per kind of delivery: the call that lists its failed jobs.
LISTED = {
    "workflow_run": "actions/list-jobs-for-workflow-run",
    "check_suite": "checks/list-for-suite",
}


@pytest.mark.parametrize("kind", sorted(LISTED))
def test_a_failing_workflow_run_or_check_suite_brings_its_failed_jobs_log(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
    kind: str,
) -> None:
    info, github = cluster_info, repo.github
    listing = LISTED[kind]
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        pull = open_pull(op, info, namespace, repo, developer(3))
        with_actions(github, repo)
        payload = app_delivery(kind, "completed", repo.installation.id)
        listed_id = payloads.unique_id()
        failing = failing_check(github, repo.installation.id, pull)["check_run"]
        # A workflow run is named; a check suite is its App's (GitHub Actions).
        named = {"name": "CI"} if kind == "workflow_run" else {"app": failing["app"]}
        payload[kind].update(
            id=listed_id, conclusion="failure", head_sha=pull.head_sha,
            pull_requests=failing["pull_requests"], **named,
        )  # fmt: skip
        lint, tests = listed_id + 1, listed_id + 2
        jobs = [(lint, "lint", "success"), (tests, "tests", "failure")]
        if kind == "workflow_run":
            github.add_run_jobs(REPOSITORY, listed_id, jobs)
        else:
            github.add_suite_runs(REPOSITORY, listed_id, jobs)
        github.add_job_log(REPOSITORY, lint, "LOG: lint is fine\n")
        github.add_job_log(REPOSITORY, tests, LOG_END)
        answer = deliver(op, payload, kind, f"{kind}-{uuid.uuid4()}")
        assert [j["agent"] for j in answer["jobs"]] == ["ai-developer"], answer
        wait_for_commit(git_server, pull, "Fix the check")
        (round_root,) = rounds_of(info, namespace)

    assert file_on(git_server, pull.head, "LOG.md").strip() == LOG_END.strip()
    body = round_root["spec"]["event"]["body"]
    assert f"end of the log of job tests:\n{LOG_END.strip()}" in body
    assert "lint is fine" not in body
    assert len(github.requests(listing, status=200)) == 1
    assert len(github.requests("actions/download-job-logs-for-workflow-run", status=302)) == 1
