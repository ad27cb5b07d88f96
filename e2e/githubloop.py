"""An operator acting as a GitHub App against the stand-in, and real deliveries for it.

The end-to-end tests of issue 17 (and the demo) share this: the stand-in set up as
GitHub would be for an installed App (the repository of the example payloads, its
issue #1 and pull request #2, the App installed on its owner), an operator whose
settings name the stand-in's URL, the App's id and a file with its private key, and
GitHub's own example payloads (``@octokit/webhooks-examples``, the pinned tarball
e2e/setup.sh fetches) with the ``installation`` GitHub adds to an App's deliveries.
"""

from __future__ import annotations

import contextlib
import json
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e import operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn, model
from e2e.github.standin import AppKey

Obj = dict[str, Any]
EXAMPLES_VERSION = "7.6.1"
CACHE = Path(os.environ.get("AGENTCHAIN_CACHE", Path.home() / ".cache/agentchain"))
EXAMPLES = CACHE / "npm" / EXAMPLES_VERSION / f"octokit-webhooks-examples-{EXAMPLES_VERSION}.tgz"
REPOSITORY = "Codertocat/Hello-World"  # The examples' repository.
ISSUE = 1
PULL = 2
DASHBOARD = "https://agentchain.example.com"


def example(event: str, action: str) -> Obj:
    """GitHub's first example payload of ``event``.``action``, as GitHub documents it."""
    if not EXAMPLES.is_file():
        reason = f"{EXAMPLES} is missing: run e2e/setup.sh"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with tarfile.open(EXAMPLES) as tar:
        member = tar.extractfile("package/api.github.com/index.json")
        assert member is not None
        events = json.load(member)
    found = next(
        x for e in events if e["name"] == event for x in e["examples"] if x.get("action") == action
    )
    assert isinstance(found, dict)
    return found


def app_delivery(event: str, action: str, installation_id: int) -> Obj:
    """The example as an App's webhook delivers it: with its installation."""
    payload = example(event, action)
    payload["installation"] = {
        "id": installation_id,
        "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==",
    }
    return payload


@dataclass
class Installed:
    """The stand-in as GitHub would be with the App installed on the examples' owner."""

    github: GitHubStandIn
    app: AppKey
    installation: model.Installation
    key_file: Path
    repository: str = REPOSITORY

    def env(self, delay: float = 0.5) -> dict[str, str]:
        return {
            "AGENTCHAIN_GITHUB_APP_ID": str(self.app.app_id),
            "AGENTCHAIN_GITHUB_PRIVATE_KEY_FILE": str(self.key_file),
            "AGENTCHAIN_GITHUB_API_URL": self.github.url,
            "AGENTCHAIN_GITHUB_DASHBOARD_URL": DASHBOARD,
            "AGENTCHAIN_GITHUB_WRITEBACK_DELAY_SECONDS": str(delay),
        }

    def comments(self, number: int = ISSUE) -> list[model.Comment]:
        return self.github.comments(self.repository, number)

    def creates(self) -> int:
        return len(self.github.requests("issues/create-comment", status=201))


def install(
    github: GitHubStandIn,
    workdir: Path,
    *,
    repositories: list[str] | None = None,
    repository: str = REPOSITORY,
) -> Installed:
    """Register the App, ``repository`` (public) with issue #1 and PR #2, a private
    ``secret-plans`` beside it, and install the App on their owner (on ``repositories``
    only, when given)."""
    owner = repository.split("/")[0]
    app = github.register_app("agentchain")
    github.add_repo(repository, private=False)
    github.add_repo(f"{owner}/secret-plans")
    github.add_issue(repository, "Spelling error in the README file", author=owner)
    github.add_issue(repository, "Update the README", author=owner, pull_request=True)
    installation = github.install(app, owner, repositories)
    key_file = workdir / f"github-app-{app.app_id}.pem"
    key_file.write_bytes(app.private_key_pem)
    key_file.chmod(0o600)
    return Installed(github, app, installation, key_file, repository)


@contextlib.contextmanager
def app_operator(
    session: operating.OperatorProcess,
    info: ClusterInfo,
    namespace: str,
    installed: Installed | None,
    extra_env: dict[str, str] | None = None,
) -> Iterator[operating.OperatorProcess]:
    """An operator for ``namespace`` only, acting as the App (``installed``; None: with
    no App at all), while the session's is stopped (it watches every namespace and would
    act on this one too)."""
    session.stop()
    app_env = installed.env() if installed is not None else {}
    op = operating.OperatorProcess(
        info,
        session.kubeconfig,
        extra_env={"AGENTCHAIN_NAMESPACES": namespace, **app_env, **(extra_env or {})},
        name="github-operator" if installed is not None else "no-app-operator",
    )
    try:
        op.start()
        yield op
    finally:
        op.stop()
        session.start()
