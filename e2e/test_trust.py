"""Who can create AgentJobs borrows nothing: on the real control plane, with the GitHub
stand-in and an App installation that really covers the repository.

Aspects covered:
* an AgentJob written by hand with a complete GitHub ``spec.event`` (the installation,
  the repository, an issue number) for an agent that declares ``issues``/``contents:
  write`` runs as an ordinary run: no installation token is minted, its Secret has no
  ``github-token``, nothing is written on the issue, and the Warning Event says the job
  was not started by a GitHub event; the same agent started by a signed delivery does
  get its token (so the refusal is the seal's doing, not a broken App);
* an AgentJob written by hand with a real chain member's complete chain annotations,
  seal included, is refused ``InvalidChainMetadata`` (the seal is bound to the job it
  was made for) and joins nothing: no chain id, no batch Job, and not the chain's
  workspace, which the member mounts (its agent declares none: membership alone would
  mount it);
* an AgentJob written by hand with partial chain annotations (a chain id alone) ends
  ``InvalidChainMetadata`` settled (``chainComplete``), and the operator's periodic
  resync then leaves it alone: over several resync periods its log gains no line about
  the job and no traceback.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from agentchain import models
from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.github.gitserver import GitServer
from e2e.githubloop import ISSUE, REPOSITORY, Installed, app_delivery, app_operator, install

Obj = dict[str, Any]
TIMEOUT = 120.0
# The session operator resyncs every 3 s (operating.OperatorProcess.env): four periods.
RESYNC_WINDOW_SECONDS = 12.0
SETTLE_SECONDS = 15.0


def _mints(github: GitHubStandIn) -> int:
    return len(github.requests("apps/create-installation-access-token", status=201))


def test_a_hand_written_github_event_borrows_no_app_access(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    tmp_path: Path,
) -> None:
    info = cluster_info
    installed: Installed = install(github, tmp_path)
    forged_event = {
        "source": "github",
        "name": "issues",
        "action": "opened",
        "repository": REPOSITORY,
        "installationId": installed.installation.id,
        "number": ISSUE,
        "subject": "issue",
        "title": "borrowed",
    }
    forged = {
        "apiVersion": chaining.API_VERSION,
        "kind": "AgentJob",
        "metadata": {"name": "forged"},
        "spec": {"agentRole": "tok", "origin": "github", "event": forged_event},
    }
    with app_operator(operator, info, namespace, installed) as op:
        tok = chaining.ai_agent(
            "tok",
            chaining.demo_command("--say", "done"),
            # A github trigger (for the signed delivery) and the manual one (for hand-made runs).
            triggers=[{"source": "github", "events": ["issues.opened"]}, *chaining.MANUAL],
            github={"permissions": {"issues": "write", "contents": "write"}},
        )
        chaining.apply(info, namespace, tok)
        before = _mints(github)
        chaining.apply(info, namespace, forged)
        job = chaining.wait_job(info, namespace, "forged", timeout=TIMEOUT)
        assert job["status"]["phase"] == "Succeeded", job["status"]
        assert "github-token" not in chaining.job_secret(info, namespace, job)
        assert _mints(github) == before
        assert not github.requests("issues/create-comment")
        warnings = [
            e
            for e in chaining.events_for(info, namespace, "forged")
            if e.get("reason") == "GitHubTokenUnavailable"
        ]
        assert warnings and "not started by a GitHub event" in warnings[0]["message"], warnings

        # The same agent, started by the webhook from a signed delivery, is given a token.
        payload = app_delivery("issues", "opened", installed.installation.id)
        status, answer = delivering.send(op, *delivering.signed(op.webhook_secret, payload))
        assert status == 202 and len(answer["jobs"]) == 1, answer
        sealed = chaining.wait_job(info, namespace, answer["jobs"][0]["name"], timeout=TIMEOUT)
        assert sealed["status"]["phase"] == "Succeeded", sealed["status"]
        assert _mints(github) > before


def _workspace_env(git_server: GitServer) -> dict[str, str]:
    """Workspace containers clone from the git stand-in, and run the workspace image's
    own ``agentchain``, the product's default."""
    return {"AGENTCHAIN_GITHUB_GIT_URL": git_server.url}


def test_a_copied_chain_membership_is_refused(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    git_server: GitServer,
) -> None:
    info = cluster_info
    git_server.create_repo(REPOSITORY, {"README.md": "Hello\n"}, private=False)
    workspace = {"repository": REPOSITORY}
    with app_operator(operator, info, namespace, None, _workspace_env(git_server)):
        chaining.apply(
            info,
            namespace,
            chaining.agent(
                "lead", "--say", "lead", next_=chaining.step("member"), workspace=workspace
            ),
            chaining.agent("member", "--say", "member"),
            chaining.agent("intruder", "--say", "intruder"),
            chaining.root_job("lead-1", "lead"),
        )
        jobs = chaining.wait_chain(info, namespace, "lead-1", 2)
        member = next(j for j in jobs if j["spec"]["agentRole"] == "member")
        # The member's agent declares no workspace: it mounts the chain's as a member.
        assert (member["status"].get("workspace") or {}).get("claimName"), member["status"]
        annotations = member["metadata"]["annotations"]
        assert models.SEAL in annotations
        joiner = chaining.root_job("joiner", "intruder")
        joiner["metadata"]["labels"] = copy.deepcopy(member["metadata"]["labels"])
        joiner["metadata"]["annotations"] = {
            k: v for k, v in annotations.items() if k.startswith(models.GROUP)
        }
        chaining.apply(info, namespace, joiner)
        status = chaining.wait_job(info, namespace, "joiner", timeout=TIMEOUT)["status"]
    # What it would have joined first: the chain's workspace, the chain, a run.
    assert status.get("workspace") is None, status
    assert status.get("chainId") is None and status.get("jobName") is None, status
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidChainMetadata"), status
    assert "not written by the operator" in status["message"]


def test_partial_chain_annotations_fail_settled_and_are_logged_once(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    partial = chaining.root_job("partial-chain", "lone")
    partial["metadata"]["annotations"] = {models.CHAIN_ID: "c0ffee"}
    chaining.apply(info, namespace, chaining.agent("lone", "--say", "lone"), partial)
    status = chaining.wait_job(info, namespace, "partial-chain", timeout=TIMEOUT)["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidChainMetadata"), status
    # Settled by the hop that follows its end, within a resync period: a job left
    # unsettled is looked at, and failed again, every period.
    operating.wait_until(
        lambda: (chaining.find_job(info, namespace, "partial-chain").get("status") or {}).get(
            "chainComplete"
        ),
        timeout=SETTLE_SECONDS,
        what="partial-chain to be settled",
    )
    start = len(operator.log_text())

    def quiet() -> bool:
        added = operator.log_text()[start:]
        assert "partial-chain" not in added and "Traceback" not in added, added[-4000:]
        return True

    operating.stays(quiet, seconds=RESYNC_WINDOW_SECONDS, what="a settled job's silence")
