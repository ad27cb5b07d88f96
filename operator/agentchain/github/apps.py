"""The operator as a GitHub App: installation tokens, and the calls write-back makes.

githubkit does the HTTP, the App JWT (RS256, ``iss`` = app id, nine minutes) and the
typed bodies; this module keeps to what the product needs:

- :meth:`GitHubApp.mint` creates an installation access token for ONE repository and
  the given permissions (``POST /app/installations/{id}/access_tokens`` with
  ``repositories`` and ``permissions``), so GitHub itself refuses anything wider;
- :meth:`GitHubApp.revoke` revokes a token (``DELETE /installation/token``, with the
  token itself);
- the operator's own tokens (write-back) are minted the same way and kept in memory
  until five minutes before they expire (:meth:`GitHubApp.token_for`);
- comments and check runs: create, update, and find the one the operator made
  (by its hidden marker and author, or by ``external_id``); reactions on a comment
  (the answer to a comment command);
- pull request reviews: the pull request's head and changed files (their patches), a
  review created on that head, and the operator's own review found again by its marker;
- a commenter's permission on a repository (``GET /repos/{o}/{r}/collaborators/
  {user}/permission``), which decides who may approve by a comment.

githubkit's own retries are off (``auto_retry=False``): a rate limit must reach the
write-back worker, which waits and then sends the *latest* body rather than sleeping
inside a stale request.  Every githubkit exception leaves as a
:class:`~agentchain.github.githuberrors.GitHubError`.

The HTTP status of the last answer a task got is kept for it (:func:`last_status`):
a write's span says what GitHub answered without every call returning it.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import httpx
from githubkit import AppAuthStrategy, GitHub
from githubkit.cache import MemCacheStrategy
from githubkit.exception import GitHubException

from agentchain.github.githuberrors import NOT_FOUND, UNAVAILABLE, GitHubError, classify
from agentchain.github.rules.githubscope import Scope
from agentchain.settings import Settings

TIMEOUT_SECONDS = 20.0
REFRESH_MARGIN_SECONDS = 300
"""An own token is replaced this long before it expires."""
MAX_COMMENT_PAGES = 30
"""Comments searched for the marker: 3,000, GitHub's busiest threads are shorter."""
MAX_FILE_PAGES = 30
"""A pull request's changed files read for a review: GitHub lists at most 3,000."""

T = TypeVar("T")
_STATUS: contextvars.ContextVar[int | None] = contextvars.ContextVar("github_status", default=None)


def last_status() -> int | None:
    """The HTTP status of the last answer GitHub gave this task (a context variable:
    each write-back runs in a task of its own, so concurrent ones do not mix)."""
    return _STATUS.get()


@dataclass(frozen=True)
class Minted:
    token: str
    expires_at: dt.datetime


