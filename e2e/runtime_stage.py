"""A real node with the reference agent images, the operator and the stand-in model
server, for running runner-runtime AgentJobs in real containers
(``e2e/test_runtime_images.py``, ``make demo``'s real agent CLIs,
``bench/bench_runtime_images.py``).

``stage()`` builds the images (cached by their inputs), starts ``cluster()`` (the real node),
imports them, and starts the stand-in model server and the operator as host processes
listening on the node's bridge address: pods cannot reach this machine's loopback. The
operator is told the images' references (``AGENTCHAIN_RUNTIME_IMAGE_*``), so an
AiAgent with a runtime and no ``image`` runs in its reference image with no command of
the caller's. AiAgents live in ``NAMESPACE``; ``agent`` writes one whose ``baseUrl`` is
the stand-in, with its credential from a Secret.

``stage(github=True)`` adds what a chain from a GitHub issue needs: the GitHub stand-in
with the App installed (the operator acts as it; only the operator talks to the API, so
it listens on the loopback), its git server on the bridge address holding the examples'
repository with a typo in its README (the workspace containers clone it), and the
operator image, built from the repository's Dockerfile and imported, as the workspace
containers' image (``AGENTCHAIN_WORKSPACE_IMAGE``), as a release runs them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from e2e import chaining, operating
from e2e.controlplane import agent_images, operator_image
from e2e.controlplane.cluster import ClusterInfo, cluster, finish_workdir, make_workdir
from e2e.github import GitHubStandIn
from e2e.github.gitserver import GitServer
from e2e.githubloop import REPOSITORY, Installed, install
from e2e.models import DEFAULT_API_KEY, ModelStandIn
from e2e.runtime_chain import README

NAMESPACE = "agents"
MODELS = {
    "claude-code": "claude-sonnet-4-5",
    "codex": "gpt-5",
    "opencode": "gpt-5",
    "gemini": "gemini-2.5-pro",
}
# The stand-in's API each runtime's CLI speaks (``ModelStandIn.exchanges``).
APIS = {"claude-code": "anthropic", "codex": "responses", "opencode": "chat", "gemini": "gemini"}
# What the OpenAI-compatible CLIs append their paths to; the others name their own.
BASE_PATHS = {"codex": "/v1", "opencode": "/v1"}
Obj = dict[str, Any]


@dataclass
class Stage:
    info: ClusterInfo
    operator: operating.OperatorProcess
    standin: ModelStandIn
    images: dict[str, operator_image.Built]
    github: Installed | None = None  # with ``stage(github=True)``
    workspace_image: str = ""  # with ``stage(github=True)``: the operator image's reference

    def agent(
        self, name: str, runtime: str, key: str = DEFAULT_API_KEY, **runtime_fields: Any
    ) -> Obj:
        """An AiAgent of ``runtime`` against the stand-in, applied with its Secret, which
        holds ``key`` (the stand-in refuses any other than its own)."""
        secret = f"{name}-key"
        base_url = self.standin.url + BASE_PATHS.get(runtime, "")
        agent = {
            "apiVersion": "labrats.work/v1alpha1",
            "kind": "AiAgent",
            "metadata": {"name": name},
            "spec": {
                "triggerName": name,
                "defaultModel": MODELS[runtime],
                "eventTriggers": [{"source": "manual"}],
                "env": [
                    # A refused key or a broken request fails at once, not after the
                    # CLI's ten retries with backoff.
                    {"name": "AGENTCHAIN_MODEL_RETRIES", "value": "0"},
                    # MCP tools in Claude Code's tool list itself, not behind ToolSearch.
                    {"name": "ENABLE_TOOL_SEARCH", "value": "false"},
                ],
                "runtime": {
                    "type": runtime,
                    "baseUrl": base_url,
                    "credentials": {"secretName": secret, "key": "api-key"},
                    **runtime_fields,
                },
            },
        }
        credential = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret},
            "stringData": {"api-key": key},
        }
        chaining.apply(self.info, NAMESPACE, credential, agent)
        return agent

    def start_job(self, name: str, agent: str) -> None:
        chaining.apply(self.info, NAMESPACE, chaining.root_job(name, agent))

    def status(self, job: str) -> Obj:
        found = operating.get_json(self.info, "agentjob", job, "-n", NAMESPACE)
        return dict(found.get("status") or {})

    def ended(self, job: str, timeout: float = 240.0) -> Obj:
        """The job's status once it Succeeded or Failed; an AssertionError with the
        pods and events of the namespace when it did not end in time."""
        deadline = time.monotonic() + timeout
        while (status := self.status(job)).get("phase") not in ("Succeeded", "Failed"):
            if time.monotonic() > deadline:
                pods = self.info.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide", check=False)
                events = self.info.kubectl("get", "events", "-n", NAMESPACE, check=False)
                raise AssertionError(f"{job} did not end: {status}\n{pods.stdout}{events.stdout}")
            time.sleep(0.5)
        return status

    def pods(self, job: str) -> list[Obj]:
        selector = f"labrats.work/agentjob={job}"
        found = operating.get_json(self.info, "pods", "-n", NAMESPACE, "-l", selector)
        return list(found["items"])

    def logs(self, job: str) -> str:
        return "".join(
            self.info.kubectl("logs", "-n", NAMESPACE, p["metadata"]["name"], check=False).stdout
            for p in self.pods(job)
        )


@contextlib.contextmanager
def stage(
    runtimes: tuple[str, ...] = agent_images.RUNTIMES,
    *,
    github: bool = False,
) -> Iterator[Stage]:
    """The real node with ``runtimes``' images, the stand-in and the operator (and with
    ``github``, the GitHub stand-ins and the workspace image)."""
    images = {runtime: agent_images.build(runtime) for runtime in runtimes}
    # The operator image's archive beside the agents' (not in the real node's image
    # cache): a build deletes its older archives, and this tree's would evict the one
    # every other real-node test of a different tree is using.
    workspace = (
        operator_image.build(agent_images.ROOT, archives=agent_images.archive_dir())
        if github
        else None
    )
    workdir = make_workdir()
    succeeded = False
    try:
        with cluster(workdir) as info, contextlib.ExitStack() as stack:
            node = info.real_node
            assert node is not None
            for image in [*images.values(), *([workspace] if workspace else [])]:
                agent_images.import_into(node.paths.containerd_socket, image)
            gateway = node.network.gateway
            env = {
                f"AGENTCHAIN_RUNTIME_IMAGE_{runtime.upper().replace('-', '_')}": image.ref
                for runtime, image in images.items()
            }
            standin = stack.enter_context(ModelStandIn(host=gateway))
            installed = None
            if workspace is not None:
                installed, git = _github(stack, info, gateway)
                env |= installed.env()
                env["AGENTCHAIN_GITHUB_GIT_URL"] = git.url
                env["AGENTCHAIN_WORKSPACE_IMAGE"] = workspace.ref
            op = stack.enter_context(operating.running(info, env, host=gateway))
            info.kubectl("create", "namespace", NAMESPACE)
            ref = workspace.ref if workspace else ""
            yield Stage(info, op, standin, images, installed, ref)
        succeeded = True
    finally:
        finish_workdir(workdir, succeeded)


def _github(
    stack: contextlib.ExitStack[bool | None], info: ClusterInfo, gateway: str
) -> tuple[Installed, GitServer]:
    github = stack.enter_context(GitHubStandIn())
    git = stack.enter_context(GitServer(github, info.workdir / "git", host=gateway))
    installed = install(github, info.workdir)
    git.create_repo(REPOSITORY, README, private=False)
    return installed, git
