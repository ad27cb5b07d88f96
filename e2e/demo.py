"""The local demo: from nothing to a finished three-agent chain you can watch.

``make demo`` (or ``python -m e2e.demo``, as root) builds or reuses the control-plane and
node binaries, starts etcd, kube-apiserver, the controller manager, the scheduler, the
real node (containerd, kubelet, kube-proxy, CoreDNS, kube-router) and Redis, installs the
CRDs and the operator's RBAC, runs the operator under its own ServiceAccount, applies seed
003's Issue → Fix → Review agents (running the deterministic demo agent), sends a signed
``issues.opened`` delivery to the webhook and shows the chain progressing, then checks
that the dashboard opens the finished chain and prints its URL and how to log in (the
admin token).  Ctrl-C tears it all down.

GitHub is the local stand-in (``e2e/github/``, when GitHub's OpenAPI description is in
the cache e2e/setup.sh fills): the operator runs as a GitHub App installed on
``acme/webapp``, the delivery carries that installation, and at the end the demo prints
the comment the chain kept up to date on the issue, as the stand-in recorded it.

Which agents run is said first (``plan``); every agent runs in a container on the real
node, which needs root and its tools (e2e/setup.sh installs them): without either the
demo refuses at once, saying why and what to do.
- by default the chain runs real agent CLIs in their reference images
  (``images/agent/Dockerfile``) on the real node (``e2e/runtime_stage.py``): seed 003's
  chain of ``e2e/runtime_chain.py``, triage (Claude Code) -> developer (codex, committing
  in the chain's workspace) -> reviewer (Claude Code, delegating to a security agent).
  With ``ANTHROPIC_API_KEY`` and/or ``OPENAI_API_KEY`` in the environment the CLIs call
  that provider (with only one of them every step runs that provider's CLI); without
  either they call the stand-in model server (``e2e/models``), which answers the chain's
  scripted turns;
- with ``AGENTCHAIN_DEMO_AGENTS=command``, the deterministic demo agent is each step's
  command, in the e2e agent image (``images/e2e-agent``, built from this tree) on the
  real node, as the test suite's agents run;
- with a cluster named by ``AGENTCHAIN_E2E_KUBECONFIG``, the demo agent as the command,
  in that cluster.
"""

from __future__ import annotations

import contextlib
import copy
import http.cookiejar
import json
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e import delivering, operating, realnodes, runtime_stage
from e2e.controlplane import realnode
from e2e.controlplane.cluster import ClusterInfo, say, stop_on_signals
from e2e.github import GitHubStandIn
from e2e.github.spec import SpecMissing
from e2e.githubloop import ISSUE, REPOSITORY, Installed, install
from e2e.runtime_chain import (
    apply,
    chain_complete,
    chain_script,
    deliver_issue,
    secrets_for_models,
    seed_chain,
)

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "config" / "samples" / "labrats.work_v1alpha1_aiagent_issue-fix-review.yaml"
NAMESPACE = "demo"
DEMO_REPOSITORY = "acme/webapp"
DEMO_ISSUE = 1
AGENTS_ENV = "AGENTCHAIN_DEMO_AGENTS"  # "command": the demo agent, even as root
# provider -> the variable holding its API key, and the runtime and model that call it.
PROVIDERS = {
    "anthropic": ("ANTHROPIC_API_KEY", "claude-code", "claude-sonnet-4-5"),
    "openai": ("OPENAI_API_KEY", "codex", "gpt-5"),
}
# What the reference images need besides the real node's own tools.
IMAGE_TOOLS = ("buildah", "mmdebstrap")
Obj = dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """Where the demo's agents run and which model they call, and the sentence saying so."""

    images: bool  # real CLIs in their reference images on the real node, else the command
    providers: tuple[str, ...]  # the real providers called (none: the stand-in model)
    why: str
    refused: bool = False  # the demo cannot run here; ``why`` says why and what to do


