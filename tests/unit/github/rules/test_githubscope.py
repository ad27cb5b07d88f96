"""What the operator may do on GitHub for a job or a chain (``github/rules/githubscope``).

Aspects covered:
* a job token's scope is the event's installation and ONE repository, with exactly the
  permissions the AiAgent declares (GitHub's names), and nothing when it declares none;
* no token without a GitHub event, an installation or a valid repository (each with a
  reason);
* the write-back scope: ``issues: write`` for an issue, ``pull_requests`` (and
  ``checks`` when a Check Run is wanted) for a pull request, with the head commit;
* the pod env: ``GITHUB_TOKEN`` from the job Secret (``optional``, never a literal
  value) and ``GITHUB_API_URL`` only for agents that declare permissions.
"""

from __future__ import annotations

from typing import Any

from agentchain.github.rules import githubscope
from agentchain.github.rules.githubscope import NoScope, Scope, Target
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import GitHubAccess

ISSUE = JobEvent(
    source="github", name="issues", repository="acme/widgets", number=4,
    installation_id=17, subject="issue",
)  # fmt: skip


def access(**permissions: str) -> GitHubAccess:
    return GitHubAccess.model_validate({"permissions": permissions})


def test_job_scope_is_the_declared_permissions_on_one_repository() -> None:
    scope = githubscope.job_scope(access(issues="write", pullRequests="read"), ISSUE)
    assert scope == Scope(17, "acme/widgets", {"issues": "write", "pull_requests": "read"})
    assert isinstance(scope, Scope) and (scope.owner, scope.name) == ("acme", "widgets")


def test_no_permissions_no_token() -> None:
    assert githubscope.job_scope(None, ISSUE) is None
    assert githubscope.job_scope(GitHubAccess(), ISSUE) is None
    assert githubscope.job_scope(access(), ISSUE) is None


def test_no_github_event_no_token() -> None:
    cases: list[tuple[Any, str]] = [
        (None, "not started by a GitHub event"),
        (JobEvent(source="manual"), "not started by a GitHub event"),
        (ISSUE.model_copy(update={"installation_id": None}), "no App installation"),
        (ISSUE.model_copy(update={"repository": "acme/../x/y"}), "no repository"),
    ]
    for event, reason in cases:
        refused = githubscope.job_scope(access(contents="write"), event)
        assert isinstance(refused, NoScope) and reason in refused.reason


def test_writeback_target_for_an_issue_and_a_pull_request() -> None:
    target = githubscope.writeback_target(ISSUE, check_run=True)
    assert target == Target(Scope(17, "acme/widgets", {"issues": "write"}), 4, False, None)
    pull = ISSUE.model_copy(update={"subject": "pull_request", "head_sha": "a" * 40})
    target = githubscope.writeback_target(pull, check_run=True)
    assert isinstance(target, Target) and target.head_sha == "a" * 40
    assert target.scope.permissions == {"pull_requests": "write", "checks": "write"}
    plain = githubscope.writeback_target(pull, check_run=False)
    assert isinstance(plain, Target) and plain.scope.permissions == {"pull_requests": "write"}


def test_writeback_needs_an_issue_or_pull_request() -> None:
    push = ISSUE.model_copy(update={"name": "push", "number": None, "subject": None})
    assert isinstance(githubscope.writeback_target(push, check_run=True), NoScope)


def test_job_env() -> None:
    assert githubscope.job_env(None, "s", "https://api") == []
    env = githubscope.job_env(access(contents="read"), "job-secret", "https://ghe/api/v3$x")
    assert env == [
        {
            "name": "GITHUB_TOKEN",
            "valueFrom": {
                "secretKeyRef": {"name": "job-secret", "key": "github-token", "optional": True}
            },
        },
        {"name": "GITHUB_API_URL", "value": "https://ghe/api/v3$$x"},
    ]
