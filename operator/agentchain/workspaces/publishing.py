"""Publishing and releasing a chain's workspace when the chain completes.

:func:`chain_complete` runs in the hop that completes the chain, before its last patch
(the ``chainComplete`` marker), so a crash before it is replayed with it:

- a chain whose workspace has ``publish: true`` and that **succeeded** gets one batch Job,
  ``agentchain-publish-<chain id>`` (the operator's image, ``agentchain workspace
  publish``, a push credential, the chain's volume), owned by the chain's root AgentJob.
  Its name makes the push exactly-once across crashes: a replay's create answers
  AlreadyExists, and the command itself finds the branch already at its commit;
- any other chain's volume is queued for deletion after ``keepFor``.

:func:`on_job` takes the publish Job's end from the Job watch (a restart lists it
again; what was done is recorded once per chain, ``published``).  A successful push,
with a GitHub App, opens or updates **one** pull request from the branch, looked up by
its head before it is created, so a crash between the create and the record finds it
again.  A refused push (the branch is someone else's: not at our commit nor an ancestor)
or a failed one is a ``WorkspacePublished=False`` condition and a Warning Event on the
root AgentJob; nothing is rewritten.  Either way the volume is then queued for deletion.

The push is done once ``published`` is recorded, but the pull request may not be: when
GitHub fails transiently (``RateLimited``, ``Unavailable``: 429, 5xx, timeouts) the
chain's pull request is recorded as pending (``workspaces/workspacerecords.py``: a sorted set per
namespace, scored by the time of the next try) and the condition says so.  GitHub
failing for good (``GitHubError.permanent``, ``NotFound``, a 422), or for a whole day
(:data:`PULL_GIVE_UP_SECONDS`), ends it: ``WorkspacePublished=True`` with reason
``WorkspacePullRequestFailed`` (the branch *is* pushed) and a Warning Event saying why.

:func:`sweep` (the resync's) deletes the volumes whose time has come, and tries the
pending pull requests that are due again: after GitHub's ``Retry-After`` when it gave
one, else after a back-off doubling from the resync period up to ten minutes (a rate
limit leaves the others of that sweep for the next one).  Opened, the root's condition
names the pull request and a Normal Event says so; a root AgentJob that is gone drops
the entry.  A retry looks the pull request up by its head too, so one whose create
answered a timeout after GitHub made it is found, not made twice.  Deleting a chain's
root AgentJob deletes its volume and publish Job at once (ownerReferences).

**After a step** (``publishAfterStep``): :func:`after_step` runs in the hop of a job of
such an agent that succeeded when the chain goes on, before the child is spawned and
before the marker, and creates ``agentchain-publish-<chain id>-<digest of the step>``
(:func:`jobmounts.step_publish_job_name`), owned by and labelled with the step's AgentJob:
a replay creates it again under its one name.  Nothing waits for it.  Its end, in
:func:`on_job` (told apart by its name), is reported on the step's AgentJob as above and
opens or updates the same pull request, recorded once per publish Job
(``published:<Job name>``); it neither records ``published`` nor releases the volume.
The pull request is looked up and created under a per-chain lock (:data:`PULL_LOCK`), so
a step's publish and the chain's final one ending together never open two.  Once open
(or found), it is handed to the write-back (``github/writeback.py``: ``pull_opened``),
which posts the chain's reviewers' verdicts on it.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from agentchain import faults, models
from agentchain.core import catalog, statuswriting
from agentchain.core.hopstate import Hop, Obj
from agentchain.core.rules import naming, provenance
from agentchain.core.runtime import Runtime
from agentchain.github import roundrecords, tokenminting, writeback
from agentchain.github.appruntime import side_of
from agentchain.github.githuberrors import NOT_FOUND, RATE_LIMITED, GitHubError
from agentchain.github.rules.githubscope import Scope
from agentchain.hop.rules import chains, jobspec
from agentchain.kube import apierrors, events, resources, workloads
from agentchain.models.agentjob import AgentJobStatus
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import WORKSPACE_PUBLISHED, Condition, Reason
from agentchain.store import sealing
from agentchain.traces.rules import steps
from agentchain.workspaces import attaching
from agentchain.workspaces.rules import jobmounts, stepchanges

log = logging.getLogger(__name__)
PUBLISH_LOG_BYTES = 8 * 1024
SUCCEEDED = ("Succeeded", "Skipped")
PUSHED = frozenset({"pushed", "already", "unchanged"})
"""The publish outcomes that leave the branch at the chain's commit."""
PULL_GIVE_UP_SECONDS = stepchanges.PULL_GIVE_UP_SECONDS
PULL_LOCK = "pull-request/"
"""The per-chain lock (``Locks``, a key no AgentJob name can be) around its pull request."""
STEP_NOTE = "published:"
"""The chain's workspace record's field for one step's publish: ``published:<Job name>``."""


