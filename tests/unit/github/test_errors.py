"""Which GitHub calls are the App's own (``github/errors.py``): a 401, 404 or 422 there
means a bad key or a missing installation, anywhere else it is about the object.

Aspects covered: the App's paths with and without GitHub Enterprise Server's prefix;
a repository named ``app`` or ``installation`` is a repository, not the App.
"""

from __future__ import annotations

import pytest

from agentchain.github import errors


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
    assert errors._as_app(path)


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
    assert not errors._as_app(path)
