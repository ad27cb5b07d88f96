"""A GitHub token per job, on the real control plane with the GitHub stand-in.

Aspects covered:
* a job whose AiAgent declares ``github.permissions`` gets an installation token in its
  Secret (``github-token``), reaching the pod as ``GITHUB_TOKEN`` through an optional
  ``secretKeyRef`` (never a literal value), with ``GITHUB_API_URL``;
* the token is minted for the event's repository and exactly the declared permissions:
  it comments on the issue, but cannot read another private repository (404) or open a
  pull request (403, ``pull_requests`` not declared);
* ``POST /api/github/token`` with the job's own token gives a fresh token of the same
  scope (an admin token is refused: it is no job's), at most 24 per job (then 429);
* when the job ends, every token minted for it stops working (revoked at GitHub);
* an agent that declares nothing gets no token and no variable; one that declares a
  permission the App lacks runs anyway, without the token, with a Warning Event
  ``GitHubTokenUnavailable`` naming ``PermissionMissing``;
* an agent calls the API itself from its pod with ``GITHUB_TOKEN`` at ``GITHUB_API_URL``
  (on the real node the stand-in listens on the node's bridge address): its comment is
  on the issue, made with an installation token.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from agentchain.github import tokenminting
from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.githubloop import ISSUE, REPOSITORY, Installed, app_delivery, app_operator, install

Obj = dict[str, Any]
TIMEOUT = 120.0
SLEEP_SECONDS = 25
NO_COMMENT = {"writeBack": {"comment": False}}
POD_COMMENT = "Commented from the agent's own pod."
# The agent's own call: what a coding agent's ``gh issue comment`` does, with the Python
# every agent image has. A failed call fails the job (urllib raises).
CALLER = f"""
import json, os, urllib.request
url = os.environ["GITHUB_API_URL"] + "/repos/{REPOSITORY}/issues/{ISSUE}/comments"
body = json.dumps({{"body": {POD_COMMENT!r}}}).encode()
request = urllib.request.Request(url, method="POST", data=body,
    headers={{"Authorization": "Bearer " + os.environ["GITHUB_TOKEN"],
             "Accept": "application/vnd.github+json", "Content-Type": "application/json"}})
with urllib.request.urlopen(request, timeout=30) as answer:
    print("commented:", answer.status)
