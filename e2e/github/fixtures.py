"""What the GitHub stand-in's pytest fixtures share (``e2e/conftest.py`` defines them:
they listen where the session's agents reach them, which only the session's cluster knows).

``github`` fails its test at teardown when any request was off GitHub's description, so
a client bug shows up in the test that caused it even if the client swallowed the 422.
A test that provokes violations on purpose takes them with ``github.take_violations()``.

The description comes from e2e/setup.sh's npm cache. Without it these tests skip with
the reason locally, but fail in CI (``CI=true``), where setup.sh must have fetched it.
"""

from __future__ import annotations

import os

import pytest

from e2e.github.spec import SpecMissing, load, spec_path


def require_spec() -> None:
    try:
        load()
    except SpecMissing as missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing} (CI must have it: e2e/setup.sh fetches it)")
        pytest.skip(f"{missing}")


__all__ = ["require_spec", "spec_path"]
