"""The pure side of workspaces (issue 18): names, places, the change summary, publishing.

Aspects covered:
- branch names: ``agentchain/<chain-id>``; the validity rule agrees with
  ``git check-ref-format --branch`` on a matrix and on generated names;
- the ref a chain checks out: issues the default branch, pull requests their head
  commit (or ``refs/pull/N/head``); refs are branch names, full refs or commit ids;
- clone URLs: ``owner/name`` under the base URL; full http(s) URLs as they are; every
  other transport (``ext::`` runs commands), credentials in a URL, queries refused;
- records: splitting git's NUL-separated output gives the same records however it is
  chunked, each capped, in linear time;
- numstat and status records parsed (binary files, garbled lines);
- file names shown: control, format and separator characters escaped reversibly, long
  names cut keeping both ends;
- the report line: valid JSON within 4096 bytes for any files, totals over every file,
  the stat lines a prefix of the files in order plus ``+N more files``;
- publishing: push only onto nothing or an ancestor (with it as the lease), already
  there is done, anything else refused; git's failure messages classified;
- HEAD read from a checkout's files: detached, symbolic, packed refs.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentchain.workspaces.rules import checkouts as ws

SHA_A = "a" * 40
SHA_B = "b" * 40


# -- branch names -----------------------------------------------------------------------------
def git_accepts_branch(name: str) -> bool:
    """git's rule for ``refs/heads/<name>``, plus ``--branch``'s no leading ``-`` (``--branch``
    itself would expand ``@`` to the current branch; ``@`` alone is refused by us)."""
    done = subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], cwd="/",
                          capture_output=True, check=False)  # fmt: skip
    return done.returncode == 0 and not name.startswith("-") and name != "@"


BRANCH_CASES = [
    "agentchain/chain-1", "main", "feature/x.y", "a/b/c", "-x", "a..b", "a//b", "a/", "a.",
    "a.lock", "a/.b", ".a", "a b", "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", "a\\b", "a@{b",
    "@", "a\x7fb", "a\tb", "", "x" * 255, "x" * 256, "a/b.lock/c", "ü/ñ", "@a", "a@b",
]  # fmt: skip


@pytest.mark.parametrize("name", BRANCH_CASES)
def test_branch_rule_matches_git(name: str) -> None:
    if len(name) > ws.MAX_REF_LENGTH:
        assert ws.ref_name_problem(name) is not None  # Ours is stricter: a bound.
        return
    assert (ws.ref_name_problem(name) is None) == git_accepts_branch(name), name


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab./-_@{}~^:.lock \\*[?"), min_size=1, max_size=12))
def test_branch_rule_matches_git_on_generated_names(name: str) -> None:
    assert (ws.ref_name_problem(name) is None) == git_accepts_branch(name), name


def test_branch_name_from_chain_id() -> None:
    assert ws.branch_name("c-0123abc") == "agentchain/c-0123abc"
    assert ws.branch_name("x", prefix="bots/") == "bots/x"
    for bad in ("a..b", "a b", "", "x.lock", "x/"):
        with pytest.raises(ValueError, match="branch"):
            ws.branch_name(bad, prefix="" if bad == "" else "agentchain/")


@given(st.from_regex(r"\A[A-Za-z0-9]([-A-Za-z0-9_.]{0,38}[A-Za-z0-9])?\Z"))
def test_every_chain_id_label_makes_a_valid_branch(chain_id: str) -> None:
    if ".." in chain_id or chain_id.endswith(".lock"):
        with pytest.raises(ValueError):
            ws.branch_name(chain_id)
        return
    assert ws.ref_name_problem(ws.branch_name(chain_id)) is None


# -- refs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("subject", "sha", "number", "ref"),
    [
        ("issue", None, 7, None),
        (None, SHA_A, None, None),
        ("issue", SHA_A, 7, None),
        ("pull_request", SHA_A, 7, SHA_A),
        ("pull_request", None, 7, "refs/pull/7/head"),
        ("pull_request", "not-a-sha", 7, "refs/pull/7/head"),
        ("pull_request", "A" * 40, None, None),
        ("pull_request", None, 0, None),
    ],
)
def test_checkout_ref(
    subject: str | None, sha: str | None, number: int | None, ref: str | None
) -> None:
    assert ws.checkout_ref(subject, sha, number) == ref  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ref", "ok"),
    [("main", True), ("refs/heads/main", True), ("refs/pull/3/head", True), (SHA_A, True),
     ("a..b", False), ("refs/", False), ("-main", False), ("main:evil", False), ("", False)],
)  # fmt: skip
def test_ref_problem(ref: str, ok: bool) -> None:
    assert (ws.ref_problem(ref) is None) is ok


# -- URLs --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("repository", "base", "url"),
    [
        ("acme/widgets", "https://github.com/", "https://github.com/acme/widgets.git"),
        ("acme/widgets.git", "https://github.com", "https://github.com/acme/widgets.git"),
        ("Acme/my.repo_1", "http://127.0.0.1:8/git/", "http://127.0.0.1:8/git/Acme/my.repo_1.git"),
        ("https://gitlab.example/g/s/p.git", "https://github.com/", "https://gitlab.example/g/s/p.git"),
    ],
)  # fmt: skip
def test_repository_url(repository: str, base: str, url: str) -> None:
    assert ws.repository_url(repository, base) == url


@pytest.mark.parametrize(
    "repository",
    ["ext::sh -c touch% /tmp/x", "file:///etc", "ssh://git@host/a/b", "git@host:a/b.git",
     "https://user:pw@host/a.git", "https://tok@host/a.git", "https://host/a.git?x=1",
     "https://host/a.git#f", "https:///a.git", "acme/../x", "../x", "a/b/c", "a/ b",
     "https://host/a\nb", "", "acme/.."],
)  # fmt: skip
def test_repository_url_refusals(repository: str) -> None:
    with pytest.raises(ValueError):
        ws.repository_url(repository)


def test_base_url_is_checked_too() -> None:
    with pytest.raises(ValueError):
        ws.repository_url("acme/widgets", "ext::sh")


@given(st.text(max_size=80), st.text(max_size=40))
def test_a_url_is_http_without_credentials_or_refused(repository: str, base: str) -> None:
    try:
        url = ws.repository_url(repository, base)
    except ValueError:
        return
    assert re.match(r"https?://[^/@\s]+/", url), url


# -- records ----------------------------------------------------------------------------------
def _reference_split(data: bytes, cap: int) -> list[bytes]:
    parts = data.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    return [p[:cap] for p in parts]


@given(st.binary(max_size=400), st.lists(st.integers(1, 50), max_size=40), st.integers(1, 30))
def test_splitting_ignores_how_output_is_chunked(data: bytes, cuts: list[int], cap: int) -> None:
    data = data.replace(b"\1", b"\0")
    chunks, offset = [], 0
    for cut in cuts:
        chunks.append(data[offset : offset + cut])
        offset += cut
    chunks.append(data[offset:])
    assert list(ws.split_records(chunks, cap)) == _reference_split(data, cap)


def test_splitting_is_linear_and_capped() -> None:
    started = time.monotonic()
    one = list(ws.split_records([b"x" * (8 << 20)], 100))
    tiny = list(ws.split_records([b"y"] * 200_000 + [b"\0"] * 100_000, 100))
    assert one == [b"x" * 100] and tiny[0] == b"y" * 100 and len(tiny) == 100_000
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("record", "parsed"),
    [
        (b"3\t1\tsrc/a.py", ws.FileStat("src/a.py", 3, 1)),
        (b"-\t-\timg.png", ws.FileStat("img.png", None, None)),
        (b"0\t0\ta\tb", ws.FileStat("a\tb", 0, 0)),
        (b"1\t1\t\xff\xfe", ws.FileStat("\\xff\\xfe", 1, 1)),
        (b"-\t1\tx", None), (b"1\t1\t", None), (b"x\t1\tp", None), (b"1\tp", None),
        (b"", None), (b"1" * 13 + b"\t1\tp", None),
    ],
)  # fmt: skip
def test_parse_numstat(record: bytes, parsed: ws.FileStat | None) -> None:
    assert ws.parse_numstat(record) == parsed


def test_count_status() -> None:
    records = [b"?? new.txt", b" M a.py", b"A  b.py", b"D  c", b"??", b"XY", b"", b"?? x y"]
    assert ws.count_status(records) == (3, 2)


# -- file names shown ----------------------------------------------------------------------------
_ESCAPE = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: "\\" if m[1] == "\\" else chr(int(m[1][1:], 16)), text)


@given(st.text(max_size=ws.PATH_MAX_CHARS))
def test_a_short_name_is_escaped_reversibly(path: str) -> None:
    shown = ws.display_path(path)
    assert _unescape(shown) == path
    assert all(c.isprintable() or c == " " for c in shown), shown


@given(st.text(min_size=ws.PATH_MAX_CHARS + 1, max_size=400))
def test_a_long_name_keeps_both_ends(path: str) -> None:
    shown = ws.display_path(path)
    assert "…" in shown and len(shown) <= 10 * ws.PATH_MAX_CHARS
    assert all(c.isprintable() or c == " " for c in shown)


def test_display_path_examples() -> None:
    assert ws.display_path("\x1b[31mred") == "\\x1b[31mred"
    assert ws.display_path("a\u202eb\u2028c") == "a\\u202eb\\u2028c"
    assert ws.display_path("x" * 60 + "y" * 60, 11) == "xxxxx…yyyyy"


# -- the report line -------------------------------------------------------------------------
stats = st.builds(
    ws.FileStat,
    st.text(min_size=1, max_size=300),
    st.one_of(st.none(), st.integers(0, 10**12)),
    st.integers(0, 10**12),
).map(lambda s: s if s.added is not None else ws.FileStat(s.path, None, None))


@settings(max_examples=200)
@given(st.lists(stats, max_size=300), st.integers(0, 10**9), st.integers(0, 10**9))
def test_the_report_line_is_bounded_json(
    files: list[ws.FileStat], uncommitted: int, untracked: int
) -> None:
    stat = ws.Stat()
    for file in files:
        stat.add(file)
    line = ws.report_line(base=SHA_A, head=SHA_B, commits=10**9, stat=stat,
                          uncommitted=uncommitted, untracked=untracked)  # fmt: skip
    assert len(line.encode("utf-8")) <= ws.REPORT_MAX_BYTES
    out = json.loads(line)
    assert out["committed"] is True and out["files_changed"] == len(files)
    assert out["insertions"] == sum(f.added or 0 for f in files)
    assert out["deletions"] == sum(f.deleted or 0 for f in files)
    lines = out["stat"].splitlines()
    shown = lines[:-1] if out["more_files"] else lines
    assert shown == [ws.stat_line(f) for f in files[: len(shown)]]
    assert len(shown) + out["more_files"] == len(files)
    if out["more_files"]:
        assert lines[-1] == f" +{out['more_files']} more files"
        assert shown, "the first file always fits"
    assert all(c.isprintable() or c == " " for c in out["stat"].replace("\n", ""))


@pytest.mark.parametrize(
    ("stat", "line"),
    [
        (ws.FileStat("a.py", 3, 1), " a.py | 4 +++-"),
        (ws.FileStat("a.py", 0, 0), " a.py | 0 "),
        (ws.FileStat("b.bin", None, None), " b.bin | Bin"),
        (ws.FileStat("big", 1000, 1), " big | 1001 ###"),
        (ws.FileStat("gone", 0, 500), " gone | 500 " + "-" * 20),
    ],
)
def test_stat_lines(stat: ws.FileStat, line: str) -> None:
    if "###" in line:
        shown = ws.stat_line(stat)
        assert shown.startswith(" big | 1001 ") and len(shown.split()[-1]) == ws.STAT_BAR_WIDTH
        assert shown.endswith("+-")
        return
    assert ws.stat_line(stat) == line


def test_no_change_is_not_committed() -> None:
    out = json.loads(ws.report_line(base=SHA_A, head=SHA_A, commits=0, stat=ws.Stat(),
                                    uncommitted=0, untracked=0))  # fmt: skip
    assert out["committed"] is False and out["stat"] == ""


def test_folding_many_records_is_linear() -> None:
    def fold(count: int) -> float:
        records = (f"1\t2\tdir/file-{n}.py".encode() for n in range(count))
        started = time.process_time()
        stat = ws.fold_stats(records)
        assert stat.files == count and stat.insertions == count and stat.more > count - 1_000
        return time.process_time() - started

    # A ratio against the same fold of a tenth as many records, measured in the same
    # run, and in CPU time: a loaded machine slows both alike. Linear is about 10x,
    # quadratic 100x.
    small = min(fold(30_000) for _ in range(3))
    assert fold(300_000) / max(small, 1e-3) < 30


# -- publishing ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("remote", "ancestor", "step"),
    [
        (None, False, ws.Push(expected="")),
        (None, True, ws.Push(expected="")),
        (SHA_A, False, ws.Already()),
        (SHA_A, True, ws.Already()),
        (SHA_B, True, ws.Push(expected=SHA_B)),
        (SHA_B, False, ws.Refuse(remote=SHA_B)),
    ],
)
def test_publish_step(remote: str | None, ancestor: bool, step: ws.PublishStep) -> None:
    assert ws.publish_step(SHA_A, remote, ancestor) == step


def test_a_branch_ahead_of_us_in_our_own_history_is_already_published() -> None:
    assert ws.publish_step(SHA_A, SHA_B, False, head_is_ancestor=True) == ws.Already()
    assert ws.publish_step(SHA_A, SHA_B, False, head_is_ancestor=False) == ws.Refuse(SHA_B)


@given(st.sampled_from([None, SHA_A, SHA_B]), st.booleans(), st.booleans())
def test_publishing_never_rewrites(remote: str | None, ancestor: bool, ahead: bool) -> None:
    step = ws.publish_step(SHA_A, remote, ancestor, ahead)
    if isinstance(step, ws.Push):
        # Only onto nothing or an ancestor, and the lease is exactly what was seen.
        assert remote is None or ancestor
        assert step.expected == (remote or "")


@pytest.mark.parametrize(
    ("stderr", "failure"),
    [
        ("! [rejected] HEAD -> agentchain/c (stale info)", "stale"),
        ("remote: Permission to acme/w.git denied.\nfatal: unable to access "
         "'http://h/acme/w.git/': The requested URL returned error: 403", "denied"),
        ("fatal: Authentication failed for 'http://h/acme/w.git/'", "denied"),
        ("fatal: could not read Username for 'https://github.com': terminal prompts disabled",
         "denied"),
        ("remote: Repository not found.\nfatal: repository 'x' not found", "denied"),
        ("fatal: unable to access 'http://h/': Failed to connect to h port 80: "
         "Connection refused", "transient"),
        ("fatal: unable to access 'x': Could not resolve host: h", "transient"),
        ("error: RPC failed; HTTP 502 curl 22 The requested URL returned error: 502",
         "transient"),
        ("! [remote rejected] HEAD -> main (protected branch hook declined)", "rejected"),
    ],
)  # fmt: skip
def test_push_failures(stderr: str, failure: str) -> None:
    assert ws.push_failure(stderr) == failure


def test_exit_codes_are_distinct() -> None:
    codes = [ws.EXIT_OK, ws.EXIT_FAILED, ws.EXIT_USAGE, ws.EXIT_REFUSED, ws.EXIT_DENIED,
             ws.EXIT_TRANSIENT]  # fmt: skip
    assert len(set(codes)) == len(codes)
    assert ws.exit_code("denied") == ws.EXIT_DENIED
    assert ws.exit_code("transient") == ws.EXIT_TRANSIENT
    assert ws.exit_code("rejected") == ws.EXIT_FAILED


# -- HEAD from files ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        (f"{SHA_A}\n", ("sha", SHA_A)),
        ("ref: refs/heads/agentchain/c1\n", ("ref", "refs/heads/agentchain/c1")),
        ("ref: refs/heads/../../../etc/passwd\n", None),
        ("ref: /etc/passwd\n", None),
        ("ref: HEAD\n", None),
        ("", None),
        ("A" * 40, None),
    ],
)
def test_parse_head(text: str, parsed: tuple[str, str] | None) -> None:
    assert ws.parse_head(text) == parsed


def test_packed_ref() -> None:
    lines = ["# pack-refs with: peeled fully-peeled sorted\n", f"{SHA_B} refs/heads/main\n",
             f"^{SHA_A}\n", f"{SHA_A} refs/heads/agentchain/c1\n"]  # fmt: skip
    assert ws.packed_ref(lines, "refs/heads/agentchain/c1") == SHA_A
    assert ws.packed_ref(lines, "refs/heads/main") == SHA_B
    assert ws.packed_ref(lines, "refs/heads/other") is None