def plan(env: Mapping[str, str], euid: int, missing: Sequence[str]) -> Plan:
    """The demo's agents for this environment, this user and these missing tools."""
    command = "the deterministic demo agent runs as each step's command"
    if env.get("AGENTCHAIN_E2E_KUBECONFIG") or env.get("AGENTCHAIN_E2E_USE_KUBECONFIG") == "1":
        why = "an existing cluster is named, and the real node is part of the local one only"
        return Plan(False, (), f"{why}: {command} in that cluster")
    if euid != 0:
        why = (
            "not root: the real node (containerd, kubelet, iptables), where the agents' "
            "containers run, needs root; run `make demo` as root, or point "
            "AGENTCHAIN_E2E_KUBECONFIG at a cluster"
        )
        return Plan(False, (), why, refused=True)
    if missing:
        why = f"the real node needs {', '.join(missing)} (e2e/setup.sh installs them)"
        return Plan(False, (), why, refused=True)
    if env.get(AGENTS_ENV, "").strip() == "command":
        on_real = f"{command} in the e2e agent image's containers on the real node"
        return Plan(False, (), f"{AGENTS_ENV}=command: {on_real}")
    providers = tuple(p for p, (key, _, _) in PROVIDERS.items() if env.get(key, "").strip())
    images = "real agent CLIs run in their reference images on the real node"
    if providers:
        keys = " and ".join(PROVIDERS[p][0] for p in providers)
        return Plan(True, providers, f"{images}, calling {' and '.join(providers)} ({keys} set)")
    unset = " or ".join(key for key, _, _ in PROVIDERS.values())
    return Plan(True, (), f"{images}, calling the stand-in model server (no {unset} set)")


def missing_tools() -> list[str]:
    """The real node's and the image builds' tools this machine lacks."""
    tools = [*realnode.REQUIRED, *IMAGE_TOOLS]
    return [tool for tool in tools if shutil.which(tool, path=realnode.PATH) is None]


def runtimes_for(providers: Sequence[str]) -> dict[str, str]:
    """Each agent's runtime: the seed chain's (Claude Code, codex for the developer)
    unless one provider's key alone is given, whose CLI then runs every step."""
    chain = {"ai-triage": "claude-code", "ai-developer": "codex",
             "ai-reviewer": "claude-code", "ai-security": "claude-code"}  # fmt: skip
    if len(providers) == 1:
        only = PROVIDERS[providers[0]][1]
        return dict.fromkeys(chain, only)
    return chain


def for_providers(agents: Sequence[Obj], providers: Sequence[str]) -> list[Obj]:
    """The seed chain's AiAgents calling the real providers: no base URL (the CLI's own
    endpoint), the provider's Secret and model, the CLI's own retries, more turns."""
    runtimes = runtimes_for(providers)
    by_runtime = {runtime: (name, model) for name, (_, runtime, model) in PROVIDERS.items()}
    changed = []
    for agent in agents:
        agent = copy.deepcopy(agent)
        spec = agent["spec"]
        runtime = runtimes[spec["triggerName"]]
        secret, model = by_runtime[runtime]
        spec["defaultModel"] = model
        spec["runtime"] = {
            "type": runtime,
            "credentials": {"secretName": secret, "key": "api-key"},
            "maxTurns": 30,
        }
        spec["env"] = [e for e in spec["env"] if e["name"] != "AGENTCHAIN_MODEL_RETRIES"]
        changed.append(agent)
    return changed


