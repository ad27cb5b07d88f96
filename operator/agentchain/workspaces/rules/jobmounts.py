"""A chain's workspace on the operator's side: which one a job mounts, and how its pod
and volume look.  Pure functions of their inputs (docs/workspaces.md).

**One workspace per chain.**  The first job of a chain whose AiAgent declares
``workspace`` fixes it (:func:`resolve`: repository URL, ref, size, publishing,
retention) and the engine records it once per chain; every later job of the chain
mounts the same PersistentVolumeClaim (:func:`claim_name`, derived from the chain id,
so creating it is exactly-once by name), read-write unless its own AiAgent asks for
``readOnly``.

**The pod** (:func:`workspace_pod`).  Kubernetes has no hook that runs a container
after the main one ended, so, as early Tekton ran its steps, a workspace job's pod
runs the agent as an *init* container::

    initContainers: [workspace-prepare (operator image), agent (the AiAgent's image)]
    containers:     [workspace-report  (operator image)]

``workspace-prepare`` clones the repository into ``/workspace/repo`` when the volume
holds no checkout yet (later steps find it there); the agent works in it;
``workspace-report`` prints one JSON line saying what the chain's steps changed so far
(``git diff --stat`` against the base, whether there are new commits), which the
operator reads back from its log.  An agent that exits non-zero fails the pod at once:
no report, as there is nothing to hand on.

**Credentials.**  The clone credential (a GitHub installation token with
``contents: read`` in the job's Secret under :data:`GIT_TOKEN_KEY`, or the
``credentialsSecret`` of a host that is not GitHub) is mounted as a file into
``workspace-prepare`` only.  The agent container gets a git credential only when its
AiAgent declares ``github.permissions.contents: write``: then ``AGENT_GIT_TOKEN`` (the
job's GitHub token, or the ``credentialsSecret``'s) and a git credential helper
reading it from the environment (``GIT_CONFIG_*``), so ``git push`` works with any image.
``workspace-report`` gets no credential at all.

**A private CA** (:class:`Tool`'s ``ca_configmap``, the operator's
``workspace_ca_configmap``).  A git host whose certificate an image's trust store does
not know (GitHub Enterprise Server or a git server behind a company CA) is trusted
through a ConfigMap in the job's namespace, key ``ca.crt`` (trust-manager's Bundles
keep one in every namespace): mounted into the containers that talk to the host
(``workspace-prepare``, ``workspace-publish``, and the agent for its own ``git push``),
named to git as ``http.sslCAInfo`` and to the workspace commands as ``SSL_CERT_FILE``.
It is optional in the pod: a missing one fails the clone with git's own message
(``WorkspacePrepareFailed``) instead of leaving the pod waiting for its volume.

**Publishing** is a batch Job of the operator's image (:func:`publish_job`): the chain's
final one (:func:`publish_job_name`), and one per step whose agent asks
``publishAfterStep`` (:func:`step_publish_job_name`, :func:`publishes_after_step`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from agentchain import models
from agentchain.aiagents.rules import repositories
from agentchain.core.rules import naming
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import (
    BRANCH_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    REF_PATTERN,
    AiAgentSpec,
    Workspace,
)
from agentchain.settings import Settings

WORKSPACE_VOLUME = "agentchain-workspace"
WORKSPACE_DIR = "/workspace"
REPO_DIR = f"{WORKSPACE_DIR}/repo"
GIT_VOLUME = "agentchain-git"
GIT_DIR = "/var/run/agentchain-git"
GIT_TOKEN_FILE = f"{GIT_DIR}/token"
GIT_TOKEN_KEY = "git-token"
"""The job Secret's (and the publish Secret's) key holding the clone or push token."""
GIT_TOKEN_FILE_KEY = "git-token-file"
"""Beside it, the token file's path: ``AGENTCHAIN_GIT_TOKEN_FILE`` comes from this key,
``optional``, so a Secret without a token (no App: a public repository, cloned
anonymously) leaves the variable unset, and the Job is the same either way."""
CREDENTIALS_KEY = "token"
"""The key of a ``credentialsSecret``."""
CA_VOLUME = "agentchain-ca"
CA_DIR = "/etc/agentchain/ca"
CA_KEY = "ca.crt"
CA_FILE = f"{CA_DIR}/{CA_KEY}"


@dataclass(frozen=True)
class Tool:
    """The operator's image as the workspace containers run it."""

    image: str
    command: list[str]
    ca_configmap: str = ""
    """A ConfigMap (key ``ca.crt``) of the CAs git verifies the host against; empty: the
    image's trust store."""

    def ca_volume(self) -> list[dict[str, Any]]:
        if not self.ca_configmap:
            return []
        items = [{"key": CA_KEY, "path": CA_KEY}]
        source = {"name": self.ca_configmap, "items": items, "optional": True}
        return [{"name": CA_VOLUME, "configMap": {**source, "defaultMode": 0o444}}]

    def with_ca(self, container: dict[str, Any]) -> dict[str, Any]:
        """``container`` (a workspace command) trusting the CA, if there is one."""
        if self.ca_configmap:
            container["env"] += _plain_env({"SSL_CERT_FILE": CA_FILE})
            container["volumeMounts"].append(_ca_mount())
        return container


