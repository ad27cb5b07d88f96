"""Starting an AgentJob: status, dependencies, prompt, token and exactly one batch Job.

Every step is idempotent so the AgentJob event handler, the resync and the
parent's fast path may all call ``start`` for the same job: the batch Job's
name is derived from the AgentJob, so a second create answers AlreadyExists.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TypeVar

from agentchain import faults, metrics, models
from agentchain.engine import depending, gating, prompting, records, team
from agentchain.engine.locking import lock_for
from agentchain.engine.runtime import Runtime
from agentchain.kube import events, resources, workloads
from agentchain.models.agentjob import TERMINAL_PHASES, AgentJob
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason
from agentchain.policy import chains, jobspec, naming
from agentchain.policy.agents import Ambiguous
from agentchain.policy.jobspec import JobInputs, build_job
from agentchain.policy.outcomes import is_terminal
from agentchain.policy.prompts import PromptRenderError

log = logging.getLogger(__name__)
Obj = records.Obj


# (namespace, name, uid) of jobs this process started (launched or ended): their
# creation event, arriving after the fast path is done, needs no read to see that.
_STARTED_HERE: OrderedDict[tuple[str, str, str], None] = OrderedDict()
_STARTED_HERE_MAX = 10_000


def _key(obj: Obj) -> tuple[str, str, str]:
    namespace, name = records.name_of(obj)
    return namespace, name, str(obj["metadata"].get("uid"))


_K = TypeVar("_K", bound=tuple[str, ...])

# (namespace, batch Job name) of Jobs this process created ahead of their AgentJob:
# their creator owns them, so the Job watch leaves them alone (engine/orphans).
_CREATED_AHEAD: OrderedDict[tuple[str, str], None] = OrderedDict()


def created_ahead(namespace: str, job_name: str) -> bool:
    return (namespace, job_name) in _CREATED_AHEAD


def _remember(memo: OrderedDict[_K, None], key: _K) -> None:
    memo[key] = None
    while len(memo) > _STARTED_HERE_MAX:
        memo.popitem(last=False)


def wants_start(obj: Obj) -> bool:
    """Whether a watched job may need starting: not launched, not ended, not by us."""
    status = obj.get("status") or {}
    if status.get("jobName") or status.get("phase") in TERMINAL_PHASES:
        return False
    return _key(obj) not in _STARTED_HERE


async def start(rt: Runtime, obj: Obj) -> None:
    """Start ``obj`` from a fresh read, unless this process already started it."""
    namespace, name = records.name_of(obj)
    async with lock_for(namespace, name):
        if _key(obj) in _STARTED_HERE:
            return  # Started by the fast path while this caller waited for the lock.
        fresh = await resources.get(namespace, resources.AGENTJOBS, name)
        if fresh is None or is_terminal(records.parse(fresh).status):
            return
        await start_locked(rt, fresh)
    if is_terminal(records.parse(fresh).status):
        # Ended without running (a dependency cycle, no agent): the jobs waiting for
        # it go on now, outside its lock, rather than at the next resync.
        from agentchain.engine import finishing

        await finishing.wake_dependents(rt, namespace, name)


async def start_locked(rt: Runtime, obj: Obj, prepared: Prepared | None = None) -> None:
    """Start ``obj``, current as given (just read, or just created by its parent, whose
    launch ``prepared`` was built meanwhile); the caller holds its lock."""
    namespace = obj["metadata"]["namespace"]
    unowned = prepared.unowned if prepared is not None else None
    await _start_locked(rt, obj, prepared)
    status = obj.get("status") or {}  # As the last patch answered.
    if unowned is not None and status.get("jobName") != unowned["metadata"]["name"]:
        await _drop(namespace, unowned)  # Not launched after all (e.g. agent gone).
    if status.get("jobName") or status.get("phase") in TERMINAL_PHASES:
        _remember(_STARTED_HERE, _key(obj))


async def _drop(namespace: str, unowned: Obj | None) -> None:
    """Delete a batch Job created ahead for a start that did not use it: it must not run."""
    if unowned is not None:
        meta = unowned["metadata"]
        await workloads.delete_job(namespace, meta["name"], meta["uid"])


async def _start_locked(rt: Runtime, obj: Obj, prepared: Prepared | None = None) -> None:
    job = records.parse(obj)
    if is_terminal(job.status):
        return
    try:
        pos = records.position(obj)
    except chains.ChainMetadataError as exc:
        from agentchain.engine import finishing

        await finishing.record_failure(rt, obj, Reason.INVALID_CHAIN_METADATA, str(exc))
        return
    # The chain fields go out with the first status write that has to happen anyway
    # (on the hot path: with the batch Job's name), saving a round trip per hop.
    init = await _chain_status(obj, job, pos) if job.status.chain_id is None else {}
    annotations = obj["metadata"].get("annotations") or {}
    if annotations.get(records.DISPOSITION):
        await _write(obj, init)
        await _record_disposition(rt, obj, annotations)
        return
    if job.status.job_name:
        await _write(obj, init)
        return  # The batch Job exists; the pod and Job watchers take it from here.
    if await gating.held(rt, obj, init):
        return  # Stopped, queued or refused instead (issue 16): engine/gating.py.
    agent = await rt.agents.by_trigger(obj["metadata"]["namespace"], job.spec.agent_role)
    if not isinstance(agent, AiAgent) or not agent.spec.enabled:
        await _write(obj, init)
        await _refuse_agent(rt, obj, job, agent)
        return
    deps = await prompting.dependencies(obj, job)
    cycle = await depending.cycle_of(obj) if deps.waiting or deps.after_cycle else None
    if deps.waiting or cycle is not None:
        await _write(obj, init)
        await depending.hold(rt, obj, cycle, deps.reason, deps.message)
        return
    await launch(rt, obj, agent, deps.results, init=init, prepared=prepared)


async def _write(obj: Obj, status: Obj) -> None:
    if status:
        await records.patch(obj, status)


async def _chain_status(obj: Obj, job: AgentJob, pos: chains.ChainPosition) -> Obj:
    if models.CHAIN_ID not in (obj["metadata"].get("annotations") or {}):
        # A root job: its chain metadata goes on the object too, so that
        # `kubectl get agentjobs -l labrats.work/chain-id=<id>` lists it.
        namespace, name = records.name_of(obj)
        patched = await resources.patch_metadata(
            namespace,
            resources.AGENTJOBS,
            name,
            labels=chains.position_labels(pos, job.spec.agent_role),
            annotations=chains.position_annotations(pos, None),
        )
        records.wrote(patched)
    return {
        "phase": job.status.phase or "Pending",
        "reason": job.status.reason or Reason.CREATED,
        "message": job.status.message or "Accepted by the operator.",
        **records.chain_fields(obj, pos),
    }


async def _record_disposition(rt: Runtime, obj: Obj, annotations: dict[str, str]) -> None:
    """A Skipped or refused record: created by its parent's decision, never run."""
    from agentchain.engine import progressing  # Cycle: progress → start → progress.

    disposition = annotations[records.DISPOSITION]
    message = annotations.get(records.DISPOSITION_MESSAGE, "")
    if disposition == "skipped":
        phase, reason = "Skipped", Reason.SKIPPED
    else:
        phase, reason = "Failed", disposition.removeprefix("refused:")
    now = records.now().isoformat()
    await records.patch(
        obj,
        {"phase": phase, "reason": reason, "message": message, "completionTime": now},
    )
    await team.job(rt, obj)
    kind: events.EventType = "Normal" if phase == "Skipped" else "Warning"
    await events.emit(obj, kind, reason, message, key=f"disposition:{reason}")
    metrics.JOBS.labels(obj["metadata"]["namespace"], obj["spec"]["agentRole"], phase).inc()
    await progressing.progress_locked(rt, obj)


