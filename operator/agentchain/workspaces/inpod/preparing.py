"""``agentchain workspace prepare``: the chain's checkout, made once.

The base record (``.agentchain/base.json``) is written last, so it says the checkout is
complete: with it, ``prepare`` does nothing (a later step, or a rerun). Without it,
whatever is there is a clone that did not finish (the init container was killed
mid-clone) and is removed before starting over.

The clone is made in the container's own temporary directory, not on the volume: a job
of the same chain (a delegated one) may already be running and writing there, and git
honours a repository's own config (filter drivers, ``url.insteadOf``, ``http.proxy``,
``http.sslVerify``...), so a clone on the volume could be redirected, or made to run a
command, by whoever wrote into it meanwhile. Every git command runs in that private
repository, which has our config only; once checked out, it is moved to
``.agentchain/staging`` (a copy: another file system) and renamed to ``repo/``. What is
written into it after that is the agents' to write anyway; nothing of ours runs git
there again (``sealing.py``).

The clone fetches exactly the ref (a branch, a full ref or a commit id), with
``--depth`` if asked (0, the default: the whole history, which agents read with
``git log`` and which needs no credential later), and checks it out on a local branch
(the publish branch when given, so the agent commits on it). The remote ``origin`` is
the URL without credentials; the token is only in git's environment.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentchain.workspaces.inpod import gitting
from agentchain.workspaces.inpod.layout import Layout, WorkspaceError
from agentchain.workspaces.rules import checkouts

LOCAL_BRANCH = "agentchain/workspace"
"""The local branch when checking out a commit id and no branch was given."""


@dataclass(frozen=True)
class Checkout:
    url: str
    ref: str | None
    branch: str | None
    depth: int


def prepare(layout: Layout, checkout: Checkout, env: Mapping[str, str]) -> dict[str, Any]:
    """The checkout (``outcome``: ``cloned`` or ``present``) and its base commit."""
    recorded = layout.read_base()
    if recorded is not None and (layout.repo / ".git").is_dir():
        return {**recorded, "outcome": "present"}
    for leftover in (layout.repo, layout.staging, layout.base_file):
        _remove(leftover)
    layout.meta.mkdir(parents=True, exist_ok=True)
    ref = checkout.ref or _default_branch(checkout.url, env)
    local = checkout.branch or _branch_of(ref) or LOCAL_BRANCH
    with tempfile.TemporaryDirectory(prefix="agentchain-clone-") as scratch:
        private = Path(scratch) / "repo"
        _clone(private, checkout, ref, local, env)
        base = gitting.text(gitting.run(["-C", str(private), "rev-parse", "HEAD"], env))
        # Whatever appeared at the staging path meanwhile is not ours: the move must
        # not land inside it.
        _remove(layout.staging)
        shutil.move(private, layout.staging)
    layout.staging.replace(layout.repo)
    record = {"base": base, "repository": checkout.url, "ref": ref, "branch": local}
    layout.write_base(record)
    return {**record, "outcome": "cloned"}


def _clone(target: Path, checkout: Checkout, ref: str, local: str, env: Mapping[str, str]) -> None:
    # Group-writable files: steps of a chain may run as different users of one group.
    os.umask(0o002)
    gitting.run(["init", "--quiet", "--shared=group", str(target)], env)
    git = ["-C", str(target)]
    gitting.run([*git, "remote", "add", "origin", checkout.url], env)
    depth = [f"--depth={checkout.depth}"] if checkout.depth > 0 else []
    branch = _branch_of(ref)
    spec = f"+refs/heads/{branch}:refs/remotes/origin/{branch}" if branch else ref
    gitting.run([*git, "fetch", "--quiet", "--no-tags", *depth, "origin", spec], env)
    gitting.run([*git, "checkout", "--quiet", "-B", local, "FETCH_HEAD"], env)


def _default_branch(url: str, env: Mapping[str, str]) -> str:
    """The branch the remote's HEAD names (its default branch)."""
    listed = gitting.text(gitting.run(["ls-remote", "--symref", url, "HEAD"], env))
    for line in listed.splitlines():
        target, _, name = line.partition("\t")
        if name == "HEAD" and target.startswith("ref: refs/heads/"):
            return target.removeprefix("ref: refs/heads/")
    raise WorkspaceError(f"{url} has no default branch (an empty repository?)")


def _branch_of(ref: str) -> str | None:
    """The branch name of a branch ref (``main``, ``refs/heads/main``), else None."""
    if checkouts.is_sha(ref) or (ref.startswith("refs/") and not ref.startswith("refs/heads/")):
        return None
    return ref.removeprefix("refs/heads/")


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