def provider_secrets(env: Mapping[str, str], providers: Sequence[str]) -> list[Obj]:
    """A Secret per provider, holding the key from the demo's environment."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": provider},
            "stringData": {"api-key": env[PROVIDERS[provider][0]].strip()},
        }
        for provider in providers
    ]


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


def _ended(items: list[Obj]) -> bool:
    return any((i.get("status") or {}).get("chainComplete") for i in items)


def watch_chain(
    info: ClusterInfo,
    timeout: float = 180,
    namespace: str = NAMESPACE,
    done: Callable[[list[Obj]], bool] = _ended,
) -> str | None:
    """A live table, redrawn until the chain is complete (``done``); the chain's id."""
    deadline = time.monotonic() + timeout
    previous = ""
    while time.monotonic() < deadline:
        table = info.kubectl("get", "agentjobs", "-n", namespace, check=False).stdout
        if table != previous:
            print(f"\n$ kubectl get agentjobs -n {namespace}\n{table}", flush=True)
            previous = table
        found = info.kubectl("get", "agentjobs", "-n", namespace, "-o", "json").stdout
        items: list[Obj] = json.loads(found)["items"]
        if done(items):
            say("the chain is complete")
            ids = [str((i.get("status") or {}).get("chainId") or "") for i in items]
            return next((i for i in ids if i), None)
        time.sleep(1)
    say("the chain did not complete in time; see the operator log")
    return None


def show_pods(info: ClusterInfo, namespace: str) -> None:
    """The chain's pods as kubectl shows them (their containers, on the real node)."""
    table = info.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False).stdout
    print(f"\n$ kubectl get pods -n {namespace} -o wide\n{table}", flush=True)


def dashboard_opens(
    op: operating.OperatorProcess, chain_id: str, namespace: str = NAMESPACE, nodes: int = 3
) -> bool:
    """Log in to the dashboard as a browser would and read the finished chain, of
    ``nodes`` jobs (0: any number)."""
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
        with opener.open(f"{op.internal_url}/ui/api/chains/{namespace}/{chain_id}") as resp:
            layout = json.load(resp)
    except OSError as exc:
        say(f"the dashboard did not open the chain: {exc}")
        return False
    found = len(layout.get("nodes") or {})
    return bool(layout.get("complete")) and (found == nodes if nodes else found > 0)


def show_comment(github: Installed | None, timeout: float = 30, issue: int = DEMO_ISSUE) -> None:
    """The comment on the issue once it shows the chain's end, as the stand-in has it."""
    if github is None:
        return
    deadline = time.monotonic() + timeout
    comments = github.comments(issue)
    while time.monotonic() < deadline:
        comments = github.comments(issue)
        if comments and "The result appears here" not in comments[-1].body:
            break
        time.sleep(0.5)
    if not comments:
        say("no comment was written on the issue; see the operator log")
        return
    say(
        f"the comment the chain wrote on {github.repository}#{issue} (by "
        f"{comments[-1].author}; {len(comments)} comment(s), the GitHub stand-in's record):"
    )
    print("\n" + comments[-1].body, flush=True)


def where_to_look(info: ClusterInfo, op: operating.OperatorProcess, namespace: str,
                  chain_url: str) -> None:  # fmt: skip
    print(
        f"""
Where to look next:
  export KUBECONFIG={info.kubeconfig}
  kubectl get agentjobs -n {namespace} -o wide    # the chain (printer columns)
  kubectl get aiagents -n {namespace}             # agents and their Ready condition
  kubectl describe agentjob -n {namespace} <name> # status, next step, Events
  kubectl logs -n {namespace} <pod>               # an agent's transcript
  curl -H 'Authorization: Bearer {op.admin_token}' {op.url}/api/jobs?namespace={namespace}
  dashboard: {op.internal_url}/ui/   (internal listener)
             log in with the admin token {op.admin_token}
             the chain: {chain_url or "(not complete)"}
  metrics:   {op.internal_url}/metrics
{END}""",
        flush=True,
    )


END = "Press Ctrl-C to stop everything."


def run_demo(info: ClusterInfo, op: operating.OperatorProcess, github: Installed | None) -> None:
    info.kubectl("create", "namespace", NAMESPACE)
    say("applying seed 003's Issue → Fix → Review agents (demo agent as command)")
    info.kubectl("apply", "-n", NAMESPACE, "-f", str(SAMPLE))
    say("sending a signed issues.opened delivery to the webhook")
    send_delivery(op, github)
    chain_id = watch_chain(info)
    show_pods(info, NAMESPACE)
    show_comment(github)
    chain_url = f"{op.internal_url}/ui/chains/{NAMESPACE}/{chain_id}" if chain_id else ""
    if chain_id and dashboard_opens(op, chain_id):
        say("the dashboard shows the finished chain")
    where_to_look(info, op, NAMESPACE, chain_url)