def tool_of(settings: Settings) -> Tool:
    return Tool(
        settings.workspace_image,
        list(settings.workspace_command),
        settings.workspace_ca_configmap,
    )


def _ca_mount() -> dict[str, Any]:
    return {"name": CA_VOLUME, "mountPath": CA_DIR, "readOnly": True}


PREPARE = "workspace-prepare"
REPORT = "workspace-report"
PUBLISH = "workspace-publish"
WORKSPACE_LABEL = "labrats.work/workspace"
"""On the claim and the publish Job: the chain id whose workspace it is."""
CLAIM_PREFIX = "agentchain-ws-"
PUBLISH_PREFIX = "agentchain-publish-"
BRANCH_PREFIX = "agentchain/"
GIT_HELPER = '!f() { echo username=x-access-token; echo "password=${AGENT_GIT_TOKEN}"; }; f'
"""A git credential helper answering from the environment (no file, nothing of ours in
the image); ``x-access-token`` is GitHub's user name for installation tokens, other
hosts ignore the user name or take any."""

FS_GROUP = 10001
"""The volume's group (the operator image's user), unless the AiAgent sets its own."""

_DURATION = re.compile(r"([0-9]+)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_OWNER_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class ChainWorkspace:
    """A chain's workspace, fixed by its first job that declares one."""

    chain_id: str
    claim_name: str
    repository: str
    """The git URL cloned (and pushed to)."""
    github: str | None
    """``owner/name`` when the repository is on GitHub: its tokens come from the App."""
    ref: str | None
    size: str = "1Gi"
    storage_class_name: str | None = None
    publish: bool = False
    branch: str = ""
    keep_for_seconds: int = 0
    credentials_secret: str | None = None

    def to_record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ChainWorkspace:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in record.items() if k in known})


@dataclass(frozen=True)
class NoWorkspace:
    """A workspace was declared but cannot be set up; ``reason`` says why."""

    reason: str


@dataclass(frozen=True)
class Mounting:
    """How one job mounts its chain's workspace."""

    chain: ChainWorkspace
    read_only: bool
    agent_credential: bool
    """The agent container gets a git credential (``contents: write``)."""


def duration_seconds(text: str) -> int:
    """``0``, ``90s``, ``30m``, ``1h30m``, ``2d`` in seconds (the CRD checks the shape)."""
    return sum(int(n) * _UNITS[unit] for n, unit in _DURATION.findall(text))


def claim_name(chain_id: str) -> str:
    """The chain's PersistentVolumeClaim: ``agentchain-ws-<chain id>``."""
    name = f"{CLAIM_PREFIX}{chain_id}"
    return name if naming.is_dns_label(name) else naming.label_value(name).lower()


def publish_job_name(chain_id: str) -> str:
    """The one batch Job that publishes the chain's workspace."""
    name = f"{PUBLISH_PREFIX}{chain_id}"
    return name if naming.is_dns_label(name) else naming.label_value(name).lower()


