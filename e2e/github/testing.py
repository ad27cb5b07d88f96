"""Small helpers the stand-in's own tests (and later e2e tests) share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from e2e.github import model
from e2e.github.standin import AppKey, GitHubStandIn

OWNER = "acme"
REPO = "widgets"
FULL_NAME = f"{OWNER}/{REPO}"


@dataclass
class World:
    """An App installed on ``acme`` with a private ``acme/widgets`` holding issue #1."""

    github: GitHubStandIn
    app: AppKey
    installation: model.Installation
    issue: model.Issue

    def token(
        self, permissions: dict[str, str] | None = None, repositories: list[str] | None = None
    ) -> str:
        return self.github.mint_token(self.installation, repositories or [REPO], permissions)

    def call(
        self, method: str, path: str, *, token: str | None = None, jwt: bool = False, **kwargs: Any
    ) -> httpx.Response:
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            **kwargs.pop("headers", {}),
        }
        if jwt:
            headers["Authorization"] = f"Bearer {self.app.jwt()}"
        elif token is not None:
            headers["Authorization"] = f"token {token}"
        with httpx.Client(base_url=self.github.url, timeout=30) as client:
            return client.request(method, path, headers=headers, **kwargs)


def world(github: GitHubStandIn) -> World:
    app = github.register_app()
    github.add_repo(FULL_NAME)
    github.add_repo(f"{OWNER}/public-site", private=False)
    github.add_repo(f"{OWNER}/secret-plans")
    issue = github.add_issue(FULL_NAME, "Widgets wobble", "They wobble.")
    return World(github, app, github.install(app, OWNER), issue)