def run_in_images(stage: runtime_stage.Stage, chosen: Plan, env: Mapping[str, str]) -> None:
    """Seed 003's chain of real CLIs in their reference images, from GitHub's example
    issue on the stand-in's repository."""
    assert stage.github is not None
    namespace = runtime_stage.NAMESPACE
    agents = seed_chain(stage.standin)
    if chosen.providers:
        secrets = provider_secrets(env, chosen.providers)
        agents = for_providers(agents, chosen.providers)
    else:
        secrets = secrets_for_models()
        stage.standin.script(*chain_script())
    runtimes = runtimes_for(chosen.providers)
    said = ", ".join(f"{agent} ({runtime})" for agent, runtime in runtimes.items())
    say(f"applying seed 003's chain on real CLIs: {said}")
    apply(stage.info, namespace, [*secrets, *agents])
    say(f"sending GitHub's signed issues.opened example for {REPOSITORY}#{ISSUE}")
    deliver_issue(stage.operator, stage.github)

    # A model that does not delegate ends the chain with three jobs, not four.
    def done(jobs: list[Obj]) -> bool:
        return chain_complete(jobs) or (bool(chosen.providers) and _ended(jobs))

    chain_id = watch_chain(stage.info, 900, namespace, done)
    show_pods(stage.info, namespace)
    show_comment(stage.github, 60, ISSUE)
    op = stage.operator
    chain_url = f"{op.internal_url}/ui/chains/{namespace}/{chain_id}" if chain_id else ""
    # The stand-in's chain delegates once: four jobs. A real model's may not.
    nodes = 0 if chosen.providers else 4
    if chain_id and dashboard_opens(op, chain_id, namespace, nodes):
        say("the dashboard shows the finished chain")
    where_to_look(stage.info, op, namespace, chain_url)


@contextlib.contextmanager
def command_stage() -> Iterator[tuple[ClusterInfo, operating.OperatorProcess, Installed | None]]:
    """The command path's cluster (on the real node with the e2e agent image imported:
    the agents name no image, so the operator's default, that image, is theirs; or the
    cluster the environment names), GitHub stand-in and operator, torn down on the way
    out (the operator first, then the components; the workdir is removed)."""
    cluster = realnodes.cluster_with_agent_image()
    with cluster as info, github_standin(info.workdir) as github:
        say("installing CRDs and the operator's RBAC; starting the operator")
        # No job links in the comment: the dashboard's port is only known once started.
        env = github.env() | {"AGENTCHAIN_GITHUB_DASHBOARD_URL": ""} if github else {}
        with operating.running(info, env) as op:
            yield info, op, github


def _until_interrupted() -> None:
    while True:
        time.sleep(3600)


def main() -> int:
    chosen = plan(os.environ, os.geteuid(), missing_tools())
    if chosen.refused:
        say(f"the demo cannot run here: {chosen.why}")
        return 2
    stop_on_signals()
    say(f"agents: {chosen.why}")
    # Ctrl-C is the demo's normal end: caught inside the cluster's context, so the
    # operator stops first, then the components, and the workdir is removed.
    if chosen.images:
        runtimes = tuple(sorted(set(runtimes_for(chosen.providers).values())))
        with runtime_stage.stage(runtimes, github=True) as stage:
            try:
                run_in_images(stage, chosen, os.environ)
                _until_interrupted()
            except KeyboardInterrupt:
                say("stopping")
        return 0
    with command_stage() as (info, op, github):
        try:
            run_demo(info, op, github)
            _until_interrupted()
        except KeyboardInterrupt:
            say("stopping")
    return 0


if __name__ == "__main__":
    sys.exit(main())