def step_publish_job_name(chain_id: str, job_name: str) -> str:
    """The batch Job that publishes the chain's workspace after AgentJob ``job_name``'s
    step (``publishAfterStep``): ``agentchain-publish-<chain id>-<short digest>``, one per
    step, never the chain's final one (:func:`publish_job_name`), at most 63 characters."""
    return naming.digest_name(f"{PUBLISH_PREFIX}{chain_id}", "publish-step", chain_id, job_name)


def is_step_publish(job_name: str, chain_id: str, step: str) -> bool:
    """Whether batch Job ``job_name`` is the step publish of AgentJob ``step``."""
    return job_name == step_publish_job_name(chain_id, step)


def publishes_after_step(
    chain: ChainWorkspace | None, declared: Workspace | None, phase: str | None
) -> bool:
    """Whether a job whose AiAgent declares ``declared`` and that ended ``phase``, its
    chain going on, publishes the chain's workspace now: the agent asks
    (``publishAfterStep``), the job succeeded (it ran: not Skipped) and the chain's
    workspace is published at all (``publish: true``)."""
    return (
        chain is not None
        and chain.publish
        and declared is not None
        and declared.publish_after_step
        and phase == "Succeeded"
    )


def repository_url(repository: str, git_url: str) -> tuple[str, str | None]:
    """The git URL of ``repository`` and its GitHub ``owner/name`` (None off GitHub)."""
    if _OWNER_NAME.match(repository):
        return f"{git_url.rstrip('/')}/{repository.removesuffix('.git')}.git", repository
    return repository, None


def default_ref(event: JobEvent | None) -> str | None:
    """An issue's chain works from the default branch (None), a pull request's from its head."""
    if event is None or event.subject != "pull_request":
        return None
    if event.head_sha and _SHA.match(event.head_sha):
        return event.head_sha
    return f"refs/pull/{event.number}/head" if event.number else None


def fork_refusal(declared: Workspace, event: JobEvent | None) -> str | None:
    """Why a chain's workspace is not published although it asks to be: its pull request
    comes from a fork, or from a head not known to be its own repository (a comment on a
    pull request carries no head), and the AiAgent does not opt in (``publishFromForks``).

    Publishing pushes the checked-out head, fork commits included, to a branch of the
    base repository, where its push and pull_request workflows run them with the
    repository's secrets: a fork's author would borrow them.
    """
    if not declared.publish or declared.publish_from_forks:
        return None
    if event is None or event.subject != "pull_request":
        return None
    head = event.head_repository
    if head is not None and event.repository and head.casefold() == event.repository.casefold():
        return None
    whose = f"a fork ({head})" if head else "a head repository the event does not name"
    return (
        f"the chain's pull request comes from {whose}: its commits are not pushed to the "
        "base repository unless the workspace sets publishFromForks"
    )


def resolve(
    declared: Workspace,
    event: JobEvent | None,
    chain_id: str,
    git_url: str,
    served: Sequence[str] = (),
) -> ChainWorkspace | NoWorkspace:
    """The chain's workspace as ``declared`` on its first agent that has one.

    ``event`` is the one the operator vouches for (``core.rules.provenance``); ``served``
    the AiAgent's ``repositories``. A GitHub repository other than the event's is
    cloned with the event's App installation, so it must be one the agent serves:
    otherwise an agent author could reach any repository that installation covers.
    """
    repository = declared.repository or (event.repository if event else None)
    if not repository:
        return NoWorkspace(
            "the AiAgent's workspace names no repository and the event that started the "
            "chain has none"
        )
    url, github = repository_url(repository, git_url)
    if github is not None and event is not None and event.installation_id is not None:
        own = (event.repository or "").lower() == github.lower()
        if not own and not repositories.repository_bound(served, github):
            return NoWorkspace(
                f"workspace.repository {github} is neither the repository of the event "
                "that started the chain nor one the AiAgent's repositories lists"
            )
    # A follow-up round of a pull request its chain was started on works on that pull
    # request's head branch (in the event's repository: rounds never start for a fork's),
    # checked out at its head and pushed back to it, which updates the pull request.
    on_head = event.head_ref if event is not None and event.continues else None
    return ChainWorkspace(
        chain_id=chain_id,
        claim_name=claim_name(chain_id),
        repository=url,
        github=github,
        ref=on_head or declared.ref or default_ref(event),
        size=declared.size,
        storage_class_name=declared.storage_class_name,
        publish=declared.publish and fork_refusal(declared, event) is None,
        branch=on_head or declared.branch or f"{BRANCH_PREFIX}{chain_id}",
        keep_for_seconds=duration_seconds(declared.keep_for),
        credentials_secret=declared.credentials_secret,
    )


