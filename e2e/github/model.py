"""The stand-in's state: apps, installations, repositories and what clients created.

Plain dataclasses guarded by one lock (the aiohttp thread and the test thread both touch
them). Ids come from one process-wide counter so an id never names two objects, as on GitHub.

Tokens are the security-relevant part and follow GitHub's rules: an installation token
(``ghs_`` + 36 characters) lives one hour, is limited to the repositories and permissions
it was minted with (a subset of its installation's), and stops working when revoked.
"""

from __future__ import annotations

import itertools
import secrets
import string
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

TOKEN_LIFETIME = timedelta(hours=1)
RATE_LIMIT = 5000  # requests per hour for an installation, as on github.com
_LEVELS = {"read": 1, "write": 2, "admin": 3}
_ALPHABET = string.ascii_letters + string.digits
# One sequence per process, not per stand-in: like GitHub's ids, never reused, so a client
# that caches by id (githubkit caches installation tokens) cannot mix two stand-ins up.
_IDS = itertools.count(1_000_001)


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def allows(granted: dict[str, str], permission: str, level: str) -> bool:
    """Whether ``granted`` includes ``permission`` at ``level`` (write implies read)."""
    have = _LEVELS.get(granted.get(permission, ""), 0)
    return have >= _LEVELS[level]


class Refused(Exception):
    """A request GitHub would refuse; carries the answer GitHub gives."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


@dataclass
class App:
    id: int
    slug: str
    name: str
    owner: str
    public_key_pem: bytes
    permissions: dict[str, str]
    events: list[str]
    client_id: str
    created_at: datetime = field(default_factory=now)

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"


@dataclass
class Installation:
    id: int
    app_id: int
    account: str
    repositories: set[str] | None  # full names; None = all of the account's repositories
    permissions: dict[str, str]
    events: list[str]
    created_at: datetime = field(default_factory=now)

    def covers(self, repo: Repo) -> bool:
        if repo.owner != self.account:
            return False
        return self.repositories is None or repo.full_name in self.repositories


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    private: bool
    default_branch: str
    created_at: datetime = field(default_factory=now)
    # Login (lower case) -> role: admin, maintain, write, triage or read.
    collaborators: dict[str, str] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def permission_of(self, login: str) -> tuple[str, str]:
        """GitHub's (permission, role_name) for ``login``: maintain reads as write, triage
        as read; the owner is admin; anyone else can read a public repository only."""
        if login.lower() == self.owner.lower():
            return "admin", "admin"
        role = self.collaborators.get(login.lower())
        if role is None:
            return ("none", "none") if self.private else ("read", "read")
        return {"maintain": "write", "triage": "read"}.get(role, role), role


@dataclass
class Issue:
    id: int
    repo: str
    number: int
    title: str
    body: str
    author: str
    is_pull_request: bool = False
    created_at: datetime = field(default_factory=now)


@dataclass
class Comment:
    id: int
    repo: str
    issue_number: int
    body: str
    author: str
    author_type: str
    app_id: int | None
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)


@dataclass
class Reaction:
    id: int
    comment_id: int
    content: str
    author: str
    author_type: str
    created_at: datetime = field(default_factory=now)


@dataclass
class CheckRun:
    id: int
    repo: str
    app_id: int
    name: str
    head_sha: str
    status: str = "queued"
    conclusion: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    details_url: str | None = None
    external_id: str | None = None
    output: dict[str, Any] = field(default_factory=dict)


@dataclass
class PullRequest:
    id: int
    repo: str
    number: int
    title: str
    body: str | None
    head: str
    base: str
    head_sha: str
    author: str
    author_type: str
    state: str = "open"
    draft: bool = False
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    files: list[PullFile] | None = None
    """Set by a test; None: the git server's diff of base...head (else no files)."""


@dataclass
class PullFile:
    """One changed file of a pull request, as ``pulls/list-files`` shows it."""

    filename: str
    status: str
    patch: str | None
    additions: int
    deletions: int
    sha: str | None = None


@dataclass
class ReviewComment:
    id: int
    path: str
    line: int
    side: str
    body: str
    in_reply_to: int | None = None
    """A reply's thread: the id of the thread's first comment."""
    start_line: int | None = None
    """A multi-line comment's first line (on ``side``)."""


@dataclass
class Review:
    id: int
    repo: str
    number: int
    author: str
    author_type: str
    app_id: int | None
    state: str
    body: str
    commit_id: str
    comments: list[ReviewComment] = field(default_factory=list)
    submitted_at: datetime = field(default_factory=now)


@dataclass
class Token:
    value: str
    installation_id: int
    repositories: frozenset[str] | None  # None: every repository of the installation
    permissions: dict[str, str]
    expires_at: datetime
    revoked: bool = False

    def usable(self, at: datetime) -> bool:
        return not self.revoked and at < self.expires_at


