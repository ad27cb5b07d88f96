"""A reviewer agent's verdict as a pull request review, on the real control plane with the
GitHub stand-in and its git server (every request checked against GitHub's OpenAPI
description).

Aspects covered:
* a chain opens a pull request (the developer's workspace, published at the chain's
  end) and its reviewer (``spec.github.review: true``) ends its output with an
  ``agentchain-review`` block: the pull request gets one review, on its head commit,
  with the two comments on changed lines inline and the one on a line outside the diff
  folded into the body; the App opened the pull request, so GitHub would refuse it
  requesting changes: the review is a comment saying the verdict;
* exactly once: the operator SIGKILLed right after creating the review, before
  recording it (crashpoint ``github-review-created``): the restarted operator finds
  the review by its marker and posts no second one;
* the other way in: a reviewer that sends its review through the job API with its own
  token (``PUT .../review``, what the ``review`` MCP tool calls) gets it posted when it
  succeeds, over the block its output also ends with: a comment on two added lines is
  one multi-line inline comment (``start_line``), one whose range is not all in the
  diff is folded into the body with its range.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.github.gitserver import GitServer
from e2e.githubloop import REPOSITORY, Installed, app_delivery, app_operator, install
from e2e.test_workspaces import workspace_env

Obj = dict[str, Any]
# A workspace chain clones, runs and publishes in containers: on a loaded machine one
# took 49 s to its pull request (test_github_followups.py), close to the 60 s this waited.
TIMEOUT = float(chaining.CHAIN_TIMEOUT_SECONDS)
DEVELOPER = (
    'cd "$AGENT_WORKSPACE_REPO" && sed -i s/Wrold/World/ README.md && '
    "printf 'first\\nsecond\\n' > NOTES.md && git add NOTES.md && "
    "git -c user.name=Developer -c user.email=dev@example.com commit -qam 'Fix the typo' && "
    "echo 'Fixed the typo.'"
)
REVIEW = {
    "verdict": "request_changes",
    "body": "Nearly there, @octocat.",
    "comments": [
        {"path": "README.md", "line": 1, "side": "RIGHT", "body": "Right fix."},
        {"path": "NOTES.md", "line": 2, "body": "Say more <here>."},
        {"path": "README.md", "line": 40, "body": "Off the diff."},
    ],
}
REVIEWER = f"echo 'Reviewed.'; printf '```agentchain-review\\n%s\\n```\\n' '{json.dumps(REVIEW)}'"


@pytest.fixture
def repo(github: GitHubStandIn, git_server: GitServer, tmp_path: Path) -> Installed:
    installed = install(github, tmp_path)
    git_server.create_repo(REPOSITORY, {"README.md": "Hello Wrold\n"}, private=False)
    return installed


SENT = {
    "verdict": "comment",
    "body": "Sent through the API.",
    "comments": [
        {"path": "NOTES.md", "start_line": 1, "line": 2, "body": "Both notes."},
        {"path": "README.md", "start_line": 1, "line": 3, "body": "Past its end."},
    ],
}
SENDER = f"""
import json, os, urllib.request
url = "{{}}/api/jobs/{{}}/{{}}/review".format(
    os.environ["AGENT_API_URL"], os.environ["AGENT_NAMESPACE"], os.environ["AGENT_JOB"])
request = urllib.request.Request(
    url, data=json.dumps({SENT!r}).encode(), method="PUT",
    headers={{"Authorization": "Bearer " + os.environ["AGENT_TOKEN"],
             "Content-Type": "application/json"}})
print("sent", urllib.request.urlopen(request, timeout=10).read().decode())
print("```agentchain-review")
print(json.dumps({{"verdict": "approve", "body": "The block, not sent."}}))
print("```")
"""


def agents(reviewer: list[str] | None = None) -> list[Obj]:
    reviewer = reviewer or ["sh", "-c", REVIEWER]
    return [
        chaining.ai_agent(
            "ai-developer",
            ["sh", "-c", DEVELOPER],
            object_name="developer",
            workspace={"publish": True, "keepFor": "0"},
            triggers=[
                {
                    "source": "github",
                    "events": ["issues.opened"],
                    "next": {"agentTriggerName": "ai-reviewer"},
                }
            ],
        ),
        chaining.ai_agent("ai-reviewer", reviewer, object_name="reviewer", github={"review": True}),
    ]


def test_a_reviewer_posts_one_review_with_inline_and_folded_comments(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info, github = cluster_info, repo.github
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        for obj in agents():
            info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))

        def deliver() -> None:
            payload = app_delivery("issues", "opened", repo.installation.id)
            body, headers = delivering.signed(op.webhook_secret, payload, event="issues")
            status, answer = delivering.send(op, body, headers)
            assert status == 202 and answer["jobs"], answer

        assert op.crash_at("github-review-created", deliver, timeout=TIMEOUT) != 0
        (pull,) = github.pulls(REPOSITORY)
        (review,) = github.reviews(REPOSITORY, pull.number)  # Created, never recorded.
        searches = len(github.requests("pulls/list-reviews", status=200))
        op.start()
        operating.wait_until(
            lambda: len(github.requests("pulls/list-reviews", status=200)) > searches,
            timeout=TIMEOUT,
            what="the restarted operator to look for its review",
        )
        time.sleep(2)  # Room for a second review, which must not come.
        assert github.reviews(REPOSITORY, pull.number) == [review]
        assert len(github.requests("pulls/create-review")) == 1

    assert review.author == "agentchain[bot]" and review.state == "COMMENTED"
    assert review.commit_id == git_server.resolve(REPOSITORY, pull.head)
    assert [(c.path, c.line, c.side, c.body) for c in review.comments] == [
        ("README.md", 1, "RIGHT", "```text\nRight fix.\n```"),
        ("NOTES.md", 2, "RIGHT", "```text\nSay more <here>.\n```"),
    ]
    body = review.body
    assert body.startswith(f"<!-- agentchain:review={namespace}/")
    assert "**Request changes**" in body and "own pull request" in body
    assert "```text\nNearly there, @octocat.\n```" in body  # Inert: no ping.
    assert "README.md, line 40 (right side):\n\n```text\nOff the diff.\n```" in body


def test_a_review_sent_through_the_job_api_is_posted_with_a_multi_line_comment(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info, github = cluster_info, repo.github
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        for obj in agents(chaining.python_command(SENDER)):
            info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))
        payload = app_delivery("issues", "opened", repo.installation.id)
        body, headers = delivering.signed(op.webhook_secret, payload, event="issues")
        status, answer = delivering.send(op, body, headers)
        assert status == 202 and answer["jobs"], answer
        operating.wait_until(
            lambda: (
                bool(github.pulls(REPOSITORY))
                and bool(github.reviews(REPOSITORY, github.pulls(REPOSITORY)[0].number))
            ),
            timeout=TIMEOUT,
            what="the reviewer's review",
        )
        time.sleep(2)  # Room for a second review, which must not come.
        (pull,) = github.pulls(REPOSITORY)
        (review,) = github.reviews(REPOSITORY, pull.number)

    assert review.state == "COMMENTED" and "**Comment**" in review.body
    assert [(c.path, c.start_line, c.line, c.body) for c in review.comments] == [
        ("NOTES.md", 1, 2, "```text\nBoth notes.\n```"),
    ]
    assert "```text\nSent through the API.\n```" in review.body
    assert "The block, not sent." not in review.body
    assert "README.md, lines 1 to 3 (right side):\n\n```text\nPast its end.\n```" in review.body
