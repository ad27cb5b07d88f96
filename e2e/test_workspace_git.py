"""``agentchain workspace`` against the real smart-HTTP git server and its tokens.

The commands run where an agent's workspace containers run them: in a pod of the e2e
agent image on the real node, through ``kubectl exec`` (the image's ``agentchain``,
Python and git, the pod's network: the git server listens on the node's bridge address,
and a pod's loopback is its own). The git server checks the GitHub stand-in's
installation tokens and records every push.

The test's own hands (the agent's edits and commits, a job writing into the volume
during a clone, a second writer racing a push) stay on this machine, on the same files:
the pod mounts the session's temporary directory at the same path (a ``hostPath``: the
real node is this machine), so a path means the same file to both, and a command planted
by a hostile config (``touch <tmp>/pwned``) would leave its mark where the test looks.
The pod runs as root, as the test does: ownership stays what the test's own files
have, so git's ``safe.directory`` rules behave the same on both sides (the agent as
another user of the pod's group is a case of its own, below). A cluster whose node is
elsewhere (``AGENTCHAIN_E2E_KUBECONFIG``) cannot see this machine's files: the module
is skipped there.

Aspects covered:
- prepare clones once (the base is the default branch's commit) and then does nothing,
  even without a usable token; a pull request's head is checked out by commit id;
- a clone that did not finish (killed init container) is removed and made again;
- the clone is made outside the volume: config and attributes written into the staging
  path while the clone is under way (a filter driver) never run, and prepare run from
  inside a repository whose config redirects the server (``url.insteadOf``) clones from
  the real one;
- report after an edit and a commit names the file, says committed, counts commits,
  uncommitted and untracked files; hostile file names (control characters, bidi
  overrides, thousands of files, long names) stay one bounded, escaped line;
- publish pushes once: a rerun is ``already`` with no second push; a later commit is a
  fast-forward; HEAD at the base publishes nothing; a publish overtaken by a later one
  of the same workspace (its branch at a descendant of our HEAD) is ``already``;
  someone else's branch is refused and left alone, also when it appears between the
  publisher's look and its push (the lease), while a racing fast-forward to our
  ancestor is built on; a shallow checkout publishes; a publisher killed after its push
  landed finds it and pushes nothing more; a token without ``contents: write`` is denied
  with a clear error; an unreachable server is transient (exit 75);
- an agent running as another user of the pod's group can commit in the checkout;
- the token is never written under the workspace (``.git/config``, the remote URL);
- what the agent writes into ``.git/config`` (an fsmonitor command, a filter driver)
  never runs in report or publish.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e import runtime_node
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.github.gitserver import GitServer
from e2e.github.testing import FULL_NAME, World, world

ROOT = Path(__file__).resolve().parents[1]
BRANCH = "agentchain/chain-1"
POD = "workspace-git"


@dataclass
class Done:
    """A finished ``agentchain workspace`` command: exit code, stdout, stderr."""

    code: int
    stdout: str
    stderr: str


@dataclass
class PodCommands:
    """The command in the e2e agent image: ``kubectl exec`` in an idle pod of it."""

    info: ClusterInfo
    pod: str
    scratch_root: Path  # Mounted in the pod too; any user can reach it.

    def run(self, argv: list[str], env: Mapping[str, str], cwd: Path | None) -> Done:
        script = f"cd {shlex.quote(str(cwd or '/'))} && exec {self._command(argv, env)}"
        done = self.info.kubectl(*self._exec(), "sh", "-c", script, check=False, timeout=120)
        # kubectl adds its own last line to stderr when the command failed.
        tail = f"command terminated with exit code {done.returncode}\n"
        return Done(done.returncode, done.stdout, done.stderr.removesuffix(tail))

    def start(
        self, argv: list[str], env: Mapping[str, str], pidfile: Path
    ) -> subprocess.Popen[bytes]:
        """The command in a session of its own in the container, its process group's id
        written to ``pidfile`` (a path the pod shares with this machine)."""
        script = f"echo $$ > {shlex.quote(str(pidfile))} && exec {self._command(argv, env)}"
        exe = str(self.info.bin_dir / "kubectl") if self.info.bin_dir else "kubectl"
        argv = [exe, "--kubeconfig", str(self.info.kubeconfig), *self._exec(),
                "setsid", "--wait", "sh", "-c", script]  # fmt: skip
        return subprocess.Popen(argv, stdout=subprocess.PIPE)

    def kill(self, started: subprocess.Popen[bytes], pidfile: Path) -> None:
        """SIGKILL to the command's process group in the container (its git processes
        too); the kill is done when this returns."""
        del started
        group = pidfile.read_text().strip()
        # The shell's kill: the image has no kill(1), and dash's takes no "--".
        kill = f"kill -KILL -{int(group)}"
        self.info.kubectl(*self._exec(), "sh", "-c", kill, timeout=30)

    def _exec(self) -> list[str]:
        return ["exec", "-n", runtime_node.RUNNER_NAMESPACE, self.pod, "--"]

    @staticmethod
    def _command(argv: list[str], env: Mapping[str, str]) -> str:
        return shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *argv])


@pytest.fixture(scope="module")
def commands(
    cluster_info: ClusterInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PodCommands]:
    """Where ``agentchain workspace`` runs (see the module's docstring). The pod mounts
    the session's temporary directory, where every test's files are, and a scratch
    directory of this module's in ``/tmp`` (the agent as another user needs a path that
    user can reach; pytest's directories are their owner's alone). Asked for by name, so
    every test here uses the cluster and its git server listens where pods reach it."""
    info = cluster_info
    if info.real_node is None:
        pytest.skip("the pod shares this machine's files through a hostPath: a cluster "
                    "whose node is elsewhere cannot see them")  # fmt: skip
    shared = Path(tempfile.mkdtemp(prefix="agentchain-ws-", dir="/tmp"))
    shared.chmod(0o755)
    try:
        roots = (tmp_path_factory.getbasetemp(), shared)
        pod = runtime_node.idle_pod(info, POD, info.agent_image, host_dirs=roots, as_root=True)
        yield PodCommands(info, pod, shared)
        info.kubectl("delete", "pod", pod, "-n", runtime_node.RUNNER_NAMESPACE, "--wait=false")
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@dataclass
class Run:
    code: int
    out: dict[str, Any]
    line: str
    stderr: str


@dataclass
class Setup:
    w: World
    git: GitServer
    workspace: Path
    secrets: Path
    commands: PodCommands

    def token_file(self, permissions: dict[str, str]) -> Path:
        path = self.secrets / f"token-{len(list(self.secrets.iterdir()))}"
        path.write_text(self.w.token(permissions) + "\n")
        return path

    def env(self, token: Path | None) -> dict[str, str]:
        env = {"AGENT_WORKSPACE": str(self.workspace), "AGENTCHAIN_GIT_BASE_URL": self.git.url}
        if token is not None:
            env["AGENTCHAIN_GIT_TOKEN_FILE"] = str(token)
        return env

    def run(self, *args: str, token: Path | None = None, cwd: Path | None = None) -> Run:
        argv = ["agentchain", "workspace", *args]
        done = self.commands.run(argv, self.env(token), cwd)
        lines = done.stdout.splitlines()
        assert len(lines) == 1, (done.stdout, done.stderr)
        return Run(done.code, json.loads(lines[0]), lines[0], done.stderr)

    def prepare(self, *args: str) -> Run:
        token = self.token_file({"contents": "read"})
        return self.run("prepare", "--repository", FULL_NAME, *args, token=token)

    def publish(self, permissions: dict[str, str] | None = None) -> Run:
        token = self.token_file(permissions or {"contents": "write"})
        return self.run("publish", "--repository", FULL_NAME, "--branch", BRANCH, token=token)

    def report(self) -> dict[str, Any]:
        done = self.run("report")
        assert done.code == 0, done
        assert len(done.line.encode()) <= 4096
        return done.out

    @property
    def repo(self) -> Path:
        return self.workspace / "repo"

    def pushes(self) -> list[str]:
        return [u.new for p in self.git.pushes if p.status == 200 for u in p.updates]


def agent_git(repo: Path, *args: str, user: list[str] | None = None) -> str:
    """git as the agent runs it, in its working tree (``user``: as another user, with the
    ``safe.directory`` environment the workspace's interface asks pods to set)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "Agent", "GIT_AUTHOR_EMAIL": "a@example.com",
           "GIT_COMMITTER_NAME": "Agent", "GIT_COMMITTER_EMAIL": "a@example.com",
           "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
           "GIT_CONFIG_VALUE_0": str(repo), "HOME": "/tmp"}  # fmt: skip
    argv = [*(user or []), "git", "-C", str(repo), *args]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def s(github: GitHubStandIn, git_server: GitServer, tmp_path: Path, commands: PodCommands) -> Setup:
    git_server.create_repo(FULL_NAME, {"src/widget.py": "WOBBLE = True\n", "README.md": "hi\n"})
    (tmp_path / "secrets").mkdir()
    return Setup(world(github), git_server, tmp_path / "workspace", tmp_path / "secrets", commands)