async def _refuse_agent(
    rt: Runtime, obj: Obj, job: AgentJob, agent: AiAgent | Ambiguous | None
) -> None:
    from agentchain.engine import finishing

    role = job.spec.agent_role
    if isinstance(agent, Ambiguous):  # Never run on one of them (SPEC §1).
        reason, message = Reason.DUPLICATE_TRIGGER_NAME, agent.message
    elif agent is None:
        reason = Reason.AGENT_NOT_FOUND
        message = f"No AiAgent in this namespace has triggerName {role!r}."
    else:
        reason = Reason.AGENT_NOT_ENABLED
        message = f"AiAgent {role!r} is disabled (enabled: false)."
    await finishing.record_failure(rt, obj, reason, message)


async def retry(rt: Runtime, obj: Obj, agent: AiAgent, attempt: int, why: str) -> None:
    """Run ``attempt`` (from 2) as a new batch Job; the caller holds the job's lock.

    The prompt is rebuilt, so it carries whatever anchor the failed attempt wrote.
    """
    job = records.parse(obj)
    deps = await prompting.dependencies(obj, job)  # All ended: the job already ran.
    total = agent.spec.backoff_limit + 1
    message = f"Attempt {attempt} of {total} after attempt {attempt - 1} {why}"
    await launch(rt, obj, agent, deps.results, attempt=attempt, retry_message=message)
    await events.emit(obj, "Warning", Reason.RETRYING, message, key=f"retry:{attempt}")


