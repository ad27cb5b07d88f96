"""``GitHubStandIn``: the local GitHub API server a test starts, fills and inspects.

It runs aiohttp on 127.0.0.1 (a free port; or ``host``, another address of this machine)
in a daemon thread of the test process, so a test talks to the same objects the server
uses (register an App, add repositories, order faults, read the recording) while the
operator, a separate process, reaches it by ``url`` like it would reach api.github.com.
On the real node an agent's pod calls it too (``gh``, an agent's own API calls), and a
pod's loopback is its own: the e2e fixture gives it the node's bridge address.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from e2e.github import model, spec
from e2e.github.faults import Fault, Faults
from e2e.github.recording import Exchange, Recording, Violation
from e2e.github.render import Renderer
from e2e.github.server import Dispatcher
from e2e.github.threaded import ThreadedSite

DEFAULT_APP_PERMISSIONS = {
    "metadata": "read", "contents": "write", "issues": "write", "pull_requests": "write",
    "checks": "write",
}  # fmt: skip


class ViolationsFound(AssertionError):
    """Requests the real GitHub would have refused (or stand-in bugs) were recorded."""


@dataclass
class AppKey:
    """A registered App with its private key: what the operator's Secret would hold."""

    app_id: int
    slug: str
    private_key_pem: bytes = field(repr=False)

    def jwt(self, issued_at: float | None = None, lifetime: int = 540, **claims: Any) -> str:
        """An App JWT as GitHub documents it (iat 60 s in the past against clock drift)."""
        iat = int((issued_at if issued_at is not None else time.time()) - 60)
        payload = {"iat": iat, "exp": iat + lifetime, "iss": str(self.app_id), **claims}
        return jwt.encode(payload, self.private_key_pem, algorithm="RS256")