"""


def _job_of(info: ClusterInfo, namespace: str, agent: str) -> Obj:
    found: list[Obj] = []

    def launched() -> bool:
        items = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
        found[:] = [
            i
            for i in items
            if i["spec"]["agentRole"] == agent and (i.get("status") or {}).get("jobName")
        ]
        return bool(found)

    operating.wait_until(launched, timeout=TIMEOUT, what=f"the {agent} job to launch")
    return found[0]


def _call(url: str, token: str, method: str = "GET", body: Obj | None = None) -> tuple[int, Obj]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "Content-Type": "application/json",
    }
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status), json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code), json.loads(error.read() or b"{}")


def _env(batch: Obj) -> dict[str, Obj]:
    container = batch["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e for e in container["env"]}


def test_job_token_scope_refresh_and_revocation(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    tmp_path: Path,
) -> None:
    info = cluster_info
    installed: Installed = install(github, tmp_path)
    agents = [
        chaining.agent(
            "tok",
            "--no-context",
            "--sleep",
            str(SLEEP_SECONDS),
            github="issues.opened",
            github_settings={**NO_COMMENT, "permissions": {"issues": "write"}},
        ),
        chaining.agent("plain", "--no-context", github="issues.opened", github_settings=NO_COMMENT),
        chaining.ai_agent(
            "caller",
            chaining.python_command(CALLER),
            triggers=[{"source": "github", "events": ["issues.opened"]}],
            github={**NO_COMMENT, "permissions": {"issues": "write"}},
        ),
        chaining.agent(
            "greedy",
            "--no-context",
            github="issues.opened",
            github_settings={**NO_COMMENT, "permissions": {"actions": "write"}},
        ),
    ]
    with app_operator(operator, info, namespace, installed) as op:
        chaining.apply(info, namespace, *agents)
        payload = app_delivery("issues", "opened", installed.installation.id)
        status, answer = delivering.send(op, *delivering.signed(op.webhook_secret, payload))
        assert status == 202 and len(answer["jobs"]) == 4, answer

        job = _job_of(info, namespace, "tok")
        secret = chaining.job_secret(info, namespace, job)
        token = secret["github-token"]
        batch = operating.get_json(info, "job", job["status"]["jobName"], "-n", namespace)
        env = _env(batch)
        assert env["GITHUB_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
        assert "value" not in env["GITHUB_TOKEN"]
        assert env["GITHUB_API_URL"]["value"] == github.url

        (mint, *_) = [
            r
            for r in github.requests("apps/create-installation-access-token", status=201)
            if r.body and r.body.get("permissions") == {"issues": "write"}
        ]
        assert mint.body == {"repositories": ["Hello-World"], "permissions": {"issues": "write"}}
        api = github.url
        made = _call(
            f"{api}/repos/{REPOSITORY}/issues/{ISSUE}/comments", token, "POST", {"body": "hi"}
        )
        assert made[0] == 201
        assert _call(f"{api}/repos/Codertocat/secret-plans", token)[0] == 404
        pull = {"title": "x", "head": "main", "base": "main"}
        assert _call(f"{api}/repos/{REPOSITORY}/pulls", token, "POST", pull)[0] == 403

        refreshed_status, refreshed = _call(
            f"{op.url}/api/github/token", secret["token"], "POST", {}
        )
        assert refreshed_status == 200, refreshed
        fresh = refreshed["token"]
        assert fresh != token and github.token_usable(fresh)
        assert refreshed["repository"] == REPOSITORY
        assert refreshed["permissions"] == {"issues": "write"}
        assert _call(f"{op.url}/api/github/token", op.admin_token, "POST", {})[0] == 403
        for _ in range(tokenminting.MAX_TOKENS_PER_JOB - 2):  # Launch + one refresh so far.
            assert _call(f"{op.url}/api/github/token", secret["token"], "POST", {})[0] == 200
        assert _call(f"{op.url}/api/github/token", secret["token"], "POST", {})[0] == 429

        def revoked() -> bool:
            return not github.token_usable(token) and not github.token_usable(fresh)

        operating.wait_until(revoked, timeout=SLEEP_SECONDS + TIMEOUT, what="the tokens revoked")
        ended = operating.get_json(info, "agentjob", job["metadata"]["name"], "-n", namespace)
        assert ended["status"]["phase"] == "Succeeded"

        plain = _job_of(info, namespace, "plain")
        assert "github-token" not in chaining.job_secret(info, namespace, plain)
        plain_batch = operating.get_json(info, "job", plain["status"]["jobName"], "-n", namespace)
        assert "GITHUB_TOKEN" not in _env(plain_batch)

        greedy = _job_of(info, namespace, "greedy")
        assert "github-token" not in chaining.job_secret(info, namespace, greedy)
        name = greedy["metadata"]["name"]
        events = [
            e
            for e in chaining.events_for(info, namespace, name)
            if e["reason"] == "GitHubTokenUnavailable"
        ]
        assert len(events) == 1 and "PermissionMissing" in events[0]["message"]
        operating.wait_until(
            lambda: (
                operating.get_json(info, "agentjob", name, "-n", namespace)["status"].get("phase")
                == "Succeeded"
            ),
            timeout=TIMEOUT,
            what="the greedy job to run without its token",
        )

        caller = _job_of(info, namespace, "caller")
        ended = chaining.wait_job(info, namespace, caller["metadata"]["name"], timeout=TIMEOUT)
        assert ended["status"]["phase"] == "Succeeded", ended["status"]
        assert chaining.output_of(info, namespace, ended) == "commented: 201"
        assert [c.body for c in installed.comments()].count(POD_COMMENT) == 1
        (by_pod,) = [
            r
            for r in github.requests("issues/create-comment", status=201)
            if r.body == {"body": POD_COMMENT}
        ]
        assert by_pod.identity == f"installation:{installed.installation.id}", by_pod