@dataclass(frozen=True)
class Prepared:
    """A job's prompt and batch Job, built before either is created.

    A chain child's are built while its AgentJob is being created: nothing in them
    needs the AgentJob's uid, only the ownerReferences added at creation.  The token
    is not part of it: only the Secret holds it (with the prompt), and that is
    created once the AgentJob exists (``launch``), off the hop's critical path.
    """

    agent: AiAgent
    job: Obj
    prompt: str
    unowned: Obj | None = None
    """The batch Job, when it was created before its AgentJob existed: without owner."""


async def prepare(
    rt: Runtime,
    obj: Obj,
    agent: AiAgent,
    deps: list[prompting.DependencyResult],
    *,
    attempt: int = 1,
) -> Prepared:
    """Render the prompt and build the batch Job of ``attempt``; raises PromptRenderError
    (PromptTooLarge when the prompt cannot be delivered)."""
    job = records.parse(obj)
    pos = records.position(obj)
    namespace, name = records.name_of(obj)
    prompt = await prompting.build(rt, obj, job, agent, pos, deps, attempt=attempt)
    jobspec.check_prompt(prompt)
    job_name = naming.attempt_job_name(name, attempt)
    nonce = secrets.token_hex(naming.SECRET_NONCE_BYTES)
    inputs = JobInputs(
        agentjob_name=name,
        job_name=job_name,
        namespace=namespace,
        agent=agent.spec,
        chain_id=pos.chain_id,
        secret_name=naming.job_secret_name(job_name, nonce),
        labels=chains.position_labels(pos, job.spec.agent_role),
        annotations=chains.position_annotations(pos, records.parent_of(obj)),
        attempt=attempt,
    )
    return Prepared(agent, build_job(inputs, rt.settings), prompt)


async def create_unowned(prepared: Prepared) -> Prepared:
    """Create the prepared batch Job before its AgentJob exists (a chain child that
    cannot exist yet), so that its pod is not held up by that create; ``launch`` adds
    the owner.

    Until then it has no ownerReference; a crash in between leaves it to the
    replay's ``launch`` (same child, same Job: adopted) or to ``orphans``.
    """
    meta = prepared.job["metadata"]
    _remember(_CREATED_AHEAD, (meta["namespace"], meta["name"]))
    job, created = await workloads.create_job(meta["namespace"], prepared.job)
    faults.crashpoint("child-job-unowned")
    return replace(prepared, unowned=job) if created else prepared


async def _ensure_secret(rt: Runtime, obj: Obj, owner: Obj, job: Obj, prompt: str) -> None:
    """Issue the job's token (the live one again on a replay or retry) into the Secret
    the batch Job ``job`` names, with the prompt.

    Issued only once the AgentJob exists and owns the Secret: a launch that never
    gets this far leaves no token behind to revoke.  AlreadyExists means an earlier
    run created it (its name is random, recorded only in that Job).
    """
    secret = jobspec.secret_name_of(job)
    if secret is None:
        return  # Not a Job built by this version: it reads no Secret.
    namespace, name = records.name_of(obj)
    chain_id = records.position(obj).chain_id
    ttl = rt.settings.job_token_ttl_seconds
    uid = obj["metadata"]["uid"]
    token = await rt.tokens.issue(namespace, name, uid, chain_id, ttl)
    await workloads.ensure_secret(namespace, secret, jobspec.secret_data(prompt, token), owner)