async def chain_complete(hop: Hop, action: str) -> None:
    """The chain of ``hop``'s job completes here (``action``: its last ``next``)."""
    try:
        chain_id = statuswriting.position(hop.obj, hop.rt.operator_keys).chain_id
    except chains.ChainMetadataError:
        return  # In no chain the operator knows of: no workspace to publish or release.
    chain = await attaching.chain_workspace(hop.rt, hop.namespace, chain_id)
    if chain is None:
        return
    succeeded = action == "none" and hop.job.status.phase in SUCCEEDED
    if chain.publish and succeeded:
        await _start(hop, chain)
    else:
        await release(hop.rt, hop.namespace, chain)


async def release(rt: Runtime, namespace: str, chain: jobmounts.ChainWorkspace) -> None:
    """Queue the chain's volume for deletion after its ``keepFor``."""
    when = time.time() + chain.keep_for_seconds
    await attaching.store(rt).release_at(namespace, chain.chain_id, when)


async def after_step(hop: Hop) -> None:
    """``hop``'s job ended and its chain goes on (a child spawned or skipped): when its
    AiAgent asks (``publishAfterStep``), publish the workspace as it is now, in a batch
    Job of the step's own (:func:`jobmounts.step_publish_job_name`, owned by the step's
    AgentJob), created once.  Nothing waits for it and the volume stays: the chain goes
    on, and its end publishes again (a fast-forward of the same branch)."""
    role = hop.job.spec.agent_role
    found = catalog.by_trigger(hop.rt.agents.cached(hop.namespace), role)
    declared = found.spec.workspace if isinstance(found, AiAgent) else None
    if declared is None or not declared.publish_after_step:
        return  # Most hops: no Redis read.
    chain_id = statuswriting.position(hop.obj, hop.rt.operator_keys).chain_id
    chain = await attaching.chain_workspace(hop.rt, hop.namespace, chain_id)
    if chain is None or not jobmounts.publishes_after_step(chain, declared, hop.job.status.phase):
        return
    name = jobmounts.step_publish_job_name(chain.chain_id, hop.name)
    await _create(hop, chain, hop.obj, name)
    faults.crashpoint("workspace-step-publish-created")


async def _start(hop: Hop, chain: jobmounts.ChainWorkspace) -> None:
    """The chain's final publish Job, owned by its root AgentJob."""
    root = await attaching.root_of(hop)
    if root is None:
        return  # The chain's records are gone, and its volume with them.
    await _create(hop, chain, root, jobmounts.publish_job_name(chain.chain_id))
    faults.crashpoint("workspace-publish-created")


async def _create(hop: Hop, chain: jobmounts.ChainWorkspace, owner_obj: Obj, name: str) -> None:
    """Publish Job ``name`` and the Secret it names (the push token), each created once,
    owned by and labelled with AgentJob ``owner_obj`` (whose condition reports it).

    The Secret first, so the pod never starts without its credential; a replay whose Job
    exists already ensures the Secret that Job names (the new one goes with the owner)."""
    began = time.time_ns()
    owner = statuswriting.owner_reference(owner_obj)
    secret = naming.job_secret_name(name, secrets.token_hex(naming.SECRET_NONCE_BYTES))
    settings = hop.rt.settings
    tool = jobmounts.tool_of(settings)
    security = (jobspec.DEFAULT_POD_SECURITY_CONTEXT, jobspec.DEFAULT_SECURITY_CONTEXT)
    body = jobmounts.publish_job(hop.namespace, chain, secret, owner, tool, security, name)
    body["metadata"]["labels"][models.AGENTJOB_LABEL] = owner_obj["metadata"]["name"]  # Watched.
    data = jobmounts.token_data(await _push_token(hop, chain, name))
    await workloads.ensure_secret(hop.namespace, secret, data, owner)
    job, created = await workloads.create_job(hop.namespace, body)
    named = _secret_of(job) if job is not None and not created else None
    if named is not None and named != secret:
        await workloads.ensure_secret(hop.namespace, named, data, owner)
    if created:
        log.info("Publishing chain %s's workspace: batch Job %s", chain.chain_id, name)
    await _trace_start(hop, chain, name, began, created)


