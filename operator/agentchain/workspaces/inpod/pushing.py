"""``agentchain workspace publish``: the agent's HEAD onto ``agentchain/<chain-id>``, once.

Exactly once across crashes, without a record of our own: the remote branch is the
record. It is read first (``ls-remote``); if it already holds our commit, a publisher
that crashed after pushing (or a rerun) is done; if it holds an ancestor of ours or
does not exist, we push with ``--force-with-lease=<branch>:<what we saw>`` (empty:
must not exist), so a writer that moved the branch in between makes the push fail
rather than be overwritten, and we look again; anything else is someone else's
branch and is refused, unless it is a commit of this very workspace that descends from
ours (a later publish of the same chain landed first: ``already``). A push is therefore
always a creation or a fast-forward: no history is ever rewritten. The decision is
``workspaces.rules.checkouts.publish_step``.

Git runs on the sealed copy of the agent's repository (``gitreading.py``), so nothing the
agent wrote into ``.git/`` runs in this container, which holds the push token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentchain.workspaces.inpod import gitreading, gitting
from agentchain.workspaces.inpod.layout import Layout
from agentchain.workspaces.rules import checkouts

ATTEMPTS = 3
"""Rounds of look-then-push when the branch moves under us (a lost lease)."""
ERROR_MAX_CHARS = 600


@dataclass(frozen=True)
class Outcome:
    code: int
    fields: dict[str, Any]


def publish(layout: Layout, url: str, branch: str, env: Mapping[str, str]) -> Outcome:
    """Push the workspace's HEAD to ``branch`` of ``url`` (``env`` holds the credential)."""
    head = gitreading.head_commit(layout.repo)
    recorded = layout.read_base()
    done: dict[str, Any] = {"branch": branch, "sha": head}
    if recorded is not None and recorded["base"] == head:
        return Outcome(checkouts.EXIT_OK, {"outcome": "unchanged", **done})
    ref = f"refs/heads/{branch}"
    with gitreading.sealed(layout.repo, env) as sealed:
        for _ in range(ATTEMPTS):
            listed = gitting.run(["ls-remote", url, ref], env, check=False)
            if listed.code != 0:
                return _failed(listed, done)
            remote = _listed_sha(listed, ref)
            ancestor = remote is not None and _is_ancestor(sealed, env, remote, head)
            # Ours already, further on: the branch's commit is in this workspace (a later
            # publish of it landed first) and descends from our HEAD.
            ahead = remote is not None and not ancestor and _is_ancestor(sealed, env, head, remote)
            step = checkouts.publish_step(head, remote, ancestor, ahead)
            if isinstance(step, checkouts.Already):
                return Outcome(checkouts.EXIT_OK, {"outcome": "already", **done})
            if isinstance(step, checkouts.Refuse):
                return Outcome(checkouts.EXIT_REFUSED,
                               {"outcome": "refused", "remote": step.remote, **done})  # fmt: skip
            pushed = gitting.run(
                ["--git-dir", str(sealed), "push", "--porcelain", "--no-verify",
                 f"--force-with-lease={ref}:{step.expected}", url, f"{head}:{ref}"],
                env, check=False,
            )  # fmt: skip
            if pushed.code == 0:
                return Outcome(checkouts.EXIT_OK, {"outcome": "pushed", **done})
            if checkouts.push_failure(pushed.stderr + gitting.text(pushed)) != "stale":
                return _failed(pushed, done)
    return Outcome(checkouts.EXIT_TRANSIENT,
                   {"outcome": "transient", "error": "the branch kept moving", **done})  # fmt: skip


def _failed(result: gitting.Result, done: dict[str, Any]) -> Outcome:
    said = result.stderr + "\n" + gitting.text(result)
    failure = checkouts.push_failure(said)
    message = checkouts.display_path(said.strip(), ERROR_MAX_CHARS)
    return Outcome(checkouts.exit_code(failure), {"outcome": failure, "error": message, **done})


def _listed_sha(listed: gitting.Result, ref: str) -> str | None:
    for line in gitting.text(listed).splitlines():
        sha, _, name = line.partition("\t")
        if name == ref and checkouts.is_sha(sha):
            return sha
    return None


def _is_ancestor(sealed: Path, env: Mapping[str, str], older: str, newer: str) -> bool:
    # A commit we do not have cannot be an ancestor of ours: every ancestor is here
    # (down to the shallow boundary, past which we refuse rather than guess); nor can
    # one we do not have descend from ours, as far as we know: someone else's, refused.
    git = ["--git-dir", str(sealed)]
    for sha in (older, newer):
        if gitting.run([*git, "cat-file", "-e", f"{sha}^{{commit}}"], env, check=False).code:
            return False
    return gitting.run([*git, "merge-base", "--is-ancestor", older, newer], env,
                       check=False).code == 0  # fmt: skip