def _commit_fix(s: Setup, text: str = "WOBBLE = False\n") -> str:
    (s.repo / "src" / "widget.py").write_text(text)
    agent_git(s.repo, "commit", "-qam", "Stop the wobble")
    return agent_git(s.repo, "rev-parse", "HEAD")


# -- prepare ---------------------------------------------------------------------------------
def test_prepare_clones_once_then_does_nothing(s: Setup) -> None:
    first = s.prepare("--branch", BRANCH)
    assert first.code == 0, first
    main = s.git.resolve(FULL_NAME, "main")
    assert first.out == {"base": main, "repository": s.git.clone_url(FULL_NAME), "ref": "main",
                         "branch": BRANCH, "outcome": "cloned"}  # fmt: skip
    assert (s.repo / "src" / "widget.py").read_text() == "WOBBLE = True\n"
    assert agent_git(s.repo, "rev-parse", "--abbrev-ref", "HEAD") == BRANCH
    assert agent_git(s.repo, "log", "--format=%s").splitlines() == ["Change 3", "Change 2",
                                                                    "Change 1"]  # fmt: skip
    (s.repo / "notes.txt").write_text("the agent's work\n")
    # A later step: nothing is fetched, so not even a dead token matters.
    dead = s.secrets / "dead"
    dead.write_text("ghs_" + "0" * 36)
    again = s.run("prepare", "--repository", FULL_NAME, token=dead)
    assert again.code == 0 and again.out["outcome"] == "present", again
    assert again.out["base"] == main
    assert (s.repo / "notes.txt").exists()


