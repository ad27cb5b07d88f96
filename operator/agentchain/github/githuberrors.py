"""GitHub failures as the engine needs them: what to do, and what to tell people.

``classify`` maps githubkit's exceptions to a :class:`GitHubError` with a ``reason``
(also the Event reason and the metric label) and, for rate limits, how long to wait:

- ``RateLimited``: 429, a 403 with a secondary-limit message, or
  ``X-RateLimit-Remaining: 0``; the engine waits ``retry_after`` (a minute when GitHub's
  answer names no time) and retries;
- ``BadAppKey``: 401 on an App (JWT) call, a wrong app id or private key; reported;
- ``NotInstalled``: 404 on the installation, or a repository the installation cannot
  reach; reported;
- ``PermissionMissing``: 403, or a token refused for permissions the App lacks (422);
  reported;
- ``NotFound``: 404 on an object (a deleted comment); the caller decides;
- ``Unavailable``: 5xx, timeouts, broken connections, 401 on a token; retried with
  back-off.

Messages never include tokens or keys: only the method, the path and GitHub's own
error message.
"""

from __future__ import annotations

import datetime as dt
import re

from githubkit.exception import GitHubException, RateLimitExceeded, RequestError, RequestFailed

RATE_LIMITED = "RateLimited"
BAD_APP_KEY = "BadAppKey"
NOT_INSTALLED = "NotInstalled"
PERMISSION_MISSING = "PermissionMissing"
NOT_FOUND = "NotFound"
UNAVAILABLE = "Unavailable"
PERMANENT = frozenset({BAD_APP_KEY, NOT_INSTALLED, PERMISSION_MISSING})
NO_HEADER_WAIT_SECONDS = 60.0
"""A rate limit's wait when GitHub names none (its documentation: at least a minute)."""


class GitHubError(Exception):
    def __init__(
        self,
        reason: str,
        message: str,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after
        self.status = status

    @property
    def permanent(self) -> bool:
        """Whether retrying cannot help until someone changes the App or its installation."""
        return self.reason in PERMANENT


def _github_message(exc: RequestFailed) -> str:
    try:
        body = exc.response.raw_response.json()
    except ValueError:
        return ""
    return str(body.get("message", "")) if isinstance(body, dict) else ""


def _classify_failed(exc: RequestFailed) -> GitHubError:
    error = _reason_of(exc)
    error.status = exc.response.status_code
    return error


# Calls made as the App (JWT): /app..., and the installation lookups of a repository, an
# organisation or a user, after whatever prefix the base URL has (GitHub Enterprise
# Server's /api/v3).  A repository's own paths are told apart first: one named "app"
# (/repos/o/app/pulls) is not the App.
_REPO_PATH = re.compile(r"/repos/[^/]+/[^/]+(/.*)?$")
_APP_PATH = re.compile(r"/app(/.*)?$|/(orgs|users)/[^/]+/installation$")


def _as_app(path: str) -> bool:
    repo = _REPO_PATH.search(path)
    if repo is not None:
        return repo.group(1) == "/installation"
    return _APP_PATH.search(path) is not None


def _reason_of(exc: RequestFailed) -> GitHubError:
    request = exc.request
    path = request.url.path
    status = exc.response.status_code
    said = _github_message(exc)
    where = f"{request.method} {path}: {status} {said}".strip()
    as_app = _as_app(path)
    if status == 429 or (status == 403 and "secondary rate" in said.lower()):
        # A limit without Retry-After or X-RateLimit-Remaining: 0 (githubkit raises
        # RateLimitExceeded only with one): GitHub says wait at least a minute.
        return GitHubError(RATE_LIMITED, f"rate limited: {where}", NO_HEADER_WAIT_SECONDS)
    if status == 401 and as_app:
        return GitHubError(BAD_APP_KEY, f"GitHub refused the App's JWT (app id or key): {where}")
    if as_app and status == 404:
        return GitHubError(NOT_INSTALLED, f"The App is not installed there: {where}")
    if as_app and status == 422:
        if "permission" in said.lower():
            return GitHubError(PERMISSION_MISSING, f"The App lacks a permission: {where}")
        return GitHubError(NOT_INSTALLED, f"The installation cannot reach the repository: {where}")
    if status == 403:
        return GitHubError(PERMISSION_MISSING, f"Permission missing: {where}")
    if status == 404:
        return GitHubError(NOT_FOUND, where)
    return GitHubError(UNAVAILABLE, where)


def classify(exc: GitHubException) -> GitHubError:
    if isinstance(exc, RateLimitExceeded):
        wait = exc.retry_after.total_seconds() if isinstance(exc.retry_after, dt.timedelta) else 60
        message = f"rate limited on {exc.request.method} {exc.request.url.path}"
        return GitHubError(RATE_LIMITED, message, max(1.0, wait))
    if isinstance(exc, RequestFailed):
        return _classify_failed(exc)
    if isinstance(exc, RequestError):
        return GitHubError(UNAVAILABLE, f"GitHub unreachable: {type(exc.exc).__name__}")
    return GitHubError(UNAVAILABLE, f"GitHub client error: {type(exc).__name__}: {exc}")
