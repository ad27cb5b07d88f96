"""``agentchain workspace report``: what the steps so far changed, as one bounded JSON line.

Run on the sealed copy (``gitreading.py``): the commits are counted from the base to the
agent's HEAD, the ``--numstat`` of the base against the working tree (committed and
uncommitted changes of tracked files) is folded into the stat text, and
``git status`` against a fresh index of HEAD counts changed and untracked files (a file
the agent staged but did not commit counts as untracked: the agent's index is its
own). Both outputs are streamed and folded record by record
(``workspaces.rules.checkouts``), so the line stays within 4 KiB and the work linear.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentchain.workspaces.inpod import gitreading, gitting
from agentchain.workspaces.inpod.layout import Layout, WorkspaceError
from agentchain.workspaces.rules import checkouts


def report(layout: Layout, env: Mapping[str, str]) -> str:
    """The JSON line (``workspaces.rules.checkouts.report_line``)."""
    recorded = layout.read_base()
    if recorded is None:
        raise WorkspaceError(f"no base recorded in {layout.base_file}: run prepare first")
    base = str(recorded["base"])
    head = gitreading.head_commit(layout.repo)
    with gitreading.sealed(layout.repo, env) as sealed:
        tree = _tree_env(sealed, layout.repo, env)
        _require_commits(sealed, env, base, head)
        counted = gitting.run(["--git-dir", str(sealed), "rev-list", "--count", f"{base}..{head}"],
                              env)  # fmt: skip
        # The sealed HEAD and index at the agent's HEAD: status compares against both.
        gitting.run(["--git-dir", str(sealed), "update-ref", "--no-deref", "HEAD", head], env)
        gitting.run(["--git-dir", str(sealed), "read-tree", head], tree)
        numstat = gitting.stream(
            ["--git-dir", str(sealed), "--work-tree", str(layout.repo), "diff", "--numstat",
             "-z", "--no-renames", "--no-ext-diff", "--no-textconv", base, "--"],
            tree,
        )  # fmt: skip
        stat = checkouts.fold_stats(checkouts.split_records(numstat))
        status = gitting.stream(
            ["--git-dir", str(sealed), "--work-tree", str(layout.repo), "status",
             "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all"],
            tree,
        )  # fmt: skip
        changed, untracked = checkouts.count_status(checkouts.split_records(status))
    return checkouts.report_line(
        base=base,
        head=head,
        commits=int(gitting.text(counted) or 0),
        stat=stat,
        uncommitted=changed,
        untracked=untracked,
    )


def _tree_env(sealed: Path, repo: Path, env: Mapping[str, str]) -> dict[str, str]:
    # The index lives in the sealed directory: the agent's index is never read or written.
    return {**env, "GIT_INDEX_FILE": str(sealed / "report-index")}


def _require_commits(sealed: Path, env: Mapping[str, str], *commits: str) -> None:
    for commit in commits:
        found = gitting.run(["--git-dir", str(sealed), "cat-file", "-e", f"{commit}^{{commit}}"],
                            env, check=False)  # fmt: skip
        if found.code != 0:
            raise WorkspaceError(f"commit {commit} is not in the workspace's repository")
