"""The local demo: from nothing to a finished three-agent chain you can watch.

``make demo`` (or ``python -m e2e.demo``) builds or reuses the control-plane
binaries, starts etcd, kube-apiserver, the controller manager, the scheduler,
the local node and Redis, installs the CRDs and the operator's RBAC, runs the
operator under its own ServiceAccount, applies seed 003's Issue → Fix → Review
agents (running the deterministic demo agent), sends a signed ``issues.opened``
delivery to the webhook and shows the chain progressing, then checks that the
dashboard opens the finished chain and prints its URL and how to log in (the admin
token).  Ctrl-C tears it all down.

GitHub is the local stand-in (``e2e/github/``, when GitHub's OpenAPI description is in
the cache e2e/setup.sh fills): the operator runs as a GitHub App installed on
``acme/webapp``, the delivery carries that installation, and at the end the demo prints
the comment the chain kept up to date on the issue, as the stand-in recorded it.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from e2e import delivering, operating
from e2e.controlplane.cluster import ClusterInfo, cluster, say, stop_on_signals
from e2e.github import GitHubStandIn
from e2e.github.spec import SpecMissing
from e2e.githubloop import Installed, install

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "config" / "samples" / "labrats.work_v1alpha1_aiagent_issue-fix-review.yaml"
NAMESPACE = "demo"
DEMO_REPOSITORY = "acme/webapp"
DEMO_ISSUE = 1


@contextlib.contextmanager
def github_standin(workdir: Path) -> Iterator[Installed | None]:
    """The GitHub stand-in with the App installed on acme/webapp; None without the spec."""
    try:
        standin = GitHubStandIn()
    except SpecMissing as missing:
        say(f"no GitHub stand-in ({missing}); run e2e/setup.sh to see the chain's comment")
        yield None
        return
    with standin:
        yield install(standin, workdir, repository=DEMO_REPOSITORY)


def send_delivery(op: operating.OperatorProcess, github: Installed | None) -> dict[str, object]:
    payload = delivering.issue_opened(DEMO_ISSUE)
    if github is not None:  # Delivered by the App: GitHub adds its installation.
        payload["installation"] = {"id": github.installation.id}
    body, headers = delivering.signed(op.webhook_secret, payload)
    status, answer = delivering.send(op, body, headers)
    say(f"webhook answered {status}: {json.dumps(answer)[:300]}")
    return answer


def watch_chain(info: ClusterInfo, timeout: float = 180) -> str | None:
    """A live table, redrawn until the chain is complete; the chain's id."""
    deadline = time.monotonic() + timeout
    previous = ""
    while time.monotonic() < deadline:
        table = info.kubectl("get", "agentjobs", "-n", NAMESPACE, check=False).stdout
        if table != previous:
            print(f"\n$ kubectl get agentjobs -n {NAMESPACE}\n{table}", flush=True)
            previous = table
        items = json.loads(info.kubectl("get", "agentjobs", "-n", NAMESPACE, "-o", "json").stdout)[
            "items"
        ]
        done = [i for i in items if (i.get("status") or {}).get("chainComplete")]
        if done:
            say("the chain is complete")
            return str(done[0]["status"].get("chainId") or "") or None
        time.sleep(1)
    say("the chain did not complete in time; see the operator log")
    return None


def dashboard_opens(op: operating.OperatorProcess, chain_id: str) -> bool:
    """Log in to the dashboard as a browser would and read the finished chain."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    login = urllib.request.Request(
        f"{op.internal_url}/ui/login",
        data=json.dumps({"token": op.admin_token}).encode(),
        headers={"Content-Type": "application/json", "Origin": op.internal_url},
    )
    try:
        with opener.open(login, timeout=10):
            pass
        with opener.open(f"{op.internal_url}/ui/api/chains/{NAMESPACE}/{chain_id}") as resp:
            layout = json.load(resp)
    except OSError as exc:
        say(f"the dashboard did not open the chain: {exc}")
        return False
    return bool(layout.get("complete")) and len(layout.get("nodes") or {}) == 3


def show_comment(github: Installed | None, timeout: float = 30) -> None:
    """The comment on the issue once it shows the chain's end, as the stand-in has it."""
    if github is None:
        return
    deadline = time.monotonic() + timeout
    comments = github.comments(DEMO_ISSUE)
    while time.monotonic() < deadline:
        comments = github.comments(DEMO_ISSUE)
        if comments and "The result appears here" not in comments[-1].body:
            break
        time.sleep(0.5)
    if not comments:
        say("no comment was written on the issue; see the operator log")
        return
    say(
        f"the comment the chain wrote on {DEMO_REPOSITORY}#{DEMO_ISSUE} (by "
        f"{comments[-1].author}; {len(comments)} comment(s), the GitHub stand-in's record):"
    )
    print("\n" + comments[-1].body, flush=True)


def run_demo(info: ClusterInfo, op: operating.OperatorProcess, github: Installed | None) -> None:
    info.kubectl("create", "namespace", NAMESPACE)
    say("applying seed 003's Issue → Fix → Review agents (demo agent as command)")
    info.kubectl("apply", "-n", NAMESPACE, "-f", str(SAMPLE))
    say("sending a signed issues.opened delivery to the webhook")
    send_delivery(op, github)
    chain_id = watch_chain(info)
    show_comment(github)
    chain_url = f"{op.internal_url}/ui/chains/{NAMESPACE}/{chain_id}" if chain_id else ""
    if chain_id and dashboard_opens(op, chain_id):
        say("the dashboard shows the finished chain")
    print(
        f"""
Where to look next:
  export KUBECONFIG={info.kubeconfig}
  kubectl get agentjobs -n {NAMESPACE}            # the chain (printer columns)
  kubectl get aiagents -n {NAMESPACE}             # agents and their Ready condition
  kubectl describe agentjob -n {NAMESPACE} <name> # status, next step, Events
  curl -H 'Authorization: Bearer {op.admin_token}' {op.url}/api/jobs?namespace={NAMESPACE}
  dashboard: {op.internal_url}/ui/   (internal listener: loopback here)
             log in with the admin token {op.admin_token}
             the chain: {chain_url or "(not complete)"}
  metrics:   {op.internal_url}/metrics
Press Ctrl-C to stop everything.""",
        flush=True,
    )


def main() -> int:
    stop_on_signals()
    with cluster() as info, github_standin(info.workdir) as github:
        # Ctrl-C is the demo's normal end: caught inside the cluster's context, so the
        # operator stops first, then the components, and the workdir is removed.
        try:
            say("installing CRDs and the operator's RBAC; starting the operator")
            # No job links in the comment: the dashboard's port is only known once started.
            env = github.env() | {"AGENTCHAIN_GITHUB_DASHBOARD_URL": ""} if github else {}
            with operating.running(info, env) as op:
                run_demo(info, op, github)
                while True:
                    time.sleep(3600)
        except KeyboardInterrupt:
            say("stopping")
    return 0


if __name__ == "__main__":
    sys.exit(main())