class State:
    """Everything the stand-in knows; mutate only while holding ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.apps: dict[int, App] = {}
        self.installations: dict[int, Installation] = {}
        self.repos: dict[str, Repo] = {}
        self.issues: dict[tuple[str, int], Issue] = {}
        self.comments: dict[int, Comment] = {}
        self.reactions: dict[int, Reaction] = {}
        self.check_runs: dict[int, CheckRun] = {}
        self.pulls: dict[tuple[str, int], PullRequest] = {}
        self.reviews: dict[int, Review] = {}
        self.job_logs: dict[tuple[str, int], bytes] = {}
        # A workflow run's jobs, by (repository, run id): (job id, name, conclusion).
        self.run_jobs: dict[tuple[str, int], list[tuple[int, str, str]]] = {}
        # A check suite's check runs, by (repository, suite id): (id, name, conclusion).
        self.suite_runs: dict[tuple[str, int], list[tuple[int, str, str]]] = {}
        """Actions job logs by (repository, lower-case, job id)."""
        self.tokens: dict[str, Token] = {}
        self.rate_used: dict[str, int] = {}
        # Set by the git server: (full name, ref) -> commit sha, or None if unknown.
        self.ref_resolver: Callable[[str, str], str | None] | None = None
        # Set by the git server: (full name, base ref, head commit) -> the changed files.
        self.differ: Callable[[str, str, str], list[PullFile]] | None = None
        self.rate_reset = now() + timedelta(hours=1)

    def spend(self, who: str, cost: int = 1) -> tuple[int, int, int]:
        """Count a request against ``who``'s hourly budget: (limit, remaining, reset)."""
        with self.lock:
            if now() >= self.rate_reset:
                self.rate_used.clear()
                self.rate_reset = now() + timedelta(hours=1)
            used = self.rate_used[who] = self.rate_used.get(who, 0) + cost
            return RATE_LIMIT, max(RATE_LIMIT - used, 0), int(self.rate_reset.timestamp())

    def next_id(self) -> int:
        return next(_IDS)

    def repo(self, owner: str, name: str) -> Repo | None:
        # GitHub's names are case-insensitive.
        return self.repos.get(f"{owner}/{name}".lower())

    def add_repo(
        self, full_name: str, *, private: bool = True, default_branch: str = "main"
    ) -> Repo:
        owner, name = full_name.split("/")
        with self.lock:
            repo = Repo(self.next_id(), owner, name, private, default_branch)
            self.repos[full_name.lower()] = repo
            return repo

    def add_issue(
        self,
        full_name: str,
        title: str = "An issue",
        body: str = "",
        *,
        author: str = "octocat",
        pull_request: bool = False,
    ) -> Issue:
        with self.lock:
            repo = self.repos[full_name.lower()]
            number = 1 + max((n for (r, n) in self.issues if r == repo.full_name), default=0)
            issue = Issue(
                self.next_id(),
                repo.full_name,
                number,
                title,
                body,
                author,
                is_pull_request=pull_request,
            )
            self.issues[(repo.full_name, number)] = issue
            return issue

    def installation_for(self, repo: Repo, app_id: int | None = None) -> Installation | None:
        for installation in self.installations.values():
            if installation.covers(repo) and app_id in (None, installation.app_id):
                return installation
        return None

    def mint_token(
        self,
        installation_id: int,
        repositories: list[str] | None = None,
        repository_ids: list[int] | None = None,
        permissions: dict[str, str] | None = None,
    ) -> Token:
        """A new installation token, narrowed as GitHub narrows it (or Refused 422)."""
        with self.lock:
            installation = self.installations.get(installation_id)
            if installation is None:
                raise Refused(404, "Not Found")
            scope = self._token_repos(installation, repositories or [], repository_ids or [])
            granted = self._token_permissions(installation, permissions)
            value = "ghs_" + "".join(secrets.choice(_ALPHABET) for _ in range(36))
            token = Token(value, installation_id, scope, granted, now() + TOKEN_LIFETIME)
            self.tokens[value] = token
            return token

    def _token_repos(
        self, installation: Installation, names: list[str], ids: list[int]
    ) -> frozenset[str] | None:
        if not names and not ids:
            return None
        chosen: set[str] = set()
        by_id = {r.id: r for r in self.repos.values()}
        wanted = [self.repo(installation.account, n) for n in names] + [by_id.get(i) for i in ids]
        for repo in wanted:
            if repo is None or not installation.covers(repo):
                raise Refused(
                    422,
                    "There is at least one repository that does not exist "
                    "or is not accessible to the parent installation.",
                )
            chosen.add(repo.full_name)
        return frozenset(chosen)

    @staticmethod
    def _token_permissions(
        installation: Installation, requested: dict[str, str] | None
    ) -> dict[str, str]:
        if not requested:
            return dict(installation.permissions)
        for permission, level in requested.items():
            if not allows(installation.permissions, permission, level):
                raise Refused(
                    422, "The permissions requested are not granted to this installation."
                )
        granted = dict(requested)
        # GitHub always grants metadata: read to an installation token.
        granted.setdefault("metadata", "read")
        return granted

    def repos_of(self, token: Token) -> list[Repo]:
        installation = self.installations[token.installation_id]
        repos = [r for r in self.repos.values() if installation.covers(r)]
        if token.repositories is not None:
            repos = [r for r in repos if r.full_name in token.repositories]
        return sorted(repos, key=lambda r: r.id)