async def _trace_start(
    hop: Hop, chain: jobmounts.ChainWorkspace, name: str, began: int, created: bool
) -> None:
    """The span of ``hop``'s job starting publish Job ``name`` (``traces/rules/steps``);
    a replay that found the Job records the same span, once."""
    if not hop.rt.traces.enabled:
        return
    job = steps.JobRef(hop.namespace, hop.name, chain.chain_id, hop.job.spec.agent_role)
    attributes = {
        "agentchain.publish.final": name == jobmounts.publish_job_name(chain.chain_id),
        "agentchain.publish.branch": chain.branch or None,
        "agentchain.publish.repository": chain.github,  # owner/name: never a URL's secret.
        "agentchain.publish.created": created,
    }
    await hop.rt.traces.record(steps.publish_span(job, name, began, time.time_ns(), attributes))


def _secret_of(job: Obj) -> str | None:
    for volume in job["spec"]["template"]["spec"].get("volumes") or []:
        if volume.get("name") == jobmounts.GIT_VOLUME:
            return str(volume["secret"]["secretName"])
    return None


async def _push_token(hop: Hop, chain: jobmounts.ChainWorkspace, publisher: str) -> str:
    """A token with ``contents: write`` on the chain's GitHub repository ("": none)."""
    side = side_of(hop.rt)
    event = hop.github_event
    if chain.github is None or side is None or event is None or event.installation_id is None:
        return ""
    try:
        minted = await side.app.mint(
            Scope(event.installation_id, chain.github, {"contents": "write"})
        )
    except GitHubError as exc:
        await events.emit(
            hop.obj,
            "Warning",
            Reason.WORKSPACE_PUBLISH_FAILED,
            f"No push token: {exc}",
            key="ws-push",
        )
        return ""
    # Recorded under the publish Job's name, not the job's: revoked when publishing
    # ended (``on_job``).
    expires = minted.expires_at.timestamp()
    await side.tokens.record(hop.namespace, publisher, minted.token, expires)
    return minted.token


def _ended(job: Obj) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return str(cond["type"])
    return None


async def on_job(rt: Runtime, job: Obj) -> None:
    """A publish Job changed: once it ended, record the outcome and the pull request;
    the chain's final one then queues the volume's deletion, a step's leaves it."""
    meta = job["metadata"]
    ended = _ended(job)
    labels = meta.get("labels") or {}
    owner, chain_id = labels.get(models.AGENTJOB_LABEL), labels.get(jobmounts.WORKSPACE_LABEL)
    if ended is None or not owner or not chain_id:
        return
    chain = await attaching.chain_workspace(rt, meta["namespace"], chain_id)
    if chain is None:
        return
    if meta.get("name") == jobmounts.publish_job_name(chain.chain_id):
        await _chain_published(rt, job, chain, ended)
    elif jobmounts.is_step_publish(str(meta.get("name")), chain.chain_id, owner):
        await _step_published(rt, job, chain, ended)


async def _chain_published(
    rt: Runtime, job: Obj, chain: jobmounts.ChainWorkspace, ended: str
) -> None:
    """The chain's final publish ended: reported on the root, recorded once per chain
    (``published``), the volume released."""
    meta = job["metadata"]
    namespace, chain_id = meta["namespace"], chain.chain_id
    store = attaching.store(rt)
    if await store.noted(namespace, chain_id, "published") is not None:
        return
    outcome = await _report(rt, job, chain, ended)
    if outcome is None:
        return  # The root is gone.
    await release(rt, namespace, chain)  # Before the record that makes a replay a no-op.
    await store.note(namespace, chain_id, "published", outcome)
    await _revoke(rt, namespace, meta["name"])