def new_private_key() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class GitHubStandIn:
    """Start with ``with GitHubStandIn() as github:``; ``github.url`` is the API base URL.

    ``prefix="/api/v3"`` serves the API under a path, as GitHub Enterprise Server does;
    ``host`` is the address it listens on and names in its URLs.
    """

    def __init__(
        self, spec_file: Path | None = None, prefix: str = "", host: str = "127.0.0.1"
    ) -> None:
        self.spec = spec.load(spec_file)
        self.state = model.State()
        self.faults = Faults()
        self.recording = Recording()
        self._dispatcher = Dispatcher(self.spec, self.state, self.faults, self.recording, prefix)
        self.prefix = prefix.rstrip("/")
        self.host = host
        self._site = ThreadedSite(self._dispatcher.app(), "github-standin", host=host)

    @property
    def port(self) -> int:
        return self._site.port

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return self.origin + self.prefix

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> GitHubStandIn:
        self._site.start()
        self._dispatcher.render = Renderer(self.spec, self.url)
        return self

    def stop(self) -> None:
        self._site.stop()

    def serve_git_from(self, origin: str) -> None:
        """Make repositories' ``clone_url`` point at the git stand-in at ``origin``."""
        assert self._dispatcher.render is not None, "start() the stand-in first"
        self._dispatcher.render.git = origin

    def __enter__(self) -> GitHubStandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what GitHub would already know ------------------------------------------------
    def register_app(
        self,
        slug: str = "agentchain-test",
        *,
        owner: str = "agentchain",
        permissions: dict[str, str] | None = None,
        events: list[str] | None = None,
        private_key_pem: bytes | None = None,
    ) -> AppKey:
        """A GitHub App whose JWTs the stand-in accepts; the key is made if not given."""
        pem = private_key_pem or new_private_key()
        key = serialization.load_pem_private_key(pem, password=None)
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        with self.state.lock:
            app_id = self.state.next_id()
            self.state.apps[app_id] = model.App(
                app_id,
                slug,
                slug.replace("-", " ").title(),
                owner,
                public,
                dict(permissions or DEFAULT_APP_PERMISSIONS),
                list(events or ["issues", "issue_comment", "pull_request"]),
                f"Iv1.{app_id}",
            )
        return AppKey(app_id, slug, pem)

    def add_repo(
        self, full_name: str, *, private: bool = True, default_branch: str = "main"
    ) -> model.Repo:
        return self.state.add_repo(full_name, private=private, default_branch=default_branch)

    def add_collaborator(self, full_name: str, login: str, role: str = "write") -> None:
        """Give ``login`` a role on the repository (admin, maintain, write, triage, read)."""
        with self.state.lock:
            self.state.repos[full_name.lower()].collaborators[login.lower()] = role

    def add_issue(
        self,
        full_name: str,
        title: str = "An issue",
        body: str = "",
        *,
        author: str = "octocat",
        pull_request: bool = False,
    ) -> model.Issue:
        return self.state.add_issue(
            full_name, title, body, author=author, pull_request=pull_request
        )

    def install(
        self,
        app: AppKey,
        account: str,
        repositories: list[str] | None = None,
        permissions: dict[str, str] | None = None,
    ) -> model.Installation:
        """Install ``app`` on ``account``: on the named repositories, or on all of them."""
        with self.state.lock:
            registered = self.state.apps[app.app_id]
            installation = model.Installation(
                self.state.next_id(),
                app.app_id,
                account,
                None if repositories is None else {f"{account}/{r}" for r in repositories},
                dict(permissions or registered.permissions),
                list(registered.events),
            )
            self.state.installations[installation.id] = installation
            return installation

    def mint_token(
        self,
        installation: model.Installation,
        repositories: list[str] | None = None,
        permissions: dict[str, str] | None = None,
    ) -> str:
        """An installation token, as POST /app/installations/{id}/access_tokens gives one."""
        return self.state.mint_token(installation.id, repositories, None, permissions).value

    def expire_token(self, token: str) -> None:
        with self.state.lock:
            self.state.tokens[token].expires_at = model.now()

    def token_usable(self, token: str) -> bool:
        with self.state.lock:
            found = self.state.tokens.get(token)
            return found is not None and found.usable(model.now())

    # -- faults and the record -----------------------------------------------------------
    def inject(
        self,
        kind: str,
        times: int = 1,
        *,
        method: str | None = None,
        route: str | None = None,
        retry_after: int = 1,
    ) -> None:
        """Answer the next ``times`` requests matching ``method``/``route`` with ``kind``
        (one of faults.KINDS); ``route`` is an operationId, a path template or a path."""
        self.faults.add(Fault(kind, times, method, route, retry_after))

    def requests(
        self,
        operation_id: str | None = None,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
    ) -> list[Exchange]:
        return self.recording.exchanges(operation_id, method, path, status)

    @property
    def violations(self) -> list[Violation]:
        return self.recording.violations

    def comments(self, full_name: str, issue_number: int) -> list[model.Comment]:
        with self.state.lock:
            return sorted(
                (
                    c
                    for c in self.state.comments.values()
                    if c.repo.lower() == full_name.lower() and c.issue_number == issue_number
                ),
                key=lambda c: c.id,
            )

    def add_comment(
        self, full_name: str, issue_number: int, body: str, *, author: str
    ) -> model.Comment:
        """A person's comment on the issue, as if they had written it on github.com."""
        with self.state.lock:
            repo = self.state.repos[full_name.lower()]
            comment = model.Comment(
                self.state.next_id(), repo.full_name, issue_number, body, author, "User", None
            )
            self.state.comments[comment.id] = comment
            return comment

    def add_job_log(self, full_name: str, job_id: int, text: str) -> None:
        """The log of Actions job ``job_id`` (a check run's id is its job's), served as
        GitHub does: ``actions/download-job-logs-for-workflow-run`` redirects to it."""
        with self.state.lock:
            self.state.job_logs[(full_name.lower(), job_id)] = text.encode()

    def add_suite_runs(
        self, full_name: str, suite_id: int, runs: list[tuple[int, str, str]]
    ) -> None:
        """Check suite ``suite_id``'s check runs, GitHub Actions': (id, name, conclusion)
        each, as ``checks/list-for-suite`` lists them (a run's id is its job's)."""
        with self.state.lock:
            self.state.suite_runs[(full_name.lower(), suite_id)] = list(runs)

    def add_run_jobs(self, full_name: str, run_id: int, jobs: list[tuple[int, str, str]]) -> None:
        """Workflow run ``run_id``'s jobs: (job id, name, conclusion) each, as
        ``actions/list-jobs-for-workflow-run`` lists them."""
        with self.state.lock:
            self.state.run_jobs[(full_name.lower(), run_id)] = list(jobs)

    def add_review(
        self,
        full_name: str,
        number: int,
        body: str,
        comments: list[tuple[str, int, str]],
        *,
        author: str,
        state: str = "CHANGES_REQUESTED",
    ) -> model.Review:
        """A person's review of pull request ``number`` with inline comments (path, line,
        body), as if they had submitted it on github.com."""
        with self.state.lock:
            pull = next(
                p
                for p in self.state.pulls.values()
                if p.repo.lower() == full_name.lower() and p.number == number
            )
            review = model.Review(
                self.state.next_id(),
                pull.repo,
                number,
                author,
                "User",
                None,
                state,
                body,
                pull.head_sha,
                [
                    model.ReviewComment(self.state.next_id(), path, line, "RIGHT", text)
                    for path, line, text in comments
                ],
            )
            self.state.reviews[review.id] = review
            return review

    def reactions(self, comment_id: int) -> list[model.Reaction]:
        with self.state.lock:
            return [r for r in self.state.reactions.values() if r.comment_id == comment_id]

    def check_runs(self, full_name: str) -> list[model.CheckRun]:
        with self.state.lock:
            return [
                r for r in self.state.check_runs.values() if r.repo.lower() == full_name.lower()
            ]

    def pulls(self, full_name: str) -> list[model.PullRequest]:
        with self.state.lock:
            return [p for p in self.state.pulls.values() if p.repo.lower() == full_name.lower()]

    def reviews(self, full_name: str, number: int) -> list[model.Review]:
        with self.state.lock:
            found = [
                r
                for r in self.state.reviews.values()
                if r.repo.lower() == full_name.lower() and r.number == number
            ]
            return sorted(found, key=lambda r: r.id)

    def take_violations(self) -> list[Violation]:
        """The violations so far, forgotten afterwards (for tests that provoke them)."""
        return self.recording.take_violations()

    def assert_clean(self) -> None:
        """Raise if any request was off the description (or the stand-in misbehaved)."""
        found = self.violations
        if found:
            raise ViolationsFound(
                f"{len(found)} request(s) GitHub would refuse:\n" + "\n".join(map(str, found))
            )
