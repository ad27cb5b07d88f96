"""Which GitHub calls are the App's own (``github/githuberrors.py``): a 401, 404 or 422 there
means a bad key or a missing installation, anywhere else it is about the object.

Aspects covered: the App's paths with and without GitHub Enterprise Server's prefix;
a repository named ``app`` or ``installation`` is a repository, not the App; a rate
limit without the headers githubkit looks for (a 429, a 403 saying "secondary rate") is
``RateLimited`` with a minute's wait, not a missing permission or an outage.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from githubkit.exception import RequestFailed
from githubkit.response import Response

from agentchain.github import githuberrors


@pytest.mark.parametrize(
    "path",
    [
        "/app",
        "/app/installations/7/access_tokens",
        "/api/v3/app/installations/7/access_tokens",
        "/repos/octo/widgets/installation",
        "/api/v3/repos/octo/widgets/installation",
        "/orgs/octo/installation",
        "/users/octo/installation",
    ],
)
def test_the_apps_own_calls(path: str) -> None:
    assert githuberrors._as_app(path)


@pytest.mark.parametrize(
    "path",
    [
        "/repos/octo/app/pulls",
        "/repos/octo/app",
        "/api/v3/repos/octo/app/issues/1/comments",
        "/repos/octo/installation",
        "/repos/app/app/check-runs",
        "/installation/repositories",
        "/repos/octo/widgets/pulls",
    ],
)
def test_a_repositorys_calls_are_not_the_apps(path: str) -> None:
    assert not githuberrors._as_app(path)


def _failed(status: int, message: str, path: str = "/repos/octo/widgets/issues/1/comments") -> Any:
    request = httpx.Request("POST", f"https://api.github.com{path}")
    response = httpx.Response(status, json={"message": message}, request=request)
    return githuberrors.classify(RequestFailed(Response(response, Any)))


SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes."


@pytest.mark.parametrize(
    ("status", "message", "path"),
    [
        (403, SECONDARY, "/repos/octo/widgets/issues/1/comments"),
        (403, SECONDARY, "/app/installations/7/access_tokens"),
        (429, "Too many requests", "/repos/octo/widgets/issues/1/comments"),
        (429, "Too many requests", "/app/installations/7/access_tokens"),
    ],
)
def test_a_rate_limit_without_its_headers_waits_a_minute(
    status: int, message: str, path: str
) -> None:
    error = _failed(status, message, path)
    assert (error.reason, error.retry_after) == (githuberrors.RATE_LIMITED, 60.0)
    assert not error.permanent and error.status == status


def test_a_plain_403_is_still_a_missing_permission() -> None:
    error = _failed(403, "Resource not accessible by integration")
    assert error.reason == githuberrors.PERMISSION_MISSING and error.permanent