async def _step_published(
    rt: Runtime, job: Obj, chain: jobmounts.ChainWorkspace, ended: str
) -> None:
    """A step's publish ended: reported on the step's AgentJob, recorded once per publish
    Job (``published:<Job name>``); the volume stays (the chain goes on)."""
    meta = job["metadata"]
    namespace, field = meta["namespace"], f"{STEP_NOTE}{meta['name']}"
    store = attaching.store(rt)
    if await store.noted(namespace, chain.chain_id, field) is not None:
        return
    outcome = await _report(rt, job, chain, ended)
    if outcome is None:
        return  # The step's AgentJob is gone.
    await store.note(namespace, chain.chain_id, field, outcome)
    await _revoke(rt, namespace, meta["name"])


async def _report(rt: Runtime, job: Obj, chain: jobmounts.ChainWorkspace, ended: str) -> str | None:
    """The publish's outcome ("failed": none reported), written as the condition (and
    Event, and pull request) of the AgentJob it reports on; None when that one is gone."""
    meta = job["metadata"]
    name = meta["name"]
    owner = await resources.get(
        meta["namespace"], resources.AGENTJOBS, meta["labels"][models.AGENTJOB_LABEL]
    )
    if owner is None:
        return None
    outcome = await _outcome(meta["namespace"], name) or ("pushed" if ended == "Complete" else None)
    await _trace_end(rt, job, chain, outcome or "failed", failed=ended != "Complete")
    condition = await _settle(rt, owner, chain, ended, outcome, name)
    await rt.writes.patch(owner, AgentJobStatus(), condition)
    return outcome or "failed"


async def _trace_end(
    rt: Runtime, job: Obj, chain: jobmounts.ChainWorkspace, outcome: str, failed: bool
) -> None:
    """The span of publish Job ``job``'s run, under the span of its start; recorded
    before the outcome is, so a replay records it again, once."""
    if not rt.traces.enabled:
        return
    meta, status = job["metadata"], job.get("status") or {}
    times = (meta.get("creationTimestamp"), status.get("completionTime"))
    failed = failed or outcome not in PUSHED
    push = steps.push_span(
        chain.chain_id, meta["namespace"], meta["name"], times, time.time_ns(), outcome, failed
    )
    await rt.traces.record(push)


async def _revoke(rt: Runtime, namespace: str, publisher: str) -> None:
    side = side_of(rt)
    if side is not None:  # The push token: no use any more.
        await tokenminting.revoke(side, namespace, publisher)


async def _outcome(namespace: str, job_name: str) -> str | None:
    """The publish container's ``outcome``, from the end of its log."""
    pods = await workloads.list_pods(namespace, f"job-name={job_name}")
    for pod in pods:
        read = await workloads.read_log_tail(
            namespace, pod["metadata"]["name"], jobmounts.PUBLISH, PUBLISH_LOG_BYTES
        )
        if read is not None:
            found = stepchanges.publish_outcome(read[0].decode("utf-8", errors="replace"))
            if found is not None:
                return found
    return None


async def _settle(
    rt: Runtime,
    root: Obj,
    chain: jobmounts.ChainWorkspace,
    ended: str,
    outcome: str | None,
    publisher: str,
) -> Condition:
    """The ``WorkspacePublished`` condition (and Event, and pull request) of ``root``,
    the AgentJob that publish Job ``publisher`` reports on (the chain's root, or a
    step's own AgentJob)."""
    key = "ws-published" if publisher == jobmounts.publish_job_name(chain.chain_id) else "ws-step"
    if ended != "Complete" or outcome not in ("pushed", "already", "unchanged"):
        return await _not_published(root, chain, outcome, publisher, key)
    message = _pushed(chain, outcome)
    pulled = await _pull_request(rt, root, chain) if outcome != "unchanged" else None
    if isinstance(pulled, GitHubError):
        now = time.time()
        meta = root["metadata"]
        pending = {
            "root": meta["name"],
            "uid": meta.get("uid"),
            "outcome": outcome,
            "attempts": 1,
            "since": now,
        }
        wait = await _pull_later(rt, meta["namespace"], chain.chain_id, pending, pulled, now)
        if wait is None:
            return await _pull_failed(root, message, pulled, 1)
        message += (
            f" Pull request pending: GitHub failed ({pulled.reason}: {pulled}); "
            f"tried again in {wait:.0f} s, then less and less often, until it is open "
            "or GitHub refuses it for good."
        )
    elif pulled is not None:
        message += f" Pull request #{pulled}."
    await events.emit(root, "Normal", Reason.WORKSPACE_PUBLISHED, message, key=key)
    return Condition(
        type=WORKSPACE_PUBLISHED, status="True", reason=Reason.WORKSPACE_PUBLISHED, message=message
    )