class GitHubApp:
    """One configured App; ``from_settings`` gives None when none is configured."""

    def __init__(self, app_id: int, private_key: str, base_url: str) -> None:
        self.app_id = app_id
        self.base_url = base_url.rstrip("/") + "/"
        self._app = GitHub(
            AppAuthStrategy(str(app_id), private_key),
            base_url=self.base_url,
            # Its own cache: githubkit's default one is process-wide and keyed by app id,
            # so another key of the same App would reuse this one's JWTs.
            cache_strategy=MemCacheStrategy(),
            timeout=TIMEOUT_SECONDS,
            http_cache=False,
            auto_retry=False,
        )
        self._own: dict[tuple[int, str, tuple[tuple[str, str], ...]], Minted] = {}
        self._bot_login: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> GitHubApp | None:
        if not settings.github_enabled:
            return None
        assert settings.github_app_id is not None
        return cls(settings.github_app_id, settings.github_private_key, settings.github_api_url)

    def _client(self, token: str) -> GitHub[Any]:
        return GitHub(
            token,
            base_url=self.base_url,
            timeout=TIMEOUT_SECONDS,
            http_cache=False,
            auto_retry=False,
        )

    @staticmethod
    async def _call(call: Callable[[], Awaitable[T]]) -> T:
        try:
            answer = await call()
        except GitHubException as exc:
            error = classify(exc)
            _STATUS.set(error.status)
            raise error from None
        status = getattr(answer, "status_code", None)
        _STATUS.set(status if isinstance(status, int) else None)
        return answer

    # -- tokens -----------------------------------------------------------------------
    async def mint(self, scope: Scope) -> Minted:
        """A new installation token for ``scope``'s one repository and permissions."""
        made = await self._call(
            lambda: self._app.rest.apps.async_create_installation_access_token(
                scope.installation_id,
                repositories=[scope.name],
                permissions=cast(Any, dict(scope.permissions)),
            )
        )
        data = made.parsed_data
        expires = dt.datetime.strptime(data.expires_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        return Minted(data.token, expires)

    async def revoke(self, token: str) -> None:
        """Revoke ``token``; one that is already dead (401) counts as revoked."""
        gh = self._client(token)  # githubkit holds its client weakly: keep it referenced.
        try:
            await self._call(gh.rest.apps.async_revoke_installation_access_token)
        except GitHubError as exc:
            if exc.status != 401:
                raise

    async def token_for(self, scope: Scope) -> str:
        """The operator's own token for ``scope``, minted when missing or nearly expired."""
        key = (
            scope.installation_id,
            scope.repository.lower(),
            tuple(sorted(scope.permissions.items())),
        )
        held = self._own.get(key)
        if held is None or held.expires_at.timestamp() - time.time() < REFRESH_MARGIN_SECONDS:
            held = self._own[key] = await self.mint(scope)
        return held.token

    def forget(self, scope: Scope) -> None:
        """Drop the own token of ``scope`` (GitHub said it is no longer valid)."""
        key = (
            scope.installation_id,
            scope.repository.lower(),
            tuple(sorted(scope.permissions.items())),
        )
        self._own.pop(key, None)

    async def bot_login(self) -> str:
        """The login the App's comments are authored by: ``<slug>[bot]``."""
        if self._bot_login is None:
            app = (await self._call(self._app.rest.apps.async_get_authenticated)).parsed_data
            if app is None or not app.slug:
                raise GitHubError("BadAppKey", "GitHub did not say which App this key is")
            self._bot_login = f"{app.slug}[bot]"
        return self._bot_login

    # -- comments ---------------------------------------------------------------------
    async def create_comment(self, scope: Scope, number: int, body: str) -> int:
        gh = self._client(await self.token_for(scope))
        made = await self._call(
            lambda: gh.rest.issues.async_create_comment(scope.owner, scope.name, number, body=body)
        )
        return made.parsed_data.id

    async def update_comment(self, scope: Scope, comment_id: int, body: str) -> None:
        gh = self._client(await self.token_for(scope))
        await self._call(
            lambda: gh.rest.issues.async_update_comment(
                scope.owner, scope.name, comment_id, body=body
            )
        )

    async def react(self, scope: Scope, comment_id: int, content: str) -> bool:
        """React with ``content`` on an issue comment; False: it was already there (200)."""
        gh = self._client(await self.token_for(scope))
        made = await self._call(
            lambda: gh.rest.reactions.async_create_for_issue_comment(
                scope.owner, scope.name, comment_id, content=cast(Any, content)
            )
        )
        return made.status_code == 201

    async def find_comment(self, scope: Scope, number: int, marker: str) -> int | None:
        """The operator's own comment on the issue whose body starts with ``marker``.

        Only comments authored by this App count: anybody can type the marker.
        """
        gh = self._client(await self.token_for(scope))
        return await self._find_own(
            lambda page: gh.rest.issues.async_list_comments(
                scope.owner, scope.name, number, per_page=100, page=page
            ),
            marker,
        )

    # -- who may approve ---------------------------------------------------------------
    async def permission_of(self, scope: Scope, login: str) -> str:
        """``login``'s permission on ``scope``'s repository: admin, write, read or none.

        GitHub's collaborator permission (maintain counts as write, triage as read); a
        login GitHub does not know there (404) has none.
        """
        gh = self._client(await self.token_for(scope))
        try:
            answer = await self._call(
                lambda: gh.rest.repos.async_get_collaborator_permission_level(
                    scope.owner, scope.name, login
                )
            )
        except GitHubError as exc:
            if is_not_found(exc):
                return "none"
            raise
        return str(answer.parsed_data.permission)

    # -- pull requests (a chain's published workspace) ------------------------
    async def default_branch(self, scope: Scope) -> str:
        gh = self._client(await self.token_for(scope))
        repo = await self._call(lambda: gh.rest.repos.async_get(scope.owner, scope.name))
        return str(repo.parsed_data.default_branch)

    async def find_pull(self, scope: Scope, branch: str) -> int | None:
        """The pull request (any state) whose head is ``branch`` of the repository itself."""
        gh = self._client(await self.token_for(scope))
        found = await self._call(
            lambda: gh.rest.pulls.async_list(
                scope.owner, scope.name, state="all", head=f"{scope.owner}:{branch}"
            )
        )
        pulls: list[Any] = list(cast(Any, found.parsed_data))
        return int(pulls[0].number) if pulls else None

    async def create_pull(
        self, scope: Scope, *, title: str, branch: str, base: str, body: str
    ) -> int:
        gh = self._client(await self.token_for(scope))
        made = await self._call(
            lambda: gh.rest.pulls.async_create(
                scope.owner, scope.name, title=title, head=branch, base=base, body=body
            )
        )
        return int(made.parsed_data.number)

    async def update_pull(self, scope: Scope, number: int, body: str) -> None:
        gh = self._client(await self.token_for(scope))
        await self._call(
            lambda: gh.rest.pulls.async_update(scope.owner, scope.name, number, body=body)
        )

    # -- reviews (a reviewer's verdict on the chain's pull request) ---------------------
    async def pull_head(self, scope: Scope, number: int) -> tuple[str, str]:
        """The pull request's head commit and its author's login."""
        gh = self._client(await self.token_for(scope))
        pull = (
            await self._call(lambda: gh.rest.pulls.async_get(scope.owner, scope.name, number))
        ).parsed_data
        return str(pull.head.sha), str(pull.user.login if pull.user else "")

    async def pull_branch(self, scope: Scope, number: int) -> tuple[str, str]:
        """The pull request's head branch and the repository it is in (``owner/name``; ""
        when GitHub says none: the fork was deleted)."""
        gh = self._client(await self.token_for(scope))
        pull = (
            await self._call(lambda: gh.rest.pulls.async_get(scope.owner, scope.name, number))
        ).parsed_data
        repo = pull.head.repo
        return str(pull.head.ref), str(repo.full_name) if repo else ""

    async def pull_files(self, scope: Scope, number: int) -> list[tuple[str, str | None]]:
        """Each changed file's name and patch (None when GitHub shows none), at most
        MAX_FILE_PAGES pages of 100 (GitHub itself lists at most 3,000 files)."""
        gh = self._client(await self.token_for(scope))
        files: list[tuple[str, str | None]] = []
        async for page in _pages(
            lambda page: gh.rest.pulls.async_list_files(
                scope.owner, scope.name, number, per_page=100, page=page
            ),
            MAX_FILE_PAGES,
        ):
            files += [(str(f.filename), f.patch or None) for f in page]
        return files

    async def review_comments(self, scope: Scope, number: int, review_id: int) -> list[Any]:
        """The inline comments of review ``review_id`` (GitHub's objects, first page of 100:
        a follow-up round reads at most 50)."""
        gh = self._client(await self.token_for(scope))
        found: list[Any] = []
        async for page in _pages(
            lambda page: gh.rest.pulls.async_list_comments_for_review(
                scope.owner, scope.name, number, review_id, per_page=100, page=page
            ),
            1,
        ):
            found += page
        return found

    # -- CI ----------------------------------------------------------------------------
    async def job_log_tail(self, scope: Scope, job_id: int, keep: int, limit: int) -> bytes:
        """The last ``keep`` bytes of Actions job ``job_id``'s log, reading at most
        ``limit`` bytes of it (GitHub answers with a redirect to the log, followed here):
        a log of any size holds no more than ``keep`` bytes in memory."""
        url = f"/repos/{scope.owner}/{scope.name}/actions/jobs/{job_id}/logs"
        tail, seen = bytearray(), 0
        # Entered, the client keeps its connection while the body streams (a client made
        # per request closes it as soon as the headers are in). httpx drops the token
        # when the redirect leads to another host, as GitHub's log URLs do.
        async with self._client(await self.token_for(scope)) as gh:
            answer = await self._call(lambda: gh.arequest("GET", url, stream=True))
            raw = answer.raw_response
            try:
                async for chunk in raw.aiter_bytes():
                    seen += len(chunk)
                    tail += chunk
                    del tail[:-keep]
                    if seen >= limit:
                        break
            except httpx.HTTPError as exc:  # It broke off: what was read is not its end.
                raise GitHubError(UNAVAILABLE, f"reading the job's log: {exc!r}") from None
            finally:
                await raw.aclose()
        return bytes(tail)

    async def failed_jobs(self, scope: Scope, run_id: int) -> list[tuple[int, str]]:
        """The (id, name) of workflow run ``run_id``'s failed jobs (its latest attempt's),
        from the first page of its jobs."""
        gh = self._client(await self.token_for(scope))
        listed = await self._call(
            lambda: gh.rest.actions.async_list_jobs_for_workflow_run(
                scope.owner, scope.name, run_id, filter_="latest", per_page=100
            )
        )
        failing = ("failure", "timed_out", "startup_failure")
        return [(j.id, j.name) for j in listed.parsed_data.jobs if j.conclusion in failing]

    async def failed_suite_runs(self, scope: Scope, suite_id: int) -> list[tuple[int, str]]:
        """The (id, name) of check suite ``suite_id``'s failed check runs (their latest,
        completed), from the first page of them: for GitHub Actions a check run's id is
        its job's, whose log :meth:`job_log_tail` reads."""
        gh = self._client(await self.token_for(scope))
        listed = await self._call(
            lambda: gh.rest.checks.async_list_for_suite(
                scope.owner,
                scope.name,
                suite_id,
                filter_="latest",
                status="completed",
                per_page=100,
            )
        )
        failing = ("failure", "timed_out", "startup_failure")
        return [(r.id, r.name) for r in listed.parsed_data.check_runs if r.conclusion in failing]

    async def find_review(self, scope: Scope, number: int, marker: str) -> int | None:
        """The operator's own review on the pull request whose body starts with ``marker``."""
        gh = self._client(await self.token_for(scope))
        return await self._find_own(
            lambda page: gh.rest.pulls.async_list_reviews(
                scope.owner, scope.name, number, per_page=100, page=page
            ),
            marker,
        )

    async def create_reply(self, scope: Scope, number: int, comment_id: int, body: str) -> int:
        """Reply in the review thread of comment ``comment_id`` (its first) on the pull
        request."""
        gh = self._client(await self.token_for(scope))
        made = await self._call(
            lambda: gh.rest.pulls.async_create_reply_for_review_comment(
                scope.owner, scope.name, number, comment_id, body=body
            )
        )
        return int(made.parsed_data.id)

    async def find_reply(self, scope: Scope, number: int, marker: str) -> int | None:
        """The operator's own review comment on the pull request starting with ``marker``."""
        gh = self._client(await self.token_for(scope))
        return await self._find_own(
            lambda page: gh.rest.pulls.async_list_review_comments(
                scope.owner, scope.name, number, per_page=100, page=page
            ),
            marker,
        )

    async def _find_own(self, fetch: Callable[[int], Awaitable[Any]], marker: str) -> int | None:
        """The id of the first item this App authored whose body starts with ``marker``.

        Comments and reviews page the same way and carry the same ``user``/``body``
        fields; only the App's own items count, since anybody can type the marker.
        """
        login = await self.bot_login()
        async for page in _pages(fetch):
            for item in page:
                author = item.user.login if item.user else None
                if author == login and (item.body or "").startswith(marker):
                    return int(item.id)
        return None

    async def create_review(
        self, scope: Scope, number: int, commit: str, fields: dict[str, Any]
    ) -> int:
        """Post a review (``fields``: event, body, comments) on ``commit`` of the pull request."""
        gh = self._client(await self.token_for(scope))
        body = {"commit_id": commit, **fields}
        made = await self._call(
            lambda: gh.rest.pulls.async_create_review(
                scope.owner, scope.name, number, data=cast(Any, body)
            )
        )
        return int(made.parsed_data.id)

    # -- check runs -------------------------------------------------------------------
    async def create_check_run(
        self, scope: Scope, name: str, head_sha: str, external_id: str, fields: dict[str, Any]
    ) -> int:
        gh = self._client(await self.token_for(scope))
        body = {"name": name, "head_sha": head_sha, "external_id": external_id, **fields}
        made = await self._call(
            lambda: gh.rest.checks.async_create(scope.owner, scope.name, data=cast(Any, body))
        )
        return int(made.parsed_data.id)

    async def update_check_run(self, scope: Scope, run_id: int, fields: dict[str, Any]) -> None:
        gh = self._client(await self.token_for(scope))
        await self._call(
            lambda: gh.rest.checks.async_update(
                scope.owner, scope.name, run_id, data=cast(Any, fields)
            )
        )

    async def find_check_run(
        self, scope: Scope, name: str, head_sha: str, external_id: str
    ) -> int | None:
        gh = self._client(await self.token_for(scope))
        listed = await self._call(
            lambda: gh.rest.checks.async_list_for_ref(
                scope.owner, scope.name, head_sha, check_name=name, app_id=self.app_id, per_page=100
            )
        )
        for run in listed.parsed_data.check_runs:
            if run.external_id == external_id and run.app is not None and run.app.id == self.app_id:
                return int(run.id)
        return None


async def _pages(
    fetch: Callable[[int], Awaitable[Any]], pages: int = MAX_COMMENT_PAGES
) -> AsyncIterator[list[Any]]:
    for page in range(1, pages + 1):
        try:
            answer = await fetch(page)
        except GitHubException as exc:
            raise classify(exc) from None
        items = list(answer.parsed_data)
        yield items
        if len(items) < 100:
            return


def is_not_found(exc: GitHubError) -> bool:
    return exc.reason == NOT_FOUND