def test_a_half_done_clone_is_started_over(s: Setup) -> None:
    (s.repo / ".git" / "objects").mkdir(parents=True)
    (s.repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (s.repo / "half-written.py").write_text("x")
    (s.workspace / ".agentchain" / "staging" / ".git").mkdir(parents=True)
    done = s.prepare()
    assert done.code == 0 and done.out["outcome"] == "cloned", done
    assert not (s.repo / "half-written.py").exists()
    assert not (s.workspace / ".agentchain" / "staging").exists()
    assert (s.repo / "src" / "widget.py").exists()
    assert agent_git(s.repo, "status", "--porcelain") == ""


def test_config_written_into_the_volume_during_the_clone_never_runs(
    s: Setup, tmp_path: Path
) -> None:
    pwned = tmp_path / "pwned"
    staging_git = s.workspace / ".agentchain" / "staging" / ".git"

    def plant(service: str, full_name: str, tail: str) -> None:
        # A job of the chain writing into the volume while the objects are fetched.
        if tail != "git-upload-pack":
            return
        (staging_git / "info").mkdir(parents=True, exist_ok=True)
        with (staging_git / "config").open("a") as config:
            config.write(f'[filter "evil"]\n\tsmudge = "touch {pwned}; cat"\n')
        (staging_git / "info" / "attributes").write_text("* filter=evil\n")

    s.git.before_request = plant
    try:
        done = s.prepare()
    finally:
        s.git.before_request = None
    assert done.code == 0 and done.out["outcome"] == "cloned", done
    assert not pwned.exists()
    assert "evil" not in (s.repo / ".git" / "config").read_text()
    assert not (s.workspace / ".agentchain" / "staging").exists()
    assert (s.repo / "src" / "widget.py").read_text() == "WOBBLE = True\n"


def test_the_config_of_a_repository_around_prepare_is_ignored(s: Setup, tmp_path: Path) -> None:
    around = tmp_path / "around"
    subprocess.run(["git", "init", "-q", str(around)], check=True, capture_output=True)
    # Port 9 (discard): a redirected clone fails; an unredirected one reaches the server.
    redirect = ["git", "-C", str(around), "config", "url.http://127.0.0.1:9/.insteadOf", s.git.url]
    subprocess.run(redirect, check=True, capture_output=True)
    token = s.token_file({"contents": "read"})
    done = s.run("prepare", "--repository", FULL_NAME, token=token, cwd=around)
    assert done.code == 0 and done.out["outcome"] == "cloned", done


def test_a_pull_request_head_is_checked_out_by_commit(s: Setup, tmp_path: Path) -> None:
    other = tmp_path / "other"
    url = s.git.clone_url(FULL_NAME, s.w.token({"contents": "write"}))
    subprocess.run(["git", "clone", "-q", url, str(other)], check=True, capture_output=True)
    (other / "feature.txt").write_text("feature\n")
    agent_git(other, "add", "feature.txt")
    agent_git(other, "commit", "-qm", "Feature")
    sha = agent_git(other, "rev-parse", "HEAD")
    agent_git(other, "push", "-q", "origin", "HEAD:refs/heads/feature")
    done = s.prepare("--ref", sha, "--depth", "1")
    assert done.code == 0, done
    assert done.out["base"] == sha and done.out["branch"] == "agentchain/workspace"
    assert (s.repo / "feature.txt").read_text() == "feature\n"


def test_bad_input_is_a_usage_error(s: Setup) -> None:
    for args in (["--repository", "ext::sh -c touch% /tmp/pwned"],
                 ["--repository", "https://x-access-token:t@example.com/a/b.git"],
                 ["--repository", FULL_NAME, "--ref", "main..x"],
                 ["--repository", FULL_NAME, "--branch=-f"]):  # fmt: skip
        done = s.run("prepare", *args)
        assert done.code == 2 and done.out["outcome"] == "usage", done
    assert not s.repo.exists()


def test_prepare_failures_say_why(s: Setup) -> None:
    missing = s.prepare("--ref", "no-such-branch")
    assert missing.code == 1 and missing.out["outcome"] == "failed", missing
    assert "no-such-branch" in missing.out["error"]
    token = s.token_file({"issues": "write"})
    denied = s.run("prepare", "--repository", FULL_NAME, token=token)
    assert denied.code == 4 and denied.out["outcome"] == "denied", denied
    assert "403" in denied.out["error"]
    assert not s.repo.exists() and not (s.workspace / ".agentchain" / "base.json").exists()


@pytest.mark.parametrize("damage", ["never-prepared", "fifo-head", "no-git-dir"])
def test_a_broken_workspace_is_a_clear_failure(s: Setup, damage: str) -> None:
    checkout = "is not a git checkout"
    if damage == "never-prepared":
        s.repo.mkdir(parents=True)
        expected = ["run prepare first", checkout]
    else:
        s.prepare()
        if damage == "fifo-head":
            (s.repo / ".git" / "HEAD").unlink()
            os.mkfifo(s.repo / ".git" / "HEAD")  # A read would block forever.
            expected = ["HEAD names no commit"] * 2
        else:
            shutil.rmtree(s.repo / ".git")
            expected = [checkout] * 2
    for done, says in zip((s.run("report"), s.publish()), expected, strict=True):
        assert done.code == 1 and done.out["outcome"] == "failed", done
        assert says in done.out["error"], done
    assert s.pushes() == []


# -- report ----------------------------------------------------------------------------------
def test_report_after_an_edit_and_a_commit(s: Setup) -> None:
    base = s.prepare().out["base"]
    assert s.report() == {"base": base, "head": base, "committed": False, "commits": 0,
                          "files_changed": 0, "insertions": 0, "deletions": 0, "stat": "",
                          "more_files": 0, "uncommitted": 0, "untracked": 0}  # fmt: skip
    head = _commit_fix(s)
    (s.repo / "README.md").write_text("hi\nthere\n")  # Changed, not committed.
    (s.repo / "scratch.txt").write_text("untracked\n")
    out = s.report()
    assert out["committed"] is True and out["commits"] == 1 and out["head"] == head
    assert out["stat"] == " README.md | 1 +\n src/widget.py | 2 +-\n"
    assert (out["files_changed"], out["insertions"], out["deletions"]) == (2, 2, 1)
    assert (out["uncommitted"], out["untracked"]) == (1, 1)


def test_hostile_file_names_stay_one_bounded_line(s: Setup) -> None:
    s.prepare()
    names = ["\x1b[31mred\x1b[0m.txt", "new\nline.txt", "a\u202eexe.txt", "tab\there.txt",
             "x" * 250, "back\\slash\".txt"]  # fmt: skip
    names += [f"zz/{n:05}-{'é' * 60}" for n in range(3000)]
    for name in names:
        (s.repo / name).parent.mkdir(parents=True, exist_ok=True)
        (s.repo / name).write_text("1\n")
    agent_git(s.repo, "add", "--all")
    agent_git(s.repo, "commit", "-qm", "Many files")
    out = s.report()
    assert out["files_changed"] == len(names) and out["insertions"] == len(names)
    assert out["more_files"] > 0 and out["stat"].endswith(f" +{out['more_files']} more files\n")
    shown = out["stat"].splitlines()
    assert len(shown) - 1 + out["more_files"] == len(names)
    text = out["stat"]
    assert "\x1b" not in text and "\u202e" not in text and "\t" not in text
    assert " \\x1b[31mred\\x1b[0m.txt | 1 +" in shown
    assert " a\\u202eexe.txt | 1 +" in shown
    assert " new\\x0aline.txt | 1 +" in shown
    assert max(len(line) for line in shown) < 120


# -- publish ---------------------------------------------------------------------------------
def test_publish_pushes_once_and_a_rerun_is_a_no_op(s: Setup) -> None:
    s.prepare("--branch", BRANCH)
    unchanged = s.publish()
    assert unchanged.code == 0 and unchanged.out["outcome"] == "unchanged", unchanged
    head = _commit_fix(s)
    first = s.publish()
    assert first.code == 0, first
    assert first.out == {"outcome": "pushed", "branch": BRANCH, "sha": head}
    again = s.publish()
    assert again.code == 0 and again.out["outcome"] == "already", again
    assert s.pushes() == [head]
    assert s.git.resolve(FULL_NAME, BRANCH) == head
    later = _commit_fix(s, "WOBBLE = None\n")
    assert s.publish().out["outcome"] == "pushed"
    assert s.pushes() == [head, later]
    assert s.git.resolve(FULL_NAME, BRANCH) == later


def test_a_publish_overtaken_by_a_later_one_of_the_workspace_is_already_done(s: Setup) -> None:
    s.prepare("--branch", BRANCH)
    step = _commit_fix(s)
    later = _commit_fix(s, "WOBBLE = None\n")
    assert s.publish().out["outcome"] == "pushed"  # The chain's final publish, first.
    agent_git(s.repo, "reset", "-q", "--hard", step)  # The step's publish read HEAD here.
    overtaken = s.publish()
    assert overtaken.code == 0 and overtaken.out["outcome"] == "already", overtaken
    assert s.pushes() == [later] and s.git.resolve(FULL_NAME, BRANCH) == later


def test_a_shallow_checkout_publishes(s: Setup) -> None:
    s.prepare("--depth", "1", "--branch", BRANCH)
    assert agent_git(s.repo, "rev-list", "--count", "HEAD") == "1"
    head = _commit_fix(s)
    assert s.report()["commits"] == 1
    published = s.publish()
    assert published.out["outcome"] == "pushed", published
    assert s.git.resolve(FULL_NAME, BRANCH) == head


def test_an_unreachable_server_is_transient(s: Setup) -> None:
    s.prepare()
    _commit_fix(s)
    token = s.token_file({"contents": "write"})
    done = s.run("publish", "--repository", "http://127.0.0.1:9/acme/widgets.git",
                 "--branch", BRANCH, token=token)  # fmt: skip
    assert done.code == 75 and done.out["outcome"] == "transient", done


def test_steps_running_as_other_users_share_the_checkout(s: Setup) -> None:
    """prepare as one user, the agent as another of the pod's group (fsGroup)."""
    s.workspace = Path(tempfile.mkdtemp(prefix="agentchain-ws-", dir=s.commands.scratch_root))
    try:
        s.workspace.chmod(0o775)
        assert s.prepare().code == 0
        other = ["setpriv", "--reuid=65534", "--regid=0", "--clear-groups"]
        (s.repo / "src" / "widget.py").unlink()  # Needs a group-writable directory.
        agent_git(s.repo, "commit", "-qam", "Remove the widget", user=other)
        out = s.report()
        assert out["committed"] is True and out["stat"] == " src/widget.py | 1 -\n"
    finally:
        shutil.rmtree(s.workspace)


def test_someone_elses_branch_is_refused_and_left_alone(s: Setup, tmp_path: Path) -> None:
    other = tmp_path / "other"
    url = s.git.clone_url(FULL_NAME, s.w.token({"contents": "write"}))
    subprocess.run(["git", "clone", "-q", url, str(other)], check=True, capture_output=True)
    (other / "theirs.txt").write_text("theirs\n")
    agent_git(other, "add", "theirs.txt")
    agent_git(other, "commit", "-qm", "Theirs")
    theirs = agent_git(other, "rev-parse", "HEAD")
    agent_git(other, "push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}")
    s.prepare()
    head = _commit_fix(s)
    refused = s.publish()
    assert refused.code == 3, refused
    assert refused.out == {"outcome": "refused", "remote": theirs, "branch": BRANCH, "sha": head}
    assert s.git.resolve(FULL_NAME, BRANCH) == theirs
    assert s.pushes() == [theirs]


def _on_first_push(s: Setup, move: Callable[[], object]) -> None:
    """Run ``move`` (another writer) when the publisher starts pushing, after it looked."""
    moved: list[bool] = []

    def before(service: str, full_name: str, tail: str) -> None:
        if service == "git-receive-pack" and tail == "info/refs" and not moved:
            moved.append(True)
            move()

    s.git.before_request = before


def test_a_writer_racing_the_push_is_never_overwritten(s: Setup, tmp_path: Path) -> None:
    other = tmp_path / "other"
    url = s.git.clone_url(FULL_NAME, s.w.token({"contents": "write"}))
    subprocess.run(["git", "clone", "-q", url, str(other)], check=True, capture_output=True)
    (other / "theirs.txt").write_text("theirs\n")
    agent_git(other, "add", "theirs.txt")
    agent_git(other, "commit", "-qm", "Theirs")
    theirs = agent_git(other, "rev-parse", "HEAD")
    bare = str(s.git.bare_path(FULL_NAME))
    _on_first_push(s, lambda: agent_git(other, "push", "-q", bare, f"HEAD:refs/heads/{BRANCH}"))
    s.prepare()
    _commit_fix(s)
    raced = s.publish()
    assert raced.code == 3 and raced.out["remote"] == theirs, raced
    assert s.git.resolve(FULL_NAME, BRANCH) == theirs


def test_a_racing_fast_forward_to_our_ancestor_is_built_on(s: Setup) -> None:
    s.prepare()
    first = _commit_fix(s)
    head = _commit_fix(s, "WOBBLE = None\n")
    bare = str(s.git.bare_path(FULL_NAME))
    _on_first_push(s, lambda: agent_git(s.repo, "push", "-q", bare, f"{first}:refs/heads/{BRANCH}"))
    published = s.publish()
    assert published.out["outcome"] == "pushed", published
    assert s.git.resolve(FULL_NAME, BRANCH) == head
    assert [p.updates[0].old for p in s.git.pushes if p.status == 200] == [first]


def test_a_publisher_killed_after_its_push_landed_pushes_once(s: Setup) -> None:
    """SIGKILL after the server applied the push, before the publisher heard of it."""
    s.prepare("--branch", BRANCH)
    head = _commit_fix(s)
    token = s.token_file({"contents": "write"})
    argv = ["agentchain", "workspace", "publish", "--repository", FULL_NAME, "--branch", BRANCH]
    pidfile = s.secrets.parent / "publisher.pid"
    asked: list[bool] = []
    killed = threading.Event()
    with s.commands.start(argv, s.env(token), pidfile) as pub:

        def kill(service: str, full_name: str, tail: str) -> None:
            if service == "git-receive-pack" and tail == service and not asked:
                asked.append(True)
                s.commands.kill(pub, pidfile)  # The publisher and its git processes.
                killed.set()

        s.git.after_request = kill
        out, _ = pub.communicate(timeout=120)
        # The publisher's own exec can end before the one that killed it returns.
        assert killed.wait(60), "the kill did not return"
    s.git.after_request = None
    # Killed while alive: it never wrote its outcome line.
    assert pub.returncode != 0 and out == b"", (pub.returncode, out)
    assert s.git.resolve(FULL_NAME, BRANCH) == head
    rerun = s.publish()
    assert rerun.code == 0 and rerun.out["outcome"] == "already", rerun
    assert s.pushes() == [head]


def test_a_token_without_contents_write_cannot_push(s: Setup) -> None:
    s.prepare()
    _commit_fix(s)
    denied = s.publish({"contents": "read"})
    assert denied.code == 4 and denied.out["outcome"] == "denied", denied
    assert "403" in denied.out["error"] and "denied" in denied.out["error"]
    assert s.git.resolve(FULL_NAME, BRANCH) is None and s.pushes() == []


def test_the_token_is_never_written_under_the_workspace(s: Setup) -> None:
    s.prepare("--branch", BRANCH)
    _commit_fix(s)
    assert s.publish().code == 0
    tokens = [f.read_text().strip() for f in s.secrets.iterdir()]
    assert tokens
    for path in s.workspace.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert not any(t.encode() in data for t in tokens), path
            assert b"extraheader" not in data.lower() and b"authorization" not in data.lower()
    assert agent_git(s.repo, "remote", "get-url", "origin") == s.git.clone_url(FULL_NAME)


def test_the_agents_git_config_never_runs_in_report_or_publish(s: Setup, tmp_path: Path) -> None:
    s.prepare("--branch", BRANCH)
    _commit_fix(s)
    pwned = tmp_path / "pwned"
    for key, value in (("core.fsmonitor", f"touch {pwned}; false"),
                       ("filter.evil.clean", f"touch {pwned}; cat"),
                       ("core.pager", f"touch {pwned}; cat"),
                       ("core.hooksPath", str(tmp_path / "hooks"))):  # fmt: skip
        agent_git(s.repo, "config", key, value)
    (s.repo / ".gitattributes").write_text("* filter=evil\n")
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "pre-push").write_text(f"#!/bin/sh\ntouch {pwned}\n")
    (tmp_path / "hooks" / "pre-push").chmod(0o755)
    out = s.report()
    assert out["committed"] is True and out["untracked"] == 1  # .gitattributes
    assert s.publish().out["outcome"] == "pushed"
    assert not pwned.exists()