async def _adopt(rt: Runtime, obj: Obj, owner: Obj, existing: Obj, built: Obj, prompt: str) -> None:
    """A Job an earlier (crashed) run created: own it, and create the Secret it names
    (the Secret just created for ``built`` goes with the AgentJob, unused).  A Job
    owned by another AgentJob of this name (deleted, created again) is left alone."""
    owners = [ref.get("uid") for ref in existing["metadata"].get("ownerReferences") or []]
    if owners and owner["uid"] not in owners:
        return
    if not owners:
        namespace, name = records.name_of(existing)
        await workloads.set_owner(namespace, name, owner)
    if jobspec.secret_name_of(existing) != jobspec.secret_name_of(built):
        await _ensure_secret(rt, obj, owner, existing, prompt)


def preparable(obj: Obj, agent: AiAgent) -> bool:
    """Whether ``obj``'s launch can be prepared before it exists: nothing in its prompt
    depends on the object (learnings are claimed in its uid's name) or on others."""
    spec = records.parse(obj).spec
    return not spec.depends_on and spec.memory_scope != "all" and agent.spec.learnings is None


async def launch(
    rt: Runtime,
    obj: Obj,
    agent: AiAgent,
    deps: list[prompting.DependencyResult],
    *,
    init: Obj | None = None,
    attempt: int = 1,
    retry_message: str | None = None,
    prepared: Prepared | None = None,
) -> None:
    """Create the batch Job of ``attempt`` (built now unless ``prepared`` for this
    agent); the caller holds the lock."""
    from agentchain.engine import finishing

    job = records.parse(obj)
    init = init or {}
    namespace, name = records.name_of(obj)
    job_name = naming.attempt_job_name(name, attempt)
    if (
        prepared is None
        or deps
        or prepared.agent.spec != agent.spec
        or prepared.job["metadata"]["name"] != job_name
    ):
        try:
            prepared = await prepare(rt, obj, agent, deps, attempt=attempt)
        except PromptRenderError as exc:  # PromptTooLarge too: each says its reason.
            await _write(obj, init)
            await finishing.record_failure(rt, obj, exc.reason, str(exc))
            return
    owner = records.owner_reference(obj)
    body = {**prepared.job, "metadata": {**prepared.job["metadata"], "ownerReferences": [owner]}}
    # Side by side: a pod whose Secret is not there yet waits for it
    # (CreateContainerConfigError), and the token and its Secret are two small writes.
    ensuring = _ensure_secret(rt, obj, owner, prepared.unowned or body, prepared.prompt)
    if prepared.unowned is not None:
        created = True
        # The owner and the status below are bookkeeping: the hop's pod goes first.
        await asyncio.gather(ensuring, rt.pods.wait(namespace, job_name))
        await workloads.set_owner(namespace, job_name, owner)
    else:
        _, (existing, created) = await asyncio.gather(
            ensuring, workloads.create_job(namespace, body)
        )
        if existing is not None and not created:
            await _adopt(rt, obj, owner, existing, body, prepared.prompt)
    status: Obj = {**init, "jobName": job_name, "attempt": attempt}
    if retry_message is None:
        status["reason"] = Reason.JOB_CREATED
        status["message"] = f"Batch Job {job_name} created."
    else:
        status.update({"phase": "Pending", "reason": Reason.RETRYING, "podName": None})
        status["message"] = f"{retry_message}: batch Job {job_name} created."
    if job.status.phase in (None, "Waiting"):
        status["phase"] = "Pending"
    await records.patch(obj, status)
    await team.job(rt, obj)  # After the Job exists: off the hop's critical path.
    if created:
        log.info(
            "Created batch Job %s/%s (attempt %d) for agent %s",
            namespace,
            job_name,
            attempt,
            agent.spec.trigger_name,
        )
