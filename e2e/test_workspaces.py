"""Workspaces end to end (issue 18): seed 003's chain working on a real repository.

The operator runs as a GitHub App against the stand-in, whose git server (smart HTTP,
``git http-backend``, checking the stand-in's installation tokens) serves the example
payloads' repository with a typo in its README.  The chain starts from GitHub's own
``issues.opened`` example.  The real node's kubelet mounts the chain's
PersistentVolumeClaim (provisioned by the cluster's default StorageClass) into every
step's pod; the workspace containers run the workspace image's ``agentchain workspace``
(the e2e agent image, built from this tree).

Aspects covered:
* triage reads the README from its workspace; the developer fixes it and commits; the
  reviewer sees the developer's commit and its diff in the workspace, and the summary
  ("committed: yes", the file) in its ``<chain-context>``, apart from the output;
* the reviewer (no ``contents: write``) has no git credential: its ``git push`` fails and
  the server has no such branch;
* at the end ``agentchain/<chain id>`` on the git server holds the developer's commit, the
  stand-in recorded exactly one pull request from it that closes the issue, and the root
  AgentJob says ``WorkspacePublished=True``;
* the chain's volume is one claim, owned by the root AgentJob; deleting the completed
  chain's root AgentJob deletes its volume;
* the developer asking ``publishAfterStep``: its step's publish Job (owned by its
  AgentJob) pushes its commit while the chain goes on (the reviewer, waiting for the
  branch, sees it there before it commits), the chain's end then fast-forwards the branch
  to the reviewer's commit (two pushes, the second from the first's commit), one pull
  request, ``WorkspacePublished=True`` on the developer's AgentJob and on the root;
* the operator SIGKILLed right after creating the publish Job (crashpoint
  ``workspace-publish-created``), and, for a second chain, right after creating the pull
  request (``workspace-pull-created``): each chain's branch got exactly one push and has
  exactly one pull request; the second chain's pods mount its own volume, never the
  first's;
* past ``max_workspaces_per_namespace`` a chain's first job fails with
  ``WorkspaceLimitReached``, and no volume is made for it;
* a branch that is someone else's (at a commit that is not the chain's nor an ancestor)
  is not pushed to: ``WorkspacePublished=False`` with ``WorkspacePushRefused``, the branch
  unchanged, no pull request;
* without a GitHub App a public repository is cloned without a token;
* without a GitHub App, a host that is not GitHub: a private repository on an HTTPS git
  host (the git server with TLS) named by its plain URL, its token (one the host accepts,
  ``contents: write``) in a ``credentialsSecret``: anonymous access fails, the chain
  clones, the developer (no ``contents: write``) commits but its push finds no credential,
  the releaser (``contents: write``) pushes with the Secret's token, and
  ``agentchain/<chain id>`` gets exactly one push (by that token) holding the commit,
  ``WorkspacePublished=True`` and no pull request; the host's private CA reaches the
  clone, the agents' git and the publish only through ``workspace_ca_configmap``;
* six chains at once on a private repository of the App's installation all clone it with
  their job's token (none goes anonymous: the Secret exists before the pod);
* a repository that cannot be cloned ends the job ``WorkspacePrepareFailed`` (message,
  Event) and its agent container never starts.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from e2e import chaining, delivering, operating
from e2e.controlplane import certs
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.github.gitserver import GitServer
from e2e.githubloop import ISSUE, REPOSITORY, Installed, app_delivery, app_operator, install

TIMEOUT = 180.0
Obj = dict[str, Any]

TRIAGE = 'cat "$AGENT_WORKSPACE_REPO/README.md"; echo "Triage: the README has a typo."'
DEVELOPER = (
    'cd "$AGENT_WORKSPACE_REPO" && sed -i s/Wrold/World/ README.md && '
    "git -c user.name=Developer -c user.email=dev@example.com commit -qam 'Fix the typo' && "
    "echo 'Fixed the typo.'"
)
REVIEWER = (
    'cd "$AGENT_WORKSPACE_REPO" && git log -1 --format=%s && git show --stat --format= HEAD && '
    "(git push -q origin HEAD:refs/heads/reviewer-push 2>/dev/null && echo PUSHED || "
    "echo PUSH-REFUSED)"
)


def seed_agents(keep_for: str = "0") -> list[Obj]:
    """Seed 003's chain, its agents scripted; the triage agent declares the workspace."""
    workspace = {"publish": True, "keepFor": keep_for}
    return [
        chaining.ai_agent(
            "ai-triage",
            ["sh", "-c", TRIAGE],
            object_name="issue-triage",
            workspace=workspace,
            triggers=[
                {
                    "source": "github",
                    "events": ["issues.opened"],
                    "next": {"agentTriggerName": "ai-developer"},
                }
            ],
        ),
        chaining.ai_agent(
            "ai-developer",
            ["sh", "-c", DEVELOPER],
            object_name="developer",
            triggers=[{"source": "manual", "next": {"agentTriggerName": "ai-reviewer"}}],
        ),
        chaining.ai_agent("ai-reviewer", ["sh", "-c", REVIEWER], object_name="reviewer"),
    ]