async def _not_published(
    root: Obj, chain: jobmounts.ChainWorkspace, outcome: str | None, publisher: str, key: str
) -> Condition:
    """The condition and Warning Event of a publish that pushed nothing."""
    if outcome == "refused":
        reason = Reason.WORKSPACE_PUSH_REFUSED
        message = (
            f"Not pushed: branch {chain.branch} exists at a commit that is not the chain's "
            "nor an ancestor of it (someone else's branch); nothing was rewritten."
        )
    else:
        reason = Reason.WORKSPACE_PUBLISH_FAILED
        message = (
            f"Publishing to {chain.branch} failed ({outcome or 'no outcome reported'}); "
            f"see the log of batch Job {publisher}."
        )
    await events.emit(root, "Warning", reason, message, key=key)
    return Condition(type=WORKSPACE_PUBLISHED, status="False", reason=reason, message=message)


def _pushed(chain: jobmounts.ChainWorkspace, outcome: str) -> str:
    return f"Branch {chain.branch} holds the chain's commits ({outcome})."


async def _pull_request(
    rt: Runtime, root: Obj, chain: jobmounts.ChainWorkspace
) -> int | GitHubError | None:
    """Open or update the chain's one pull request: its number, GitHub's failure, or
    None (no App, or not a GitHub repository: no pull request to open)."""
    side = side_of(rt)
    event = provenance.trusted_event(
        statuswriting.parse(root).spec.event, sealing.vouched(rt.operator_keys, root)
    )
    if side is None or chain.github is None or event is None or event.installation_id is None:
        return None
    scope = Scope(
        event.installation_id, chain.github, {"pull_requests": "write", "contents": "read"}
    )
    issue = event.number if event.subject == "issue" and event.repository == chain.github else None
    record = await rt.chains.get(root["metadata"]["namespace"], chain.chain_id)
    steps = [(str(h.get("agent")), str(h.get("phase"))) for h in (record.hops if record else [])]
    body = stepchanges.pull_body(chain.chain_id, chain.branch, issue, steps)
    namespace = root["metadata"]["namespace"]
    # One at a time per chain: a step's publish and the chain's final one (or a retry)
    # ending together must not both find no pull request and both create one.
    async with rt.locks.lock(namespace, f"{PULL_LOCK}{chain.chain_id}"):
        try:
            number = await side.app.find_pull(scope, chain.branch)
            if number is None:
                base = await side.app.default_branch(scope)
                title = stepchanges.pull_title(chain.chain_id, issue)
                number = await side.app.create_pull(
                    scope, title=title, branch=chain.branch, base=base, body=body
                )
                faults.crashpoint("workspace-pull-created")
            elif not event.continues:  # A round leaves the first chain's description.
                await side.app.update_pull(scope, number, body)
        except GitHubError as exc:
            log.warning("pull request for chain %s: %s", chain.chain_id, exc)
            if exc.status == 401:
                side.app.forget(scope)  # A token GitHub no longer takes: the next mints one.
            return exc
    await attaching.store(rt).note(namespace, chain.chain_id, "pr", str(number))
    # Whose pull request it is, for the rounds its failing checks start (the first chain
    # to open it keeps it: a round pushing to its branch finds it and records nothing).
    await roundrecords.record_pull(
        rt.redis, rt.operator_keys, chain.github, number, namespace, chain.chain_id
    )
    # The chain's reviewers' verdicts become reviews of it (a replay records it again).
    # A round's pull request is the chain's it continues: that chain's write-back shows
    # the round (its rows, its Check Run), never a comment of the round's own.
    written = event.continues or chain.chain_id
    await writeback.pull_opened(rt, namespace, written, chain.github, number)
    return number


def _ends(exc: GitHubError) -> bool:
    """Whether trying the pull request again cannot help: the App or its installation
    must change (``permanent``), the repository is gone (NotFound), or GitHub refused
    the request itself (422, validation failed)."""
    return exc.permanent or exc.reason == NOT_FOUND or exc.status == 422


