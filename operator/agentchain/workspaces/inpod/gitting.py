"""Running git: argv lists, a clean environment, bounded output, a deadline.

Every command starts from an environment built here, not the pod's: no ``GIT_*``
variable of the caller reaches git, neither the system's config nor the user's global
one is read, and git runs from ``/``, so a command that names no repository (``git
ls-remote <url>``) never picks up the config of a repository around the working
directory (a workspace's, which its agents write); the commands that do name one run in
a repository of ours (``preparing.py``, ``sealing.py``), never in the agents'. Git
never prompts (``GIT_TERMINAL_PROMPT=0``: a missing credential fails at once), and
messages are in English (``LC_ALL=C``) so failures can be classified. Proxies and
the trusted CAs (``SSL_CERT_FILE``/``SSL_CERT_DIR``, also given to git as
``http.sslCAInfo``/``http.sslCAPath``) are the pod's. Configuration
goes through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_<n>``/``GIT_CONFIG_VALUE_<n>``, which
git treats as command-line configuration but which, unlike ``-c``, is not visible in
the process list: that is how a credential reaches git (see ``credentials.py``),
and it is never written to a file.

Output is bounded: standard error and small outputs go through temporary files of which
only a bounded part is read (a hostile server's ``remote:`` lines can be long), and
large outputs are streamed in chunks to a consumer that folds them as they come.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

GIT = shutil.which("git") or "/usr/bin/git"
TIMEOUT_SECONDS = 1800.0
"""A clone or push of a large repository over a slow link; a hung server ends here."""
OUTPUT_MAX_BYTES = 64 * 1024
ERROR_MAX_BYTES = 4096
CHUNK_BYTES = 64 * 1024
NEUTRAL_DIRECTORY = "/"
"""git's working directory: no repository is found from it, so none's config is read."""

_PASSED = ("PATH", "HOME", "TZ", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY",
           "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR")  # fmt: skip
BASE_CONFIG: tuple[tuple[str, str], ...] = (
    # Only http(s) transports, also for a redirect or a submodule a repository names.
    ("protocol.allow", "never"),
    ("protocol.https.allow", "always"),
    ("protocol.http.allow", "always"),
    ("core.hooksPath", "/dev/null"),
    ("credential.helper", ""),
    ("core.fsmonitor", "false"),
    ("submodule.recurse", "false"),
    # Pods of one chain may run as different users; every repository git opens for
    # these commands is one they made (see sealing.py for the agent's).
    ("safe.directory", "*"),
    ("advice.detachedHead", "false"),
    ("init.defaultBranch", "main"),
    ("user.name", "agentchain"),
    ("user.email", "agentchain@localhost"),
)


class GitError(Exception):
    """git failed: ``stderr`` holds the (bounded) tail of what it said."""

    def __init__(self, argv: Sequence[str], code: int, stderr: str) -> None:
        self.code = code
        self.stderr = stderr
        super().__init__(f"git {argv[1] if len(argv) > 1 else ''} exited {code}: {stderr.strip()}")


@dataclass(frozen=True)
class Result:
    code: int
    stdout: bytes
    stderr: str


def environment(
    config: Sequence[tuple[str, str]] = (), extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a git command: clean, non-interactive, ``config`` applied."""
    env = {name: os.environ[name] for name in _PASSED if name in os.environ}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_GLOBAL": "/dev/null",
                "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"})  # fmt: skip
    pairs = [*BASE_CONFIG, *_trust(env), *config]
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for number, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{number}"] = key
        env[f"GIT_CONFIG_VALUE_{number}"] = value
    env.update(extra or {})
    return env


def _trust(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """``SSL_CERT_FILE``/``SSL_CERT_DIR`` as git's own CA settings: git built with
    libcurl-gnutls (Debian's, the operator image's) ignores the variables, so a host
    with a private CA would fail verification however the image set them."""
    keys = (("SSL_CERT_FILE", "http.sslCAInfo"), ("SSL_CERT_DIR", "http.sslCAPath"))
    return [(key, env[name]) for name, key in keys if env.get(name)]


def run(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    check: bool = True,
    timeout: float = TIMEOUT_SECONDS,
) -> Result:
    """``git <args>``; GitError if it fails and ``check``. stdout is cut to 64 KiB."""
    argv = [GIT, *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            code = subprocess.run(
                argv, env=dict(env), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                timeout=timeout, check=False, cwd=NEUTRAL_DIRECTORY,
            ).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            code, timed_out = -1, True
        else:
            timed_out = False
        stderr = _tail(err) + (f"\ntimed out after {timeout:.0f} s" if timed_out else "")
        out.seek(0)
        result = Result(code, out.read(OUTPUT_MAX_BYTES), stderr)
    if check and result.code != 0:
        raise GitError(argv, result.code, result.stderr)
    return result


def stream(
    args: Sequence[str], env: Mapping[str, str], *, timeout: float = TIMEOUT_SECONDS
) -> Iterator[bytes]:
    """``git <args>``'s stdout in chunks; GitError at the end if git failed.

    The caller must consume the whole stream (it folds records as they come, so memory
    stays bounded whatever the repository holds).
    """
    argv = [GIT, *args]
    with (
        tempfile.TemporaryFile() as err,
        subprocess.Popen(
            argv,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=NEUTRAL_DIRECTORY,
        ) as process,
    ):
        assert process.stdout is not None
        # A read blocks while git is silent: the deadline kills git, which ends the read.
        deadline = threading.Timer(timeout, process.kill)
        deadline.start()
        try:
            while chunk := process.stdout.read(CHUNK_BYTES):
                yield chunk
        finally:
            deadline.cancel()
            if process.poll() is None:
                process.kill()
        code = process.wait()
        if code != 0:
            raise GitError(argv, code, _tail(err))


def _tail(handle: IO[bytes]) -> str:
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - ERROR_MAX_BYTES))
    return handle.read().decode("utf-8", "replace")


def text(result: Result) -> str:
    return result.stdout.decode("utf-8", "replace").strip()
