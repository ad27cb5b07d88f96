"""Reading an agent's repository without running git inside it.

After a step ran, everything in the workspace is the agent's: its ``.git/config``
may set ``core.fsmonitor``, a filter driver or a pager to a command of its choice,
which git would run on ``git status`` or ``git diff`` in that repository, in a
container that (for ``publish``) holds a push token. So ``report`` and ``publish``
never run git with the agent's repository as the repository. They read its ``HEAD``
from the files (``workspaces.rules.checkouts.parse_head``), and run git on a *sealed* copy: a
fresh bare repository in the container's own temporary directory, with our config
only, that borrows the agent's objects through ``objects/info/alternates`` (objects
are content-addressed data; nothing there is run) and its ``shallow`` list. The
working tree is read through ``--work-tree``: its ``.gitattributes`` can only name
drivers, and the sealed repository defines none.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from agentchain.workspaces.inpod import gitting
from agentchain.workspaces.inpod.layout import WorkspaceError
from agentchain.workspaces.rules import checkouts

SMALL_FILE_BYTES = 4096
SYMREF_DEPTH = 5


@contextmanager
def sealed(repo: Path, env: Mapping[str, str]) -> Iterator[Path]:
    """A bare git directory outside the workspace that sees ``repo``'s objects."""
    git_dir = _git_dir(repo)
    objects = git_dir / "objects"
    with tempfile.TemporaryDirectory(prefix="agentchain-sealed-") as scratch:
        sealed_dir = Path(scratch) / "git"
        gitting.run(["init", "--quiet", "--bare", str(sealed_dir)], env)
        (sealed_dir / "objects" / "info" / "alternates").write_text(f"{objects.resolve()}\n")
        shallow = _shallow_commits(git_dir / "shallow")
        if shallow:
            (sealed_dir / "shallow").write_text("".join(f"{sha}\n" for sha in shallow))
        yield sealed_dir


def head_commit(repo: Path) -> str:
    """The commit ``repo``'s HEAD names, read from its files (symbolic refs followed)."""
    git_dir = _git_dir(repo)
    parsed = checkouts.parse_head(_small(git_dir / "HEAD"))
    for _ in range(SYMREF_DEPTH):
        if parsed is None:
            break
        kind, value = parsed
        if kind == "sha":
            return value
        loose = checkouts.parse_head(_small(git_dir / value))
        parsed = loose or _packed(git_dir / "packed-refs", value)
    raise WorkspaceError("the workspace's HEAD names no commit (nothing checked out or committed)")


def _git_dir(repo: Path) -> Path:
    git_dir = repo / ".git"
    if git_dir.is_symlink() or not (git_dir / "objects").is_dir():
        raise WorkspaceError(f"{repo} is not a git checkout (no .git/objects directory)")
    return git_dir


def _packed(path: Path, ref: str) -> tuple[Literal["sha", "ref"], str] | None:
    if not path.is_file():
        return None
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            sha = checkouts.packed_ref(fh, ref)
    except OSError:
        return None
    return ("sha", sha) if sha else None


def _small(path: Path) -> str:
    # Regular files only: a FIFO the agent put there would block the read forever.
    if not path.is_file():
        return ""
    try:
        with path.open("rb") as fh:
            return fh.read(SMALL_FILE_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _shallow_commits(path: Path) -> list[str]:
    if not path.is_file():
        return []
    try:
        with path.open(encoding="ascii", errors="replace") as fh:
            return [line.strip() for line in fh if checkouts.is_sha(line.strip())]
    except OSError:
        return []