async def _pull_later(
    rt: Runtime,
    namespace: str,
    chain_id: str,
    pending: dict[str, Any],
    exc: GitHubError,
    now: float,
) -> float | None:
    """Record the pull request as pending for another try (``stepchanges.pull_retry_wait``);
    the wait, or None when it is given up (nothing recorded)."""
    wait = stepchanges.pull_retry_wait(
        final=_ends(exc),
        retry_after=exc.retry_after,
        first_wait=float(rt.settings.resync_seconds),
        attempts=int(pending["attempts"]),
        since=float(pending["since"]),
        now=now,
    )
    if wait is not None:
        await attaching.store(rt).pull_pending(namespace, chain_id, pending, now + wait)
    return wait


async def _pull_failed(root: Obj, pushed: str, exc: GitHubError, attempts: int) -> Condition:
    """The condition of a chain whose pull request was given up, and its Warning Event."""
    if _ends(exc):
        detail = f"{exc.reason}: {exc}"
    else:
        detail = f"GitHub failed {attempts} times for a day, the last: {exc.reason}: {exc}"
    message = f"{pushed} No pull request: {detail}"
    reason = Reason.WORKSPACE_PULL_REQUEST_FAILED
    await events.emit(root, "Warning", reason, message, key="ws-pull-request")
    return Condition(type=WORKSPACE_PUBLISHED, status="True", reason=reason, message=message)


async def sweep(rt: Runtime, now: float | None = None) -> None:
    """In every namespace with agents: delete the workspace volumes whose time has come,
    and try the pending pull requests that are due again."""
    at = time.time() if now is None else now
    pulls = True
    for namespace in rt.agents.namespaces():
        await _sweep(rt, namespace)
        if pulls:  # After a rate limit the others wait for the next sweep.
            pulls = await _retry_pulls(rt, namespace, at)


async def _retry_pulls(rt: Runtime, namespace: str, now: float) -> bool:
    """Try the namespace's due pull requests again; False when GitHub rate-limited one."""
    for chain_id in await attaching.store(rt).pulls_due(namespace, now):
        try:
            failed = await _retry_pull(rt, namespace, chain_id, now)
        except apierrors.KubeError as exc:
            log.warning("pull request of chain %s/%s: %s", namespace, chain_id, exc)
            continue
        if failed is not None and failed.reason == RATE_LIMITED:
            return False
    return True


async def _retry_pull(rt: Runtime, namespace: str, chain_id: str, now: float) -> GitHubError | None:
    """One more try of a pending pull request; GitHub's failure when it stays pending.

    The root's condition and Event are written before the entry is settled, so a crash
    in between tries again: the pull request is found by its head, the Event exists."""
    store = attaching.store(rt)
    pending = await store.pull(namespace, chain_id)
    chain = await attaching.chain_workspace(rt, namespace, chain_id)
    root = None
    if pending is not None and chain is not None:
        root = await resources.get(namespace, resources.AGENTJOBS, str(pending["root"]))
    if (
        root is None
        or pending is None
        or chain is None
        or root["metadata"].get("uid") != pending["uid"]
    ):
        await store.pull_settled(namespace, chain_id)  # The chain's records are gone.
        return None
    pushed = _pushed(chain, str(pending["outcome"]))
    pulled = await _pull_request(rt, root, chain)
    attempts = int(pending["attempts"]) + 1
    if isinstance(pulled, GitHubError):
        pending["attempts"] = attempts
        if await _pull_later(rt, namespace, chain_id, pending, pulled, now) is not None:
            return pulled
        condition = await _pull_failed(root, pushed, pulled, attempts)
    else:
        message = pushed if pulled is None else f"{pushed} Pull request #{pulled}."
        reason = Reason.WORKSPACE_PUBLISHED
        await events.emit(root, "Normal", reason, message, key="ws-pull-request")
        condition = Condition(
            type=WORKSPACE_PUBLISHED, status="True", reason=reason, message=message
        )
        log.info("Chain %s/%s: %s", namespace, chain_id, message)
    await rt.writes.patch(root, AgentJobStatus(), condition)
    await store.pull_settled(namespace, chain_id)
    return None


async def _sweep(rt: Runtime, namespace: str) -> None:
    store = attaching.store(rt)
    for chain_id in await store.due(namespace):
        try:
            await workloads.delete_claim(namespace, jobmounts.claim_name(chain_id))
        except apierrors.KubeError as exc:
            log.warning("workspace volume of chain %s not deleted yet: %s", chain_id, exc)
            continue
        log.info("Deleted the workspace volume of chain %s/%s", namespace, chain_id)
        await store.released(namespace, chain_id)
