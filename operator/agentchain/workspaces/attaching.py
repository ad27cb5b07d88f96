"""The chain's workspace at a job's launch: which one it mounts, its volume, its clone
credential (docs/workspaces.md).

:func:`mount` answers how the job mounts its chain's workspace (None: the chain has
none), after making sure the chain's PersistentVolumeClaim exists: created under its
deterministic name (``AlreadyExists``: done), owned by the chain's root AgentJob so the
garbage collector deletes it with the chain's records, and only while the namespace
holds fewer than ``max_workspaces_per_namespace`` of them (counted and created one chain
at a time per namespace, so the cap is exact); over the cap the job fails
(``WorkspaceLimitReached``), visibly, rather than waiting for storage that may never be
freed.  Which workspace a chain has is recorded once per chain in Redis
(``workspaces/workspacerecords.py``) by its first job whose AiAgent declares one.

:func:`git_secret_data` is the job Secret's clone credential: for a GitHub repository,
an installation token limited to ``contents: read`` on that one repository, recorded
with the job's tokens so it is revoked at the job's end like them; "" when no App is
configured (a public repository clones without one).  Only the ``workspace-prepare``
container mounts it (``workspaces/rules/jobmounts.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agentchain.core import statuswriting
from agentchain.core.hopstate import Hop, Obj
from agentchain.core.runtime import Runtime
from agentchain.github.appruntime import side_of
from agentchain.github.githuberrors import GitHubError
from agentchain.github.rules.githubscope import Scope
from agentchain.kube import events, resources, workloads
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason
from agentchain.store import keys, sealing
from agentchain.workspaces.rules import jobmounts
from agentchain.workspaces.workspacerecords import WorkspaceStore

log = logging.getLogger(__name__)
MAX_CHAIN_WALK = 64


@dataclass(frozen=True)
class Refused:
    """The job cannot have its workspace: it fails with ``reason``."""

    reason: str
    message: str


def store(rt: Runtime) -> WorkspaceStore:
    return WorkspaceStore(rt.redis, rt.operator_keys)


async def chain_workspace(
    rt: Runtime, namespace: str, chain_id: str
) -> jobmounts.ChainWorkspace | None:
    """The chain's workspace as recorded, None when it has none (or none that is sound:
    its seal opened, so only a bug of ours can fail :func:`jobmounts.checked_record`)."""
    recorded = await store(rt).spec(namespace, chain_id)
    if recorded is None:
        return None
    return _checked(rt, namespace, chain_id, recorded)


def _checked(
    rt: Runtime, namespace: str, chain_id: str, recorded: dict[str, object]
) -> jobmounts.ChainWorkspace | None:
    checked = jobmounts.checked_record(recorded, chain_id, rt.settings.github_git_url)
    if isinstance(checked, jobmounts.NoWorkspace):
        key = keys.chain_workspace(namespace, chain_id)
        sealing.refused("chain workspace", key, checked.reason)
        return None
    return checked


async def mount(hop: Hop, agent: AiAgent) -> jobmounts.Mounting | Refused | None:
    """How ``hop``'s job mounts its chain's workspace, its volume ensured; None: none."""
    chain_id = statuswriting.position(hop.obj, hop.rt.operator_keys).chain_id
    chain = await chain_workspace(hop.rt, hop.namespace, chain_id)
    if chain is None:
        chain = await _continued(hop, chain_id)
    if chain is None:
        if agent.spec.workspace is None:
            return None
        git_url = hop.rt.settings.github_git_url
        resolved = jobmounts.resolve(
            agent.spec.workspace, hop.github_event, chain_id, git_url, agent.spec.repositories
        )
        if isinstance(resolved, jobmounts.NoWorkspace):
            message = f"No workspace: {resolved.reason}."
            return Refused(Reason.WORKSPACE_UNAVAILABLE, message)
        unpublished = jobmounts.fork_refusal(agent.spec.workspace, hop.github_event)
        if unpublished is not None:  # The chain runs; only its push is withheld.
            message = f"The workspace will not be published: {unpublished}."
            await events.emit(
                hop.obj, "Warning", Reason.WORKSPACE_NOT_PUBLISHED, message, key="ws-fork"
            )
        recorded = await store(hop.rt).claim(hop.namespace, chain_id, resolved.to_record())
        chain = _checked(hop.rt, hop.namespace, chain_id, recorded)
        if chain is None:
            message = "No workspace: the chain's recorded workspace is not sound (see the log)."
            return Refused(Reason.WORKSPACE_UNAVAILABLE, message)
    refused = await _ensure_claim(hop, chain)
    return refused or jobmounts.mounting(chain, agent.spec)


async def _continued(hop: Hop, chain_id: str) -> jobmounts.ChainWorkspace | None:
    """A follow-up round's workspace (``jobmounts.continued``), claimed once for its chain:
    the chain its sealed event continues must have had a published workspace; None for
    any other job."""
    event = hop.github_event
    previous_id = event.continues if event is not None else None
    if not previous_id or previous_id == chain_id:
        return None
    if event is not None and event.head_ref:
        return None  # A round of a pull request its chain was started on: on its head.
    previous = await chain_workspace(hop.rt, hop.namespace, previous_id)
    if previous is None or not previous.publish:
        return None
    spec = jobmounts.continued(previous, chain_id).to_record()
    recorded = await store(hop.rt).claim(hop.namespace, chain_id, spec)
    return _checked(hop.rt, hop.namespace, chain_id, recorded)


async def _ensure_claim(hop: Hop, chain: jobmounts.ChainWorkspace) -> Refused | None:
    """The chain's claim, created unless it exists; refused over the namespace's cap.

    The count and the create take turns per namespace: two chains starting at once
    cannot both take the last place (only the leader runs hops, so one process).  A
    claim being deleted still counts: its storage is held until its pods are gone."""
    async with hop.rt.workspace_locks.holding(hop.namespace, ""):
        return await _ensure_claim_locked(hop, chain)


async def _ensure_claim_locked(hop: Hop, chain: jobmounts.ChainWorkspace) -> Refused | None:
    selector = jobmounts.WORKSPACE_LABEL
    existing = await workloads.claim_names(hop.namespace, selector)
    if chain.claim_name in existing:
        return None
    cap = hop.rt.settings.max_workspaces_per_namespace
    if cap and len(existing) >= cap:
        message = (
            f"The namespace has {len(existing)} workspace volumes, the most allowed "
            f"(max_workspaces_per_namespace = {cap}); chain {chain.chain_id} gets none."
        )
        return Refused(Reason.WORKSPACE_LIMIT_REACHED, message)
    root = await root_of(hop)
    if root is None:
        return Refused(Reason.WORKSPACE_UNAVAILABLE, "The chain's root AgentJob is gone.")
    body = jobmounts.claim_body(hop.namespace, chain, statuswriting.owner_reference(root))
    if await workloads.ensure_claim(hop.namespace, body):
        log.info("Created workspace volume %s/%s", hop.namespace, chain.claim_name)
    return None


async def root_of(hop: Hop) -> Obj | None:
    """The chain's root AgentJob: the volume's owner (walked up by parent-job)."""
    obj: Obj | None = hop.obj
    for _ in range(MAX_CHAIN_WALK):
        if obj is None:
            return None
        parent = statuswriting.parent_of(obj)
        if parent is None:
            return obj
        obj = await resources.get(hop.namespace, resources.AGENTJOBS, parent)
    return None


async def git_secret_data(hop: Hop, mounting: jobmounts.Mounting | None) -> dict[str, str]:
    """The job Secret's clone credential for a GitHub repository ("" without an App)."""
    if mounting is None or mounting.chain.github is None:
        return {}
    token = await _clone_token(hop, mounting.chain.github, {"contents": "read"})
    return jobmounts.token_data(token)


async def _clone_token(hop: Hop, repository: str, permissions: dict[str, str]) -> str:
    side = side_of(hop.rt)
    event = hop.github_event
    if side is None or event is None or event.installation_id is None:
        return ""
    scope = Scope(event.installation_id, repository, permissions)
    try:
        minted = await side.app.mint(scope)
    except GitHubError as exc:
        message = f"The workspace is cloned without a token: {exc.reason}: {exc}"
        await events.emit(hop.obj, "Warning", Reason.WORKSPACE_UNAVAILABLE, message, key="ws-token")
        return ""
    # Recorded with the job's own tokens: revoked at its end like them.
    await side.tokens.record(hop.namespace, hop.name, minted.token, minted.expires_at.timestamp())
    return minted.token


def status_of(mounting: jobmounts.Mounting) -> dict[str, object]:
    """``status.workspace`` of a job that mounts ``mounting``."""
    chain = mounting.chain
    return {
        "claimName": chain.claim_name,
        "repository": chain.repository,
        "ref": chain.ref,
        "readOnly": mounting.read_only,
    }
