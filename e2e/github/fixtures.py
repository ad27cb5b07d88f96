"""pytest fixtures for the GitHub stand-in (imported by e2e/conftest.py).

``github`` fails its test at teardown when any request was off GitHub's description, so
a client bug shows up in the test that caused it even if the client swallowed the 422.
A test that provokes violations on purpose takes them with ``github.take_violations()``.

The description comes from e2e/setup.sh's npm cache. Without it these tests skip with
the reason locally, but fail in CI (``CI=true``), where setup.sh must have fetched it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from e2e.github.spec import SpecMissing, load, spec_path
from e2e.github.standin import GitHubStandIn


def require_spec() -> None:
    try:
        load()
    except SpecMissing as missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing} (CI must have it: e2e/setup.sh fetches it)")
        pytest.skip(f"{missing}")


@pytest.fixture
def github() -> Iterator[GitHubStandIn]:
    """A running GitHub API stand-in; the test fails if a request broke the description."""
    require_spec()
    with GitHubStandIn() as standin:
        yield standin
        standin.assert_clean()


# ``git_server`` is e2e/conftest.py's: it listens where the session's agents reach it,
# which only the session's cluster knows.
__all__ = ["github", "require_spec", "spec_path"]
