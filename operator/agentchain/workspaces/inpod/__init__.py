"""The git side of workspaces: ``agentchain workspace prepare|report|publish``.

These commands run inside pods, as the operator's own image, on the chain's workspace
volume; the engine builds the pods (init container for ``prepare``, a step for
``report`` and ``publish``). Git runs as a subprocess with argv lists, never a shell;
the decisions are pure functions in ``workspaces/rules/checkouts.py``.

Interface (what pod specs call)
-------------------------------
Common: ``--workspace PATH`` (default ``$AGENT_WORKSPACE``, else ``/workspace``): the
volume's mount path. The working tree is ``PATH/repo``; ``PATH/.agentchain/`` holds
agentchain's bookkeeping (``base.json``), outside the working tree. ``/tmp`` must be
writable (a sealed copy of git's metadata is made there; objects are not copied).

Remote flags (prepare, publish): ``--repository owner/name`` (under ``--git-base-url``,
default ``$AGENTCHAIN_GIT_BASE_URL``, else ``https://github.com/``) or a full
``http(s)://`` git URL (no credentials in it); ``--token-file FILE`` (default
``$AGENTCHAIN_GIT_TOKEN_FILE``; none: anonymous) holding the token, sent as HTTP Basic
``<--token-user>:<token>`` (default user ``x-access-token``, GitHub's) through git's
environment only: never in a URL, ``.git/config`` or any file of the workspace.

* ``agentchain workspace prepare --repository R [--ref REF] [--branch B] [--depth N]``:
  clones once. ``REF``: a branch, a ``refs/...`` name or a 40-hex commit id (default:
  the remote's default branch; ``workspaces.rules.checkouts.checkout_ref`` picks it from the
  event). ``B``: the local branch checked out (default: REF's branch, or
  ``agentchain/workspace`` for a commit). ``N``: shallow depth, 0 (default) = all.
  Idempotent: with ``.agentchain/base.json`` present it does nothing; a half-done clone
  is removed and redone. Prints
  ``{"base": SHA, "repository": URL, "ref": REF, "branch": B, "outcome": "cloned"|"present"}``.
* ``agentchain workspace report``: prints one JSON line of at most 4096 bytes:
  ``{"base": SHA, "head": SHA, "committed": bool (HEAD moved from base), "commits": int
  (base..HEAD), "files_changed": int, "insertions": int, "deletions": int, "stat": str
  (git diff --stat-like lines of base vs the working tree, "\\n"-terminated, file names
  escaped and cut, ending " +N more files" when cut), "more_files": int,
  "uncommitted": int (tracked files differing from HEAD), "untracked": int}``.
* ``agentchain workspace publish --repository R --branch agentchain/<chain-id>``: pushes
  HEAD to the branch, exactly once across crashes, never rewriting it. Prints
  ``{"outcome": O, "branch": B, "sha": HEAD, ...}`` with O one of ``pushed``,
  ``already`` (the branch holds HEAD: a rerun), ``unchanged`` (HEAD is the base: nothing
  to publish, no push) → exit 0; ``refused`` (+ ``"remote": SHA``: the branch holds a
  commit that is not an ancestor of HEAD) → exit 3; ``denied`` (credential refused or
  lacking ``contents: write``; + ``"error"``) → exit 4; ``transient`` (network/server;
  retry) → exit 75; ``rejected`` (e.g. a protected branch) → exit 1.

Every failure prints ``{"outcome": "usage"|"failed"|"denied"|"transient"|"rejected",
"error": "..."}`` (exit 2, 1, 4, 75, 1). The agent's container needs nothing of ours;
if it runs as another user than ``prepare``, give it git's ``safe.directory`` for
``/workspace/repo`` through its environment (``GIT_CONFIG_COUNT=1``,
``GIT_CONFIG_KEY_0=safe.directory``, ``GIT_CONFIG_VALUE_0=/workspace/repo``) and a
shared group (``fsGroup``): ``prepare`` makes the repository group-writable.
"""
