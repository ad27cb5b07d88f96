"""Workspaces: the pure decisions behind ``agentchain workspace``.

A chain's repository is checked out once into a volume every step mounts; the
``agentchain workspace`` commands (run in pods, as the operator's image) do the git
I/O, and everything they decide is here, without I/O, so it can be tested
exhaustively:

* **names and places**: the branch a chain publishes to (``agentchain/<chain-id>``,
  a valid git ref name or an error), the ref a chain checks out (an issue: the
  repository's default branch; a pull request: its head commit), and the clone URL
  (``owner/name`` under a configurable git base URL, or a full ``http(s)`` URL; any
  other transport, ``ext::`` above all, is refused because git would run it);
* **the change summary** a step leaves for the next: git's ``--numstat -z`` and
  ``status -z`` records folded in one pass (linear, whatever the repository holds)
  into counts and a ``git diff --stat``-like text that lists files until a byte
  budget is spent and then says ``+N more files``. File names come from the
  repository, so they are untrusted: control and format characters are escaped
  (``\\x1b``), undecodable bytes too, and each name is cut to a bounded width;
* **publishing**: given the remote branch's commit and whether it is an ancestor of
  ours, push (with that commit as the lease), do nothing (already there), or refuse
  (someone else's branch: never rewritten); and how a failed push is classified;
* **reading HEAD** of a checkout from its files (``HEAD``, loose refs,
  ``packed-refs``), so the publisher never runs git inside the agent-writable
  repository, whose ``.git/config`` could name a command for git to run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

# -- exit codes of ``agentchain workspace`` ------------------------------------------------
EXIT_OK = 0
"""Done: cloned, already cloned, pushed, or the branch already holds our commit."""
EXIT_FAILED = 1
"""The workspace is unusable (not a checkout, no base recorded, a git error that retrying
will not fix)."""
EXIT_USAGE = 2
"""A bad flag, repository, ref or branch name (argparse's code too)."""
EXIT_REFUSED = 3
"""publish: the branch exists at a commit that is not ours nor an ancestor of ours."""
EXIT_DENIED = 4
"""The credential was refused or lacks the permission (401/403/404 from the server)."""
EXIT_TRANSIENT = 75
"""A network or server error (EX_TEMPFAIL): retrying later may succeed."""

BRANCH_PREFIX = "agentchain/"
DEFAULT_GIT_BASE_URL = "https://github.com/"
MAX_REF_LENGTH = 255
REPORT_MAX_BYTES = 4096
"""A ``report`` line is at most this many bytes of UTF-8, whatever the repository holds."""
STAT_BUDGET_BYTES = 3000
"""Bytes of the JSON-escaped ``stat`` text; the rest of the line is a few bounded fields."""
PATH_MAX_CHARS = 100
"""Characters of one file name shown in the stat text (long ones keep both ends)."""
RECORD_MAX_BYTES = 64 * 1024
"""A git record (one file's numstat or status) longer than this is cut (paths are shorter)."""
STAT_BAR_WIDTH = 20

_SHA = re.compile(r"[0-9a-f]{40}")
_OWNER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def is_sha(text: str) -> bool:
    """Whether ``text`` is a full, lower-case SHA-1 commit id."""
    return _SHA.fullmatch(text) is not None


# -- names and places ------------------------------------------------------------------------
def ref_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid branch name (``git check-ref-format --branch``), or None."""
    if not name or len(name) > MAX_REF_LENGTH:
        return f"a branch name has 1 to {MAX_REF_LENGTH} characters"
    if _REF_FORBIDDEN.search(name):
        return "a branch name has no spaces, control characters or any of ~^:?*[\\"
    if name.startswith(("-", "/")) or name.endswith(("/", ".")) or name == "@":
        return "a branch name does not start with - or /, nor end with / or ."
    if ".." in name or "//" in name or "@{" in name:
        return "a branch name has no .., // or @{"
    for component in name.split("/"):
        if component.startswith(".") or component.endswith(".lock"):
            return "no part of a branch name starts with . or ends with .lock"
    return None


def branch_name(chain_id: str, prefix: str = BRANCH_PREFIX) -> str:
    """The branch a chain publishes to: ``agentchain/<chain-id>``; ValueError if invalid."""
    name = f"{prefix}{chain_id}"
    problem = ref_name_problem(name)
    if problem is not None:
        raise ValueError(f"branch {name!r}: {problem}")
    return name


def checkout_ref(
    subject: Literal["issue", "pull_request"] | None,
    head_sha: str | None = None,
    number: int | None = None,
) -> str | None:
    """What a chain checks out: None means the repository's default branch.

    An issue (or any event without a pull request) works from the default branch; a
    pull request from its head: the commit when the event names it (fetchable by id
    from GitHub, also for a fork's pull request), else GitHub's ``refs/pull/N/head``.
    """
    if subject != "pull_request":
        return None
    if head_sha is not None and is_sha(head_sha):
        return head_sha
    if number is not None and number > 0:
        return f"refs/pull/{number}/head"
    return None


def ref_problem(ref: str) -> str | None:
    """Why ``ref`` (a commit id, a branch name or a full ``refs/...`` name) is unusable."""
    if is_sha(ref):
        return None
    problem = ref_name_problem(ref.removeprefix("refs/"))
    return None if problem is None else f"ref {ref!r}: {problem}"


def repository_url(repository: str, git_base_url: str = DEFAULT_GIT_BASE_URL) -> str:
    """The clone URL of ``owner/name`` under ``git_base_url``, or a full http(s) URL as is.

    Only http(s) is accepted: git runs ``ext::`` URLs as commands and would offer
    credentials to whatever ``file://`` or ssh names. Credentials in a URL are refused
    too: they would be written into ``.git/config``, where the agent could read them.
    """
    if _OWNER_NAME.fullmatch(repository) and ".." not in repository:
        owner, name = repository.split("/")
        if name in (".", "..") or owner in (".", ".."):
            raise ValueError(f"repository {repository!r}: not owner/name")
        _check_url(git_base_url)
        return f"{git_base_url.rstrip('/')}/{owner}/{name.removesuffix('.git')}.git"
    _check_url(repository)
    return repository


def _check_url(url: str) -> None:
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise ValueError(f"git URL {url!r}: spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"git URL {url!r}: only http(s)://host/... URLs (or owner/name)")
    if parts.username is not None or parts.password is not None:
        raise ValueError("git URL: credentials do not go in the URL (use a token file)")
    if parts.query or parts.fragment:
        raise ValueError(f"git URL {url!r}: no query or fragment")


# -- the change summary -------------------------------------------------------------------------
@dataclass(frozen=True)
class FileStat:
    """One line of ``git diff --numstat``: None counts are a binary file."""

    path: str
    added: int | None
    deleted: int | None


def split_records(chunks: Iterable[bytes], max_bytes: int = RECORD_MAX_BYTES) -> Iterator[bytes]:
    """NUL-terminated records from ``chunks`` of any size, each cut to ``max_bytes``.

    Linear: every byte is looked at once (a search resumes where the last ended), and a
    record longer than the cap keeps only its first ``max_bytes`` in memory.
    """
    pending = bytearray()
    overflow = False
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\0", start)) != -1:
            if not overflow:
                pending += chunk[start : min(end, start + max_bytes - len(pending))]
            yield bytes(pending)
            pending.clear()
            overflow = False
            start = end + 1
        if not overflow:
            room = max_bytes - len(pending)
            pending += chunk[start : start + room]
            overflow = len(chunk) - start > room
    if pending:
        yield bytes(pending)


def parse_numstat(record: bytes) -> FileStat | None:
    """``<added>\\t<deleted>\\t<path>`` (``-`` counts for binary files), or None if garbled."""
    added, tab1, rest = record.partition(b"\t")
    deleted, tab2, path = rest.partition(b"\t")
    if not (tab1 and tab2 and path):
        return None
    counts = (_count(added), _count(deleted))
    if (counts[0] is None) != (counts[1] is None) or -1 in counts:
        return None
    return FileStat(_decode(path), counts[0], counts[1])


def _count(text: bytes) -> int | None:
    if text == b"-":
        return None
    return int(text) if text.isdigit() and len(text) <= 12 else -1


def status_kind(record: bytes) -> Literal["untracked", "changed"] | None:
    """``git status --porcelain -z --no-renames``: ``??`` untracked, other codes changed."""
    if len(record) < 4 or record[2:3] != b" ":
        return None
    return "untracked" if record[:2] == b"??" else "changed"


def display_path(path: str, max_chars: int = PATH_MAX_CHARS) -> str:
    """``path`` safe to show: what is not printable escaped (``\\x1b``, ``\\u202e``; a
    backslash doubled, so the escaping reverses), cut to ``max_chars`` keeping both ends."""
    if len(path) > max_chars:
        keep = max_chars - 1
        path = path[: keep - keep // 2] + "…" + path[len(path) - keep // 2 :]
    return "".join(_escape(c) for c in path)


def _escape(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if not char.isprintable():  # Control, format, unassigned, separators but " ".
        code = ord(char)
        if code < 0x100:
            return f"\\x{code:02x}"
        return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    return char


def _decode(raw: bytes) -> str:
    # Invalid UTF-8 bytes come out as \\xNN text, never as lone surrogates.
    return raw.decode("utf-8", "backslashreplace")


@dataclass
class Stat:
    """What ``git diff --numstat`` said, folded: totals over every file, the stat text
    over as many as fit the budget."""

    budget: int = STAT_BUDGET_BYTES
    files: int = 0
    insertions: int = 0
    deletions: int = 0
    lines: list[str] = field(default_factory=list)
    used: int = 0
    more: int = 0

    def add(self, stat: FileStat) -> None:
        self.files += 1
        self.insertions += stat.added or 0
        self.deletions += stat.deleted or 0
        line = stat_line(stat)
        cost = _json_bytes(line) + 2  # The "\n" escape that ends it.
        if self.more == 0 and self.used + cost <= self.budget - _MORE_RESERVE:
            self.lines.append(line)
            self.used += cost
        else:
            self.more += 1

    def text(self) -> str:
        tail = [f" +{self.more} more files"] if self.more else []
        return "".join(f"{line}\n" for line in [*self.lines, *tail])


_MORE_RESERVE = 40  # Room for " +N more files\n", N up to 20 digits.


def stat_line(stat: FileStat) -> str:
    """`` path | 5 ++---`` as ``git diff --stat`` shows it (``Bin`` for a binary file)."""
    name = display_path(stat.path)
    if stat.added is None or stat.deleted is None:
        return f" {name} | Bin"
    total = stat.added + stat.deleted
    if total <= STAT_BAR_WIDTH:
        plus, minus = stat.added, stat.deleted
    else:
        plus = (stat.added * STAT_BAR_WIDTH) // total
        minus = STAT_BAR_WIDTH - plus if stat.deleted else 0
        plus = STAT_BAR_WIDTH - minus
    return f" {name} | {total} {'+' * plus}{'-' * minus}"


def _json_bytes(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def fold_stats(records: Iterable[bytes], budget: int = STAT_BUDGET_BYTES) -> Stat:
    """The :class:`Stat` of numstat records (garbled ones skipped)."""
    stat = Stat(budget=budget)
    for record in records:
        parsed = parse_numstat(record)
        if parsed is not None:
            stat.add(parsed)
    return stat


def count_status(records: Iterable[bytes]) -> tuple[int, int]:
    """``(changed, untracked)`` files from ``git status -z`` records."""
    changed = untracked = 0
    for record in records:
        kind = status_kind(record)
        changed += kind == "changed"
        untracked += kind == "untracked"
    return changed, untracked


def report_line(
    *, base: str, head: str, commits: int, stat: Stat, uncommitted: int, untracked: int
) -> str:
    """The one JSON line ``agentchain workspace report`` prints (≤ REPORT_MAX_BYTES)."""
    line = json.dumps(
        {
            "base": base,
            "head": head,
            "committed": head != base,
            "commits": commits,
            "files_changed": stat.files,
            "insertions": stat.insertions,
            "deletions": stat.deletions,
            "stat": stat.text(),
            "more_files": stat.more,
            "uncommitted": uncommitted,
            "untracked": untracked,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    assert len(line.encode("utf-8")) <= REPORT_MAX_BYTES, "the budget arithmetic is wrong"
    return line


# -- publishing -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Push:
    """Push ``head`` with the lease ``expected`` (``""``: the branch must not exist yet)."""

    expected: str


@dataclass(frozen=True)
class Already:
    """The branch already holds ``head``: a publish that crashed after pushing, or a rerun;
    or a later publish of the same workspace pushed a descendant of it first (a step's
    publish that the chain's final one overtook, ``publishAfterStep``)."""


@dataclass(frozen=True)
class Refuse:
    """The branch holds a commit that is not ours nor an ancestor: someone else's work."""

    remote: str


PublishStep = Push | Already | Refuse


def publish_step(
    head: str, remote: str | None, remote_is_ancestor: bool, head_is_ancestor: bool = False
) -> PublishStep:
    """What to do about the branch at ``remote`` (None: absent) given our ``head``
    (``head_is_ancestor``: the branch's commit, one of the workspace's own, has ``head``
    in its history).

    Never a rewrite: the only push is a creation or a fast-forward, and its lease is
    the commit just seen, so a writer that moved the branch since makes it fail.
    """
    if remote is None:
        return Push(expected="")
    if remote == head or head_is_ancestor:
        return Already()
    if remote_is_ancestor:
        return Push(expected=remote)
    return Refuse(remote=remote)


PushFailure = Literal["stale", "denied", "transient", "rejected"]

_DENIED_MARKS = (
    "authentication failed",
    "the requested url returned error: 401",
    "the requested url returned error: 403",
    "the requested url returned error: 404",
    "repository not found",
    "permission to",
    "could not read username",
    "could not read password",
)
_TRANSIENT_MARKS = (
    "could not resolve host",
    "failed to connect",
    "connection refused",
    "connection reset",
    "connection timed out",
    "operation timed out",
    "the requested url returned error: 5",
    "the remote end hung up",
    "rpc failed",
    "http/2 stream",
    "early eof",
    "ssl",
)


def push_failure(stderr: str) -> PushFailure:
    """Why a git network command failed, from its (bounded) stderr.

    ``stale``: the lease did not hold (someone moved the branch); ``denied``: the
    credential is missing, refused or lacks the permission; ``transient``: the network
    or the server; ``rejected``: anything else the server refused (a hook, a protected
    branch), which retrying will not change.
    """
    text = stderr.lower()
    if "stale info" in text:
        return "stale"
    if any(mark in text for mark in _DENIED_MARKS):
        return "denied"
    if any(mark in text for mark in _TRANSIENT_MARKS):
        return "transient"
    return "rejected"


def exit_code(failure: PushFailure) -> int:
    return {"denied": EXIT_DENIED, "transient": EXIT_TRANSIENT}.get(failure, EXIT_FAILED)


# -- reading HEAD from a checkout's files ---------------------------------------------------------
def parse_head(text: str) -> tuple[Literal["sha", "ref"], str] | None:
    """A ``HEAD`` (or loose ref) file: ``("sha", id)``, ``("ref", "refs/...")`` or None."""
    line = text.strip()
    if is_sha(line):
        return ("sha", line)
    target = line.removeprefix("ref:").strip() if line.startswith("ref:") else None
    if target and target.startswith("refs/") and ref_name_problem(target[5:]) is None:
        return ("ref", target)
    return None


def packed_ref(lines: Iterable[str], ref: str) -> str | None:
    """The commit ``ref`` names in a ``packed-refs`` file's lines (peeled lines skipped)."""
    for line in lines:
        sha, _, name = line.rstrip("\n").partition(" ")
        if name == ref and is_sha(sha):
            return sha
    return None