def workspace_env(git_server: GitServer) -> dict[str, str]:
    """Workspace containers clone from the git stand-in, and run the workspace image's
    own ``agentchain``, the default."""
    return {"AGENTCHAIN_GITHUB_GIT_URL": git_server.url}


@pytest.fixture
def repo(github: GitHubStandIn, git_server: GitServer, tmp_path: Path) -> Installed:
    installed = install(github, tmp_path)
    git_server.create_repo(REPOSITORY, {"README.md": "Hello Wrold\n"}, private=False)
    return installed


def _apply(info: ClusterInfo, namespace: str, objs: list[Obj]) -> None:
    for obj in objs:
        info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))


def _deliver(op: operating.OperatorProcess, installed: Installed, salt: str = "") -> None:
    payload = app_delivery("issues", "opened", installed.installation.id)
    payload["issue"]["updated_at"] += salt  # Another body: not a duplicate delivery.
    body, headers = delivering.signed(op.webhook_secret, payload, event="issues")
    status, answer = delivering.send(op, body, headers)
    assert status == 202 and answer["jobs"], answer


def chain_jobs(info: ClusterInfo, namespace: str, count: int = 3) -> list[Obj]:
    jobs: list[Obj] = []

    def done() -> bool:
        nonlocal jobs
        jobs = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
        return len(jobs) == count and any(
            (j.get("status") or {}).get("chainComplete") for j in jobs
        )

    operating.wait_until(done, timeout=TIMEOUT, what="the chain to complete")
    return sorted(jobs, key=lambda j: int(j["status"].get("chainDepth") or 0))


def agent_log(info: ClusterInfo, namespace: str, job: Obj) -> str:
    name = job["status"]["jobName"]
    return str(info.kubectl("logs", f"job/{name}", "-c", "agent", "-n", namespace).stdout)


def _condition(job: Obj, kind: str) -> Obj | None:
    return next((c for c in job["status"].get("conditions") or [] if c["type"] == kind), None)


