"""A git server speaking the smart HTTP protocol, checking the stand-in's tokens.

Debian's ``git http-backend`` (a CGI program) does the protocol; this module is the web
server in front of it that does what GitHub's front does: Basic auth with the password
an installation token (``x-access-token:<token>``), fetch/clone needing
``contents: read`` on the repository and push needing ``contents: write``. Refusals
look like GitHub's: no or bad credentials 401 (with a Basic challenge, so git retries
with the credentials in its URL), a token without the permission 403, a private
repository the token cannot reach 404 ("Repository not found").

Bare repositories live under ``root/<owner>/<name>.git``; every push is recorded with
the ref updates it carried (parsed from the receive-pack request), so a test can count
pushes exactly.

Plain HTTP by default; with ``tls`` (a CA and the serving pair it signed,
``e2e/controlplane/certs.serving``) it serves HTTPS, as a git host that is not GitHub
would, for clients that trust that CA.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import ssl
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from aiohttp import web

from e2e.controlplane.certs import KeyPair
from e2e.github import access, model
from e2e.github.standin import GitHubStandIn
from e2e.github.threaded import ThreadedSite

GIT = "/usr/bin/git"
HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
_SERVICES = {"git-upload-pack": "read", "git-receive-pack": "write"}
_COMMITTER = {
    "GIT_AUTHOR_NAME": "Octo Cat",
    "GIT_AUTHOR_EMAIL": "octocat@example.com",
    "GIT_COMMITTER_NAME": "Octo Cat",
    "GIT_COMMITTER_EMAIL": "octocat@example.com",
}


@dataclass(frozen=True)
class RefUpdate:
    old: str
    new: str
    ref: str


@dataclass
class Push:
    repo: str
    identity: str
    updates: list[RefUpdate] = field(default_factory=list)
    status: int = 0


class GitServer:
    """``with GitServer(github, root) as git:``; ``git.clone_url("o/r", token)``."""

    def __init__(
        self,
        github: GitHubStandIn,
        root: Path,
        tls: tuple[Path, KeyPair] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        """``host``: where it listens; pods on the real node reach only its bridge address."""
        self.github = github
        self.host = host
        self.root = Path(root)
        self.ca: Path | None = tls[0] if tls else None
        """The CA a client must trust (None: plain HTTP)."""
        context = None
        if tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(tls[1].cert, tls[1].key)
        self.pushes: list[Push] = []
        # Called with (service, repository, path tail) before an authorized request is
        # served (a test moves a branch there to race a client between two requests), and
        # after it was served, before the answer is sent (a test kills the client there).
        self.before_request: Callable[[str, str, str], None] | None = None
        self.after_request: Callable[[str, str, str], None] | None = None
        application = web.Application(client_max_size=256 * 1024 * 1024)
        application.router.add_route("*", "/{owner}/{name}/{tail:.*}", self._handle)
        self._site = ThreadedSite(application, "git-standin", context, host=host)
        self._scheme = "https" if context else "http"

    @property
    def url(self) -> str:
        return f"{self._scheme}://{self.host}:{self._site.port}"

    def clone_url(self, full_name: str, token: str | None = None) -> str:
        credentials = f"x-access-token:{token}@" if token else ""
        return f"{self._scheme}://{credentials}{self.host}:{self._site.port}/{full_name}.git"

    def start(self) -> GitServer:
        self.root.mkdir(parents=True, exist_ok=True)
        self._site.start()
        self.github.state.ref_resolver = self.resolve
        self.github.state.differ = self.diff
        self.github.serve_git_from(self.url)
        return self

    def stop(self) -> None:
        self._site.stop()

    def __enter__(self) -> GitServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- repositories ----------------------------------------------------------------
    def bare_path(self, full_name: str) -> Path:
        return self.root / f"{full_name}.git"

    def create_repo(
        self,
        full_name: str,
        files: dict[str, str] | None = None,
        *,
        commits: int = 3,
        private: bool = True,
        default_branch: str = "main",
    ) -> Path:
        """A bare repository with ``commits`` commits (the last adds ``files``), also known
        to the GitHub stand-in, which is given the same default branch and visibility."""
        bare = self.bare_path(full_name)
        _git("init", "--quiet", "--bare", f"--initial-branch={default_branch}", str(bare))
        with tempfile.TemporaryDirectory(prefix="git-seed-") as scratch:
            work = Path(scratch)
            _git("init", "--quiet", f"--initial-branch={default_branch}", str(work))
            for number in range(1, commits + 1):
                (work / "CHANGELOG.md").write_text(
                    "".join(f"- change {n}\n" for n in range(1, number + 1))
                )
                if number == commits:
                    for name, text in (files or {}).items():
                        (work / name).parent.mkdir(parents=True, exist_ok=True)
                        (work / name).write_text(text)
                _git("-C", str(work), "add", "--all")
                _git("-C", str(work), "commit", "--quiet", "-m", f"Change {number}")
            _git("-C", str(work), "push", "--quiet", str(bare), default_branch)
        if full_name.lower() not in self.github.state.repos:
            self.github.add_repo(full_name, private=private, default_branch=default_branch)
        return bare

    def resolve(self, full_name: str, ref: str) -> str | None:
        """The commit ``ref`` (a branch name or full ref) names, or None."""
        bare = self.bare_path(full_name)
        if not bare.is_dir():
            return None
        name = ref if ref.startswith("refs/") else f"refs/heads/{ref}"
        found = subprocess.run(
            [GIT, "--git-dir", str(bare), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return found.stdout.strip() or None

    def _git(self, full_name: str, *args: str) -> str:
        found = subprocess.run(
            [GIT, "--git-dir", str(self.bare_path(full_name)), *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return found.stdout

    def subjects(self, full_name: str, ref: str) -> list[str]:
        """The subjects of the commits ``ref`` reaches, newest first (what a test asserts
        of a branch a chain pushed to)."""
        return self._git(full_name, "log", "--format=%s", ref).splitlines()

    def file_at(self, full_name: str, ref: str, path: str) -> str:
        """The text of file ``path`` at ``ref``."""
        return self._git(full_name, "show", f"{ref}:{path}")

    def diff(self, full_name: str, base: str, head: str) -> list[model.PullFile]:
        """The files ``head`` changes since its merge base with branch ``base``, each with
        its patch as GitHub shows it (the hunks, without the ``diff --git`` header)."""
        bare, span = str(self.bare_path(full_name)), f"refs/heads/{base}...{head}"

        def git(*args: str, path: str | None = None) -> str:
            run = [GIT, "--git-dir", bare, "diff", "--no-color", "--no-ext-diff", *args, span]
            run += ["--", path] if path is not None else []
            return subprocess.run(run, capture_output=True, text=True, check=True).stdout

        counts: dict[str, tuple[int, int]] = {}
        for line in git("--numstat", "--no-renames").splitlines():
            added, removed, name = line.split("\t", 2)
            counts[name] = (
                int(added) if added != "-" else 0,
                int(removed) if removed != "-" else 0,
            )
        statuses = {"A": "added", "D": "removed", "M": "modified"}
        files = []
        for line in git("--name-status", "--no-renames").splitlines():
            code, name = line.split("\t", 1)
            text = git("--no-renames", path=name)
            patch = text[text.index("@@") :].rstrip("\n") if "@@" in text else None
            plus, minus = counts.get(name, (0, 0))
            files.append(model.PullFile(name, statuses.get(code[0], "changed"), patch, plus, minus))
        return files

    # -- HTTP ---------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        owner, name = request.match_info["owner"], request.match_info["name"]
        tail = request.match_info["tail"]
        service = request.query.get("service") if tail == "info/refs" else tail
        if not name.endswith(".git") or service not in _SERVICES:
            return web.Response(status=404, text="Not Found")
        full_name = f"{owner}/{name.removesuffix('.git')}"
        refusal, identity = self._authorize(request, full_name, _SERVICES[service])
        if refusal is not None:
            return refusal
        if self.before_request is not None:
            self.before_request(service, full_name, tail)
        body = await request.read()
        push = None
        if service == "git-receive-pack" and tail == service:
            push = Push(
                full_name, identity, _ref_updates(body, request.headers.get("Content-Encoding"))
            )
            self.pushes.append(push)
        response = await self._backend(request, owner, name, tail, body, identity)
        if push is not None:
            push.status = response.status
        if self.after_request is not None:
            self.after_request(service, full_name, tail)
        return response

    def _authorize(
        self, request: web.Request, full_name: str, level: str
    ) -> tuple[web.Response | None, str]:
        state = self.github.state
        with state.lock:
            identity = access.ANONYMOUS
            try:
                identity = access.identify(state, request.headers.get("Authorization"))
                if identity.kind == "app":
                    raise model.Refused(401, "Bad credentials")
                owner, name = full_name.split("/", 1)
                access.repository(state, identity, owner, name, "contents", level)
            except model.Refused as refused:
                # Anonymous: challenge, so git retries with the credentials it has.
                status = 401 if identity.kind == "anonymous" else refused.status
                return _git_refusal(status, full_name), "refused"
        if not self.bare_path(full_name).is_dir():
            return web.Response(status=404, text="Repository not found.\n"), str(identity)
        return None, str(identity)

    async def _backend(
        self, request: web.Request, owner: str, name: str, tail: str, body: bytes, identity: str
    ) -> web.Response:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": request.method, "PATH_INFO": f"/{owner}/{name}/{tail}",
            "QUERY_STRING": request.query_string, "REMOTE_USER": identity,
            "REMOTE_ADDR": "127.0.0.1", "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": request.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": request.headers.get("Git-Protocol", ""),
        }  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            HTTP_BACKEND,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await process.communicate(body)
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status, headers = 200, {}
        for line in head.decode(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers[key] = value.strip()
        if process.returncode and status == 200:
            status, payload = 500, err
        return web.Response(status=status, headers=headers, body=payload)


def _git(*args: str) -> None:
    subprocess.run([GIT, *args], check=True, capture_output=True, env={**os.environ, **_COMMITTER})


def _git_refusal(status: int, full_name: str) -> web.Response:
    if status == 401:
        return web.Response(
            status=401,
            text="Invalid username or token.\n",
            headers={"WWW-Authenticate": 'Basic realm="GitHub"'},
        )
    if status == 404:
        return web.Response(status=404, text="Repository not found.\n")
    return web.Response(status=403, text=f"Permission to {full_name}.git denied.\n")


def _ref_updates(body: bytes, encoding: str | None) -> list[RefUpdate]:
    """The ``<old> <new> <ref>`` commands at the start of a receive-pack request (after a
    shallow client's ``shallow <sha>`` lines)."""
    if encoding == "gzip":
        body = gzip.decompress(body)
    updates, offset = [], 0
    while offset + 4 <= len(body):
        length = int(body[offset : offset + 4], 16)
        if length == 0:
            break
        line = body[offset + 4 : offset + length].split(b"\0")[0].decode().strip()
        offset += length
        if line.startswith("shallow "):
            continue  # A shallow client names its boundary commits before the commands.
        old, new, ref = line.split(" ", 2)
        updates.append(RefUpdate(old, new, ref))
    return updates