def continued(previous: ChainWorkspace, chain_id: str) -> ChainWorkspace:
    """The workspace of follow-up chain ``chain_id``, which continues the chain whose
    workspace is ``previous`` on its pull request: the same repository, credential and
    branch, checked out at the branch's head (what the pull request shows, the previous
    round's commits included) in a volume of its own, and published to the same branch,
    which updates the same pull request.  Only a published workspace has a pull request
    to continue, so it is published too."""
    return replace(
        previous,
        chain_id=chain_id,
        claim_name=claim_name(chain_id),
        ref=previous.branch,
        publish=True,
    )


_SOUND: dict[str, type | tuple[type, ...]] = {
    "chain_id": str,
    "claim_name": str,
    "repository": str,
    "github": (str, type(None)),
    "ref": (str, type(None)),
    "size": str,
    "storage_class_name": (str, type(None)),
    "publish": bool,
    "branch": str,
    "keep_for_seconds": int,
    "credentials_secret": (str, type(None)),
}
_HTTPS_URL = re.compile(r"^https://[!-~]+$")


def checked_record(
    record: Mapping[str, Any], chain_id: str, git_url: str
) -> ChainWorkspace | NoWorkspace:
    """The workspace recorded for chain ``chain_id``, if it is one :func:`resolve` could
    have made there: about this chain, its volume's derived name, a GitHub repository
    at ``git_url`` (so a push credential never goes to another host), and every value in
    the shape the AiAgent's schema allows; else why not."""
    for field, kind in _SOUND.items():
        if not isinstance(record.get(field), kind):
            return NoWorkspace(f"its {field} is missing or of the wrong type")
    chain = ChainWorkspace.from_record(record)
    problem = _record_problem(chain, chain_id, git_url)
    return NoWorkspace(problem) if problem else chain


def _record_problem(chain: ChainWorkspace, chain_id: str, git_url: str) -> str | None:
    if chain.chain_id != chain_id or chain.claim_name != claim_name(chain_id):
        return "it is about another chain"
    if chain.github is not None:
        if not _OWNER_NAME.match(chain.github):
            return "its GitHub repository is not owner/name"
        if chain.repository != repository_url(chain.github, git_url)[0]:
            return "its repository URL is not its GitHub repository's at the operator's git URL"
    elif not _HTTPS_URL.match(chain.repository):
        return "its repository is not an https:// URL"
    if not re.match(BRANCH_PATTERN, chain.branch):
        return "its branch is not a branch name"
    if chain.ref is not None and not re.match(REF_PATTERN, chain.ref):
        return "its ref is not a ref"
    secret = chain.credentials_secret
    if secret is not None and not re.match(DNS_SUBDOMAIN_PATTERN, secret):
        return "its credentials Secret is not a Secret name"
    return None


def mounting(chain: ChainWorkspace, agent: AiAgentSpec) -> Mounting:
    """How ``agent``'s job mounts ``chain``: read-only on request, a credential for
    ``contents: write`` only."""
    declared = agent.workspace
    permissions = agent.github.permissions if agent.github else None
    writes = permissions is not None and permissions.contents == "write"
    return Mounting(chain, declared is not None and declared.read_only, writes)