def test_seed_chain_shares_one_workspace_and_publishes_one_pull_request(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info = cluster_info
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        _apply(info, namespace, seed_agents(keep_for="1h"))
        _deliver(op, repo)
        triage, developer, reviewer = chain_jobs(info, namespace)
        assert [j["status"]["phase"] for j in (triage, developer, reviewer)] == ["Succeeded"] * 3
        chain_id = triage["status"]["chainId"]

        assert "Hello Wrold" in agent_log(info, namespace, triage)
        seen = agent_log(info, namespace, reviewer)
        assert "Fix the typo" in seen and "README.md | 2 +-" in seen
        assert "PUSH-REFUSED" in seen and git_server.resolve(REPOSITORY, "reviewer-push") is None
        context = reviewer["spec"]["chainContext"]
        output, _, changes = context.partition("Workspace changes")
        assert "Fixed the typo." in output and "committed: yes (1 new commit" in changes
        assert "README.md | 2 +-" in changes

        claim = f"agentchain-ws-{chain_id}"
        for job in (triage, developer, reviewer):
            assert job["status"]["workspace"]["claimName"] == claim

        def published() -> Obj | None:
            root = operating.get_json(info, "agentjob", triage["metadata"]["name"], "-n", namespace)
            return _condition(root, "WorkspacePublished")

        operating.wait_until(published, timeout=60, what="the workspace published")
        condition = published()
        assert condition is not None and condition["status"] == "True", condition
        branch = f"agentchain/{chain_id}"
        pushed = git_server.resolve(REPOSITORY, branch)
        assert pushed is not None
        log = git_server_log(git_server, branch)
        assert log[0] == "Fix the typo"
        (pull,) = repo.github.pulls(REPOSITORY)
        assert pull.head == branch and f"Closes #{ISSUE}" in (pull.body or "")
        assert len(repo.github.requests("pulls/create", status=201)) == 1

        pvc = operating.get_json(info, "pvc", claim, "-n", namespace)
        (owner,) = pvc["metadata"]["ownerReferences"]
        assert owner["uid"] == triage["metadata"]["uid"]
        assert not _claim_deleted(info, namespace, claim)  # keepFor: 1h.

        info.kubectl("delete", "agentjob", triage["metadata"]["name"], "-n", namespace)

        operating.wait_until(
            functools.partial(_claim_deleted, info, namespace, claim),
            timeout=60,
            what="the volume deleted with its chain",
        )


REVIEWER_AFTER_PUBLISH = (
    'cd "$AGENT_WORKSPACE_REPO" && branch=$(git rev-parse --abbrev-ref HEAD) && '
    "for i in $(seq 90); do "
    'git ls-remote --exit-code origin "refs/heads/$branch" >/dev/null 2>&1 && break; sleep 1; '
    'done; echo "SEEN $(git ls-remote origin "refs/heads/$branch" | cut -f1)" && '
    "echo 'Looks good.' > REVIEW.md && git add REVIEW.md && "
    "git -c user.name=Reviewer -c user.email=rev@example.com commit -qm 'Review notes' && "
    "echo 'Reviewed.'"
)


def test_a_step_that_asks_publishes_before_the_chain_ends_then_the_end_fast_forwards(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    """The developer asks ``publishAfterStep``: its commit is on the branch while the
    chain goes on (the reviewer, which waits for the branch and commits after, sees it
    there), then the chain's end fast-forwards the branch to the reviewer's commit; one
    pull request; the developer's AgentJob and the root each say WorkspacePublished."""
    info = cluster_info
    agents = seed_agents()
    agents[1]["spec"]["workspace"] = {"publishAfterStep": True}
    agents[2]["spec"]["command"] = ["sh", "-c", REVIEWER_AFTER_PUBLISH]
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        _apply(info, namespace, agents)
        _deliver(op, repo)
        triage, developer, reviewer = chain_jobs(info, namespace)
        assert [j["status"]["phase"] for j in (triage, developer, reviewer)] == ["Succeeded"] * 3
        chain_id = triage["status"]["chainId"]
        branch = f"agentchain/{chain_id}"

        def published(job: Obj) -> Obj | None:
            got = operating.get_json(info, "agentjob", job["metadata"]["name"], "-n", namespace)
            return _condition(got, "WorkspacePublished")

        for job in (developer, triage):
            operating.wait_until(
                functools.partial(published, job), timeout=90, what="WorkspacePublished"
            )
            condition = published(job)
            assert condition is not None and condition["status"] == "True", condition
            assert "Pull request #" in condition["message"], condition

        bare = git_server.bare_path(REPOSITORY)
        fix = subprocess.run(
            ["git", "--git-dir", str(bare), "rev-parse", f"{branch}~1"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert git_server_log(git_server, branch)[:2] == ["Review notes", "Fix the typo"]
        ref = f"refs/heads/{branch}"
        updates = [
            u for p in git_server.pushes if p.status == 200 for u in p.updates if u.ref == ref
        ]
        assert [u.new for u in updates] == [fix, git_server.resolve(REPOSITORY, branch)]
        assert updates[1].old == fix  # The chain's end: a fast-forward of the step's push.
        # The reviewer ran after the step's push had landed: the chain did not wait for it.
        assert f"SEEN {fix}" in agent_log(info, namespace, reviewer)

        (pull,) = repo.github.pulls(REPOSITORY)
        assert pull.head == branch
        assert len(repo.github.requests("pulls/create", status=201)) == 1
        selector = f"labrats.work/workspace={chain_id}"
        jobs = operating.get_json(info, "jobs", "-l", selector, "-n", namespace)["items"]
        owners = {j["metadata"]["name"]: j["metadata"]["ownerReferences"][0]["name"] for j in jobs}
        step = next(n for n in owners if n != f"agentchain-publish-{chain_id}")
        assert owners == {
            f"agentchain-publish-{chain_id}": triage["metadata"]["name"],
            step: developer["metadata"]["name"],
        }
        assert step.startswith(f"agentchain-publish-{chain_id}-") and len(step) <= 63


def _claim_deleted(info: ClusterInfo, namespace: str, claim: str) -> bool:
    """Gone, or being deleted (pvc-protection holds it while a pod that used it exists)."""
    found = info.kubectl("get", "pvc", claim, "-n", namespace, "-o", "json", check=False)
    if found.returncode != 0:
        return True
    return bool(json.loads(found.stdout)["metadata"].get("deletionTimestamp"))


def git_server_log(git_server: GitServer, branch: str, repository: str = REPOSITORY) -> list[str]:
    return git_server.subjects(repository, branch)


def _pushes_to(git_server: GitServer, branch: str) -> int:
    ref = f"refs/heads/{branch}"
    return sum(
        1 for p in git_server.pushes if p.status == 200 and any(u.ref == ref for u in p.updates)
    )


def _claims_of(info: ClusterInfo, namespace: str, jobs: list[Obj]) -> set[str]:
    claims = set()
    for job in jobs:
        batch = operating.get_json(info, "job", job["status"]["jobName"], "-n", namespace)
        for volume in batch["spec"]["template"]["spec"]["volumes"]:
            if "persistentVolumeClaim" in volume:
                claims.add(volume["persistentVolumeClaim"]["claimName"])
    return claims


def test_publishing_survives_sigkill_with_one_push_and_one_pull_request(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info = cluster_info
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        _apply(info, namespace, seed_agents())
        chains: list[list[Obj]] = []
        for count, crashpoint in ((3, "workspace-publish-created"), (6, "workspace-pull-created")):
            code = op.crash_at(
                crashpoint, functools.partial(_deliver, op, repo, crashpoint), timeout=TIMEOUT
            )
            assert code != 0
            op.start()
            jobs = chain_jobs_of_new_chain(info, namespace, chains, count)
            chains.append(jobs)
            root, chain_id = jobs[0], jobs[0]["status"]["chainId"]
            branch = f"agentchain/{chain_id}"

            def published(root: Obj = root) -> bool:
                got = operating.get_json(
                    info, "agentjob", root["metadata"]["name"], "-n", namespace
                )
                condition = _condition(got, "WorkspacePublished")
                return condition is not None and condition["status"] == "True"

            operating.wait_until(published, timeout=90, what=f"chain {chain_id} published")
            assert _pushes_to(git_server, branch) == 1
            assert [p.head for p in repo.github.pulls(REPOSITORY)].count(branch) == 1
            # keepFor 0: deleted once published (Terminating while the chain's pods last).
            claim = f"agentchain-ws-{chain_id}"
            operating.wait_until(
                functools.partial(_claim_deleted, info, namespace, claim),
                timeout=30,
                what=f"{claim} deleted after publishing",
            )
        first, second = (_claims_of(info, namespace, jobs) for jobs in chains)
        assert len(first) == len(second) == 1 and first != second


def chain_jobs_of_new_chain(
    info: ClusterInfo, namespace: str, seen: list[list[Obj]], count: int
) -> list[Obj]:
    """The jobs of the chain started last, once it completed (``count``: all jobs so far)."""
    known = {j["metadata"]["name"] for jobs in seen for j in jobs}
    jobs: list[Obj] = []

    def done() -> bool:
        nonlocal jobs
        items = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
        jobs = [j for j in items if j["metadata"]["name"] not in known]
        return len(items) == count and any(
            (j.get("status") or {}).get("chainComplete") for j in jobs
        )

    operating.wait_until(done, timeout=TIMEOUT, what="the new chain to complete")
    return sorted(jobs, key=lambda j: int(j["status"].get("chainDepth") or 0))


def test_past_the_namespaces_cap_a_chain_fails_visibly(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    info = cluster_info
    env = {**workspace_env(git_server), "AGENTCHAIN_MAX_WORKSPACES_PER_NAMESPACE": "1"}
    with app_operator(operator, info, namespace, repo, env) as op:
        _apply(info, namespace, seed_agents(keep_for="1h"))  # The first volume stays.
        _deliver(op, repo, "first")
        first = chain_jobs(info, namespace)
        _deliver(op, repo, "second")

        def refused() -> Obj | None:
            items = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
            known = {j["metadata"]["name"] for j in first}
            new = [j for j in items if j["metadata"]["name"] not in known]
            phase = (new[0].get("status") or {}).get("phase") if new else None
            return new[0] if phase == "Failed" else None

        operating.wait_until(refused, timeout=60, what="the second chain refused")
        job = refused()
        assert job is not None and job["status"]["reason"] == "WorkspaceLimitReached"
        assert "max_workspaces_per_namespace = 1" in job["status"]["message"]
        claims = operating.get_json(info, "pvc", "-n", namespace)["items"]
        assert [c["metadata"]["name"] for c in claims] == [
            f"agentchain-ws-{first[0]['status']['chainId']}"
        ]


def _someone_elses_branch(git_server: GitServer, branch: str, tmp: Path) -> str:
    """``branch`` on the server at a commit of its own (not an ancestor of the chain's)."""
    bare, work = git_server.bare_path(REPOSITORY), tmp / "someone"
    env = {"GIT_AUTHOR_NAME": "Someone", "GIT_AUTHOR_EMAIL": "someone@example.com"}
    env |= {"GIT_COMMITTER_NAME": "Someone", "GIT_COMMITTER_EMAIL": "someone@example.com"}

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, env={**os.environ, **env}
        )
        return done.stdout.strip()

    git("clone", "-q", str(bare), str(work))
    (work / "NOTES.md").write_text("mine\n")
    git("-C", str(work), "add", "NOTES.md")
    git("-C", str(work), "commit", "-qm", "Someone else's work")
    git("-C", str(work), "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
    return git("-C", str(work), "rev-parse", "HEAD")


def test_a_push_to_someone_elses_branch_is_refused_visibly(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
    tmp_path: Path,
) -> None:
    info = cluster_info
    branch = "feature/taken"
    theirs = _someone_elses_branch(git_server, branch, tmp_path)
    agents = seed_agents()
    agents[0]["spec"]["workspace"]["branch"] = branch
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        _apply(info, namespace, agents)
        _deliver(op, repo, "taken")
        root = chain_jobs(info, namespace)[0]

        def settled() -> Obj | None:
            got = operating.get_json(info, "agentjob", root["metadata"]["name"], "-n", namespace)
            return _condition(got, "WorkspacePublished")

        operating.wait_until(settled, timeout=90, what="the publish outcome")
        condition = settled()
        assert condition is not None and condition["status"] == "False"
        assert condition["reason"] == "WorkspacePushRefused", condition
        assert git_server.resolve(REPOSITORY, branch) == theirs  # Nothing rewritten.
        assert repo.github.pulls(REPOSITORY) == []


def test_without_an_app_a_public_repository_is_cloned_anonymously(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    git_server: GitServer,
) -> None:
    """No GitHub App: no token to mint, the Secret names no token file, git goes anonymous."""
    info = cluster_info
    git_server.create_repo(REPOSITORY, {"README.md": "Hello Wrold\n"}, private=False)
    with app_operator(operator, info, namespace, None, workspace_env(git_server)):
        workspace = {"repository": REPOSITORY}
        _apply(
            info,
            namespace,
            [chaining.ai_agent("reader", ["sh", "-c", TRIAGE], workspace=workspace)],
        )
        job = {
            "apiVersion": "labrats.work/v1alpha1",
            "kind": "AgentJob",
            "metadata": {"name": "read-it"},
            "spec": {"agentRole": "reader", "prompt": "Read the README."},
        }
        _apply(info, namespace, [job])
        (done,) = chain_jobs(info, namespace, count=1)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        assert "Hello Wrold" in agent_log(info, namespace, done)


PRIVATE = "Codertocat/secret-plans"  # Private (githubloop.install): no anonymous access.
CREDENTIALS = "git-credentials"
GIT_AS_DEVELOPER = "git -c user.name=Developer -c user.email=dev@example.com"
PUSH = (
    "(GIT_TERMINAL_PROMPT=0 git push -q origin HEAD:refs/heads/{branch} 2>&1 "
    "&& echo PUSHED || echo PUSH-REFUSED)"
)
COMMITTER = (
    'cd "$AGENT_WORKSPACE_REPO" && sed -i s/Wrold/World/ README.md && '
    f"{GIT_AS_DEVELOPER} commit -qam 'Fix the typo' && " + PUSH.format(branch="developer-push")
)
RELEASER = 'cd "$AGENT_WORKSPACE_REPO" && git log -1 --format=%s && ' + PUSH.format(
    branch="release-candidate"
)


def _git_host_agents(url: str) -> list[Obj]:
    """A two-step chain on a host that is not GitHub: the developer (no ``contents: write``)
    declares the workspace and commits; the releaser (``contents: write``) pushes too."""
    workspace = {"repository": url, "credentialsSecret": CREDENTIALS, "publish": True}
    return [
        chaining.ai_agent(
            "developer",
            ["sh", "-c", COMMITTER],
            workspace=workspace,
            triggers=[{"source": "manual", "next": {"agentTriggerName": "releaser"}}],
        ),
        chaining.ai_agent(
            "releaser", ["sh", "-c", RELEASER], github={"permissions": {"contents": "write"}}
        ),
    ]


def _ls_remote(url: str, ca: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_SSL_CAINFO": str(ca), "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(
        ["git", "ls-remote", url], capture_output=True, text=True, check=False, env=env
    )


def test_a_plain_git_url_with_a_credentials_secret_clones_and_publishes_without_an_app(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    tmp_path: Path,
) -> None:
    """No GitHub App: a private repository on an HTTPS git host, named by its URL, its
    token from a Secret: cloned, committed to, published to its branch (no pull request)."""
    info = cluster_info
    installed = install(github, tmp_path)  # Only to have a token the git host accepts.
    token = github.mint_token(installed.installation, ["secret-plans"], {"contents": "write"})
    # The git host listens where the workspace containers and agents reach it, and its
    # certificate names that address.
    host_ip = info.pod_host
    tls = certs.serving(tmp_path / "tls", "git-host", (host_ip,))
    with GitServer(github, tmp_path / "git-host", tls=tls, host=host_ip) as host:
        ca = tls[0]
        host.create_repo(PRIVATE, {"README.md": "Hello Wrold\n"})
        url = host.clone_url(PRIVATE)
        assert url.startswith("https://") and "@" not in url
        anonymous = _ls_remote(url, ca)
        assert anonymous.returncode != 0 and "could not read Username" in anonymous.stderr
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": CREDENTIALS},
            "stringData": {"token": token},
        }
        _apply(info, namespace, [secret])
        # The host's private CA reaches the workspace containers and the agents' own git
        # through the operator's setting: a ConfigMap, as trust-manager keeps one.
        bundle = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "corp-ca"},
            "data": {"ca.crt": ca.read_text()},
        }
        _apply(info, namespace, [bundle])
        env = {**workspace_env(host), "AGENTCHAIN_WORKSPACE_CA_CONFIGMAP": "corp-ca"}
        with app_operator(operator, info, namespace, None, env):
            _apply(info, namespace, _git_host_agents(url))
            job = {
                "apiVersion": "labrats.work/v1alpha1",
                "kind": "AgentJob",
                "metadata": {"name": "fix-it"},
                "spec": {"agentRole": "developer", "prompt": "Fix the README."},
            }
            _apply(info, namespace, [job])
            developer, releaser = chain_jobs(info, namespace, count=2)
            assert [j["status"]["phase"] for j in (developer, releaser)] == ["Succeeded"] * 2
            chain_id = developer["status"]["chainId"]
            assert developer["status"]["workspace"]["repository"] == url

            # No contents: write, no credential: git asks for one and cannot get it.
            committed = agent_log(info, namespace, developer)
            assert "PUSH-REFUSED" in committed and "could not read Username" in committed
            assert host.resolve(PRIVATE, "developer-push") is None
            # contents: write: the credentialsSecret's token, through git's helper.
            released = agent_log(info, namespace, releaser)
            assert "Fix the typo" in released and "PUSHED" in released.splitlines()[-1]
            head = host.resolve(PRIVATE, "release-candidate")
            assert head is not None

            def published() -> Obj | None:
                name = developer["metadata"]["name"]
                root = operating.get_json(info, "agentjob", name, "-n", namespace)
                return _condition(root, "WorkspacePublished")

            operating.wait_until(published, timeout=90, what="the workspace published")
            condition = published()
            assert condition is not None and condition["status"] == "True", condition
            assert "(pushed)" in condition["message"]
            assert "Pull request" not in condition["message"]  # No GitHub, no pull request.
            branch = f"agentchain/{chain_id}"
            assert host.resolve(PRIVATE, branch) == head
            assert git_server_log(host, branch, PRIVATE)[0] == "Fix the typo"
            (push,) = [
                p for p in host.pushes if any(u.ref == f"refs/heads/{branch}" for u in p.updates)
            ]
            assert (
                push.status == 200 and push.identity == f"installation:{installed.installation.id}"
            )
            assert github.pulls(PRIVATE) == [] and github.requests("pulls/create") == []


def test_a_workspace_that_cannot_be_cloned_fails_the_job_visibly(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    """A repository the git server does not have: prepare fails, the agent never runs."""
    info = cluster_info
    missing = REPOSITORY.split("/")[0] + "/no-such-repository"
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)):
        script = "echo AGENT-RAN"
        _apply(
            info,
            namespace,
            [chaining.ai_agent("reader", ["sh", "-c", script], workspace={"repository": missing})],
        )
        job = {
            "apiVersion": "labrats.work/v1alpha1",
            "kind": "AgentJob",
            "metadata": {"name": "read-missing"},
            "spec": {"agentRole": "reader", "prompt": "Read the README."},
        }
        _apply(info, namespace, [job])
        (done,) = chain_jobs(info, namespace, count=1)
        status = done["status"]
        assert (status["phase"], status["reason"]) == ("Failed", "WorkspacePrepareFailed"), status
        assert "workspace-prepare" in status["message"] and "exited with code" in status["message"]
        assert "AGENT-RAN" not in (status.get("result") or "")
        pods = operating.get_json(info, "pods", "-n", namespace)["items"]
        (pod,) = [p for p in pods if p["metadata"]["labels"].get("job-name") == status["jobName"]]
        agent = next(s for s in pod["status"]["initContainerStatuses"] if s["name"] == "agent")
        assert "terminated" not in agent["state"], agent  # The agent never started.
        events = operating.get_json(info, "events", "-n", namespace)["items"]
        assert any(
            e["reason"] == "WorkspacePrepareFailed"
            and e["involvedObject"]["name"] == "read-missing"
            for e in events
        ), [e["reason"] for e in events]


PRIVATE_CHAINS = 6


def test_a_private_repository_clones_with_each_jobs_token_every_time(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    """Six chains at once on a private repository of the App's installation: every
    ``workspace-prepare`` clones with its job's token (the Secret holding it exists
    before the pod), none goes anonymous ("could not read Username")."""
    info = cluster_info
    git_server.create_repo(PRIVATE, {"README.md": "Hello Wrold\n"})
    assert repo.github.state.repos[PRIVATE.lower()].private
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        reader = chaining.ai_agent(
            "ai-private-reader",
            ["sh", "-c", TRIAGE],
            object_name="private-reader",
            workspace={"repository": PRIVATE, "keepFor": "0"},
            # Another repository than the event's: the agent must serve it.
            repositories=[REPOSITORY, PRIVATE],
            triggers=[{"source": "github", "events": ["issues.opened"]}],
        )
        _apply(info, namespace, [reader])
        for number in range(PRIVATE_CHAINS):
            _deliver(op, repo, f"-private-{number}")
        jobs: list[Obj] = []

        def ended() -> bool:
            nonlocal jobs
            jobs = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
            return len(jobs) == PRIVATE_CHAINS and all(
                (j.get("status") or {}).get("chainComplete") for j in jobs
            )

        operating.wait_until(ended, timeout=TIMEOUT, what="every private chain to end")
        outcomes = {
            j["metadata"]["name"]: (j["status"]["phase"], j["status"].get("message")) for j in jobs
        }
        assert all(phase == "Succeeded" for phase, _ in outcomes.values()), outcomes
        for job in jobs:
            assert "Hello Wrold" in agent_log(info, namespace, job)


def test_a_forks_pull_request_runs_but_is_not_published(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
) -> None:
    """A pull request from a fork: the chain runs on its head, commits, and ends; nothing
    is pushed to the base repository, no pull request is opened, and a Warning Event
    ``WorkspaceNotPublished`` on the job says why (publishFromForks is off)."""
    info = cluster_info
    head = git_server.resolve(REPOSITORY, "main")
    assert head is not None
    fixer = chaining.ai_agent(
        "ai-fork-fixer",
        ["sh", "-c", DEVELOPER],
        object_name="fork-fixer",
        workspace={"publish": True, "keepFor": "0"},
        github={"permissions": {"contents": "write"}},
        triggers=[{"source": "github", "events": ["pull_request.opened"]}],
    )
    with app_operator(operator, info, namespace, repo, workspace_env(git_server)) as op:
        _apply(info, namespace, [fixer])
        payload = app_delivery("pull_request", "opened", repo.installation.id)
        # GitHub keeps a fork's head commits in the base repository (refs/pull/N/head).
        payload["pull_request"]["head"]["sha"] = head
        payload["pull_request"]["head"]["repo"]["full_name"] = "mallory/Hello-World"
        body, headers = delivering.signed(op.webhook_secret, payload, event="pull_request")
        status, answer = delivering.send(op, body, headers)
        assert status == 202 and answer["jobs"], answer
        (job,) = chain_jobs(info, namespace, count=1)
        assert job["status"]["phase"] == "Succeeded", job["status"]
        chain_id = job["status"]["chainId"]
        warnings = [
            e
            for e in operating.get_json(info, "events", "-n", namespace)["items"]
            if e.get("reason") == "WorkspaceNotPublished"
        ]
        assert warnings and "mallory/Hello-World" in warnings[0]["message"], warnings
        # The publish Job is created before the chain is marked complete, so its absence
        # now is final.
        jobs = operating.get_json(info, "jobs", "-n", namespace)["items"]
        assert not [j for j in jobs if j["metadata"]["name"].startswith("agentchain-publish-")]
        assert git_server.resolve(REPOSITORY, f"agentchain/{chain_id}") is None
        assert not repo.github.requests("pulls/create")