def claim_body(namespace: str, chain: ChainWorkspace, owner: Mapping[str, Any]) -> dict[str, Any]:
    """The chain's PersistentVolumeClaim, owned by its root AgentJob (garbage-collected
    with it)."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": chain.size}},
    }
    if chain.storage_class_name:
        spec["storageClassName"] = chain.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": chain.claim_name,
            "namespace": namespace,
            "labels": {
                WORKSPACE_LABEL: naming.label_value(chain.chain_id),
                models.CHAIN_ID: naming.label_value(chain.chain_id),
                models.MANAGED_BY: "agentchain",
            },
            "ownerReferences": [dict(owner)],
        },
        "spec": spec,
    }


def _literal(value: str) -> str:
    return value.replace("$", "$$")


def _plain_env(values: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"name": name, "value": _literal(value)} for name, value in values.items()]


def _own_credentials(chain: ChainWorkspace) -> bool:
    """The credential is the ``credentialsSecret``'s (a host that is not GitHub)."""
    return chain.github is None and bool(chain.credentials_secret)


def git_volume(chain: ChainWorkspace, job_secret: str) -> dict[str, Any]:
    """The clone (or push) credential as one file: the job's own Secret's
    :data:`GIT_TOKEN_KEY` (optional: absent without a token), or the
    ``credentialsSecret``'s ``token`` (required: a missing one is the user's to fix)."""
    if _own_credentials(chain):
        secret: dict[str, Any] = {"secretName": chain.credentials_secret}
        secret["items"] = [{"key": CREDENTIALS_KEY, "path": "token"}]
    else:
        secret = {"secretName": job_secret, "optional": True}
        secret["items"] = [{"key": GIT_TOKEN_KEY, "path": "token"}]
    return {"name": GIT_VOLUME, "secret": {**secret, "defaultMode": 0o400}}


def tool_container(
    name: str, args: list[str], tool: Tool, security: Mapping[str, Any]
) -> dict[str, Any]:
    """An operator-image container with the workspace mounted read-write."""
    return {
        "name": name,
        "image": tool.image,
        "command": [*tool.command, *args],
        "env": _plain_env({"AGENT_WORKSPACE": WORKSPACE_DIR}),
        "volumeMounts": [{"name": WORKSPACE_VOLUME, "mountPath": WORKSPACE_DIR}],
        "securityContext": dict(security),
    }


def _with_credential(
    container: dict[str, Any], chain: ChainWorkspace, job_secret: str
) -> dict[str, Any]:
    """``container`` with the token file mounted, and named when there is one."""
    if _own_credentials(chain):
        container["env"] += _plain_env({"AGENTCHAIN_GIT_TOKEN_FILE": GIT_TOKEN_FILE})
    else:
        ref = {"name": job_secret, "key": GIT_TOKEN_FILE_KEY, "optional": True}
        container["env"].append(
            {"name": "AGENTCHAIN_GIT_TOKEN_FILE", "valueFrom": {"secretKeyRef": ref}}
        )
    container["volumeMounts"].append({"name": GIT_VOLUME, "mountPath": GIT_DIR, "readOnly": True})
    return container


def token_data(token: str) -> dict[str, str]:
    """The Secret's entries for ``token`` (none without one: git then goes anonymous)."""
    return {GIT_TOKEN_KEY: token, GIT_TOKEN_FILE_KEY: GIT_TOKEN_FILE} if token else {}


def prepare_args(chain: ChainWorkspace) -> list[str]:
    """Clone (once per chain) and check out the chain's branch, so agents commit on it."""
    args = ["workspace", "prepare", "--repository", chain.repository, "--branch", chain.branch]
    return args + (["--ref", chain.ref] if chain.ref else [])


def publish_args(chain: ChainWorkspace) -> list[str]:
    return ["workspace", "publish", "--repository", chain.repository, "--branch", chain.branch]


def agent_git_env(mount: Mounting, job_secret: str, ca: bool = False) -> list[dict[str, Any]]:
    """What the agent container gets of git: where the workspace is, the host's CA
    (``ca``: mounted at :data:`CA_FILE`), and a credential only for ``contents: write``."""
    env = _plain_env({"AGENT_WORKSPACE": WORKSPACE_DIR, "AGENT_WORKSPACE_REPO": REPO_DIR})
    # git refuses a repository another user owns unless told it is safe (an agent whose
    # securityContext runs it as another uid than the one that cloned).
    config = [("safe.directory", REPO_DIR)]
    if ca:
        config.append(("http.sslCAInfo", CA_FILE))
    if not mount.agent_credential:
        return env + _git_config(config)
    chain = mount.chain
    if chain.github is None and chain.credentials_secret:
        ref: dict[str, Any] = {"name": chain.credentials_secret, "key": CREDENTIALS_KEY}
    else:  # The job's GitHub token, minted with the declared contents: write.
        ref = {"name": job_secret, "key": "github-token", "optional": True}
    env.append({"name": "AGENT_GIT_TOKEN", "valueFrom": {"secretKeyRef": ref}})
    return env + _git_config([*config, ("credential.helper", GIT_HELPER)])


def _git_config(entries: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """git configuration through the environment (git 2.31+): nothing in the image."""
    values = {"GIT_CONFIG_COUNT": str(len(entries))}
    for i, (key, value) in enumerate(entries):
        values[f"GIT_CONFIG_KEY_{i}"] = key
        values[f"GIT_CONFIG_VALUE_{i}"] = value
    return _plain_env(values)


def workspace_pod(
    pod_spec: dict[str, Any],
    mount: Mounting,
    job_secret: str,
    tool: Tool,
    security: Mapping[str, Any],
) -> dict[str, Any]:
    """``pod_spec`` (one agent container) laid out for a workspace: prepare and the
    agent as init containers, the report as the one container (see the module doc)."""
    (agent,) = pod_spec["containers"]
    ca = bool(tool.ca_configmap)
    agent = {**agent, "env": [*agent_git_env(mount, job_secret, ca), *agent["env"]]}
    agent["volumeMounts"] = [
        *agent["volumeMounts"],
        {"name": WORKSPACE_VOLUME, "mountPath": WORKSPACE_DIR, "readOnly": mount.read_only},
        *([_ca_mount()] if ca else []),
    ]
    prepare = tool.with_ca(tool_container(PREPARE, prepare_args(mount.chain), tool, security))
    report = tool_container(REPORT, ["workspace", "report"], tool, security)  # No network.
    volumes = [
        *pod_spec["volumes"],
        {"name": WORKSPACE_VOLUME, "persistentVolumeClaim": {"claimName": mount.chain.claim_name}},
        git_volume(mount.chain, job_secret),
        *tool.ca_volume(),
    ]
    return {
        **pod_spec,
        # The volume group-writable for every container, whatever uid each runs as.
        "securityContext": {"fsGroup": FS_GROUP, **pod_spec["securityContext"]},
        "initContainers": [_with_credential(prepare, mount.chain, job_secret), agent],
        "containers": [report],
        "volumes": volumes,
    }


def publish_job(
    namespace: str,
    chain: ChainWorkspace,
    secret: str,
    owner: Mapping[str, Any],
    tool: Tool,
    security: tuple[Mapping[str, Any], Mapping[str, Any]],
    name: str | None = None,
) -> dict[str, Any]:
    """A batch Job that pushes the chain's commits to its branch: the chain's final one
    (:func:`publish_job_name`), or ``name`` (a step's, :func:`step_publish_job_name`);
    its token in ``secret``."""
    pod_security, container_security = security
    container = tool_container(PUBLISH, publish_args(chain), tool, container_security)
    container = tool.with_ca(container)
    labels = {
        WORKSPACE_LABEL: naming.label_value(chain.chain_id),
        models.MANAGED_BY: "agentchain",
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name or publish_job_name(chain.chain_id),
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [dict(owner)],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    # The push token's Secret is mounted 0400 as root: the fsGroup makes
                    # it readable by the tool's non-root user, as in the step's pod.
                    "securityContext": {"fsGroup": FS_GROUP, **pod_security},
                    "containers": [_with_credential(container, chain, secret)],
                    "volumes": [
                        {
                            "name": WORKSPACE_VOLUME,
                            "persistentVolumeClaim": {"claimName": chain.claim_name},
                        },
                        git_volume(chain, secret),
                        *tool.ca_volume(),
                    ],
                },
            },
        },
    }
