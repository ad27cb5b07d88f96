"""Launching: from an AgentJob to its running batch Job, or to why it cannot run.

:func:`launch` answers :class:`Launched` (the batch Job exists: created now or by
an earlier run), :class:`Waiting` (``dependsOn`` jobs have not all ended, or no
AiAgent has its ``agentRole`` yet, within ``AGENTCHAIN_AGENT_WAIT_SECONDS`` of its
creation: ``hop.rules.agentwaits``; the status says so) or
:class:`~agentchain.core.hopstate.Ended` (the job ends without running: a Skipped or
refused record, no such agent after that wait, a disabled or ambiguous one, a
dependency cycle, a prompt that does not render); recording an end is
``hop.closing``'s.

Every step is idempotent, so the parent's hop, the job's own watch event and the
resync may all launch the same job: the batch Job's name is derived from the
AgentJob and its attempt, so a second create answers AlreadyExists; the job token
is issued by a Lua script that returns the live one; the Job is created with its
ownerReference, so it never exists without an owner.  The one thing a replay may
leave behind is an unused job Secret (random name, owned by the AgentJob): the
Job that exists names the Secret its pod reads, and that is the one ensured.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass

from agentchain import models
from agentchain.aiagents.rules.resolution import Ambiguous
from agentchain.core import statuswriting
from agentchain.core.hopstate import Ended, Hop, Obj, typed
from agentchain.core.rules import naming
from agentchain.core.rules import ownedby as policy_ownership
from agentchain.flow import gating
from agentchain.github import tokenminting
from agentchain.hop import depending
from agentchain.hop.rules import agentwaits, chains, dependencies, jobspec
from agentchain.hop.rules.jobspec import JobInputs, build_job
from agentchain.kube import apierrors, events, resources, workloads
from agentchain.models.agentjob import AgentJobStatus
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import AGENT_FOUND, DEPENDENCIES_READY, Condition, Reason
from agentchain.prompts import prompting, teamkeeping
from agentchain.prompts.rules import storetrust
from agentchain.prompts.rules.assembly import PromptRenderError
from agentchain.store import sealing
from agentchain.workspaces import attaching
from agentchain.workspaces.rules import jobmounts

log = logging.getLogger(__name__)

ADMISSION_DENIED = "denied request"
"""In the message of a create an admission policy or webhook refused."""


@dataclass(frozen=True)
class Launched:
    """The batch Job ``job_name`` exists; the pod and Job watches take it from here."""

    job_name: str


@dataclass(frozen=True)
class Waiting:
    """Not launched: waiting for its dependencies (written to its status)."""


Launch = Launched | Waiting | Ended


async def launch(hop: Hop, *, attempt: int = 1, retry: str | None = None) -> Launch:
    """Launch ``attempt`` of the job (``retry``: why, when it is a retry)."""
    job = hop.job
    if job.status.job_name and retry is None:
        return Launched(job.status.job_name)
    try:
        init = await _chain_status(hop) if job.status.chain_id is None else None
    except chains.ChainMetadataError as exc:
        return Ended("Failed", Reason.INVALID_CHAIN_METADATA, str(exc))
    annotations = hop.obj["metadata"].get("annotations") or {}
    if annotations.get(models.DISPOSITION):
        return _disposition(annotations, init)
    agent = await _agent(hop, init, attempt, retry)
    if not isinstance(agent, AiAgent):
        return agent
    # Stopped, awaiting approval, queued, refused; approval may add to init.
    first = statuswriting.fields(init) if init is not None else {}
    gated = await _gated(hop, first, attempt)
    if gated is not None:
        return gated
    init = AgentJobStatus.model_validate(first) if first else None
    deps = await prompting.dependencies(hop.obj, job)
    cycle = await depending.cycle_of(hop.obj) if deps.waiting or deps.after_cycle else None
    if cycle is not None:
        message = dependencies.cycle_message(cycle)
        reason = Reason.DEPENDENCY_CYCLE
        never = Condition(type=DEPENDENCIES_READY, status="False", reason=reason, message=message)
        return Ended("Failed", reason, message, init, (never,))
    if deps.waiting:
        if init is not None:
            await hop.patch(init)
        await depending.wait(hop.rt, hop.obj, deps.reason, deps.message)
        return Waiting()
    built = await _built(hop, agent, deps.results, attempt, init)
    if isinstance(built, Ended):
        return built
    body, prompt, mounting = built
    return await _admitted(hop, agent, body, prompt, init, retry, mounting)


async def _admitted(
    hop: Hop,
    agent: AiAgent,
    body: Obj,
    prompt: str,
    init: AgentJobStatus | None,
    retry: str | None,
    mounting: jobmounts.Mounting | None,
) -> Launched | Ended:
    """:func:`_create`, or the job's end when admission refuses what it creates."""
    try:
        return await _create(hop, agent, body, prompt, init, retry, mounting)
    except (apierrors.Forbidden, apierrors.Invalid) as exc:
        if ADMISSION_DENIED not in exc.message:
            raise  # RBAC or a bug of ours: retried, and loud in the log.
        # An admission policy (the chart's, or the cluster's) refuses the Job or Secret
        # this AiAgent makes: the same every time, so the job fails saying which rule.
        message = f"The API server refused the job's batch Job or Secret: {exc.message}"
        return Ended("Failed", Reason.JOB_REFUSED, message, init)


async def _built(
    hop: Hop,
    agent: AiAgent,
    deps: list[prompting.DependencyResult],
    attempt: int,
    init: AgentJobStatus | None,
) -> tuple[Obj, str, jobmounts.Mounting | None] | Ended:
    """The batch Job, its prompt and its workspace; or why the job cannot run."""
    mounting = await attaching.mount(hop, agent)  # The chain's volume.
    if isinstance(mounting, attaching.Refused):
        return Ended("Failed", mounting.reason, mounting.message, init)
    try:
        body, prompt = await _build(hop, agent, deps, attempt, mounting)
    except PromptRenderError as exc:  # PromptTooLarge too: each says its reason.
        return Ended("Failed", exc.reason, str(exc), init)
    return body, prompt, mounting


def _disposition(annotations: dict[str, str], init: AgentJobStatus | None) -> Ended:
    """A Skipped or refused record: created by its parent's decision, never run."""
    disposition = annotations[models.DISPOSITION]
    message = annotations.get(models.DISPOSITION_MESSAGE, "")
    if disposition == "skipped":
        return Ended("Skipped", Reason.SKIPPED, message, init)
    return Ended("Failed", disposition.removeprefix("refused:"), message, init)


async def _agent(
    hop: Hop, init: AgentJobStatus | None, attempt: int, retry: str | None
) -> AiAgent | Waiting | Ended:
    """The job's AiAgent; else it waits for one, or ends without one."""
    agent = await hop.rt.agents.by_trigger(hop.namespace, hop.job.spec.agent_role)
    if agent is None and retry is None:  # A retry's agent was there: it was deleted.
        return await _missing(hop, init, attempt)
    if not isinstance(agent, AiAgent) or not agent.spec.enabled:
        return _refusal(hop, agent, init)
    return agent


async def _missing(hop: Hop, init: AgentJobStatus | None, attempt: int) -> Waiting | Ended:
    """No AiAgent has the job's ``agentRole``: it waits for one (it may be applied a moment
    later), or ends ``AgentNotFound`` once ``agent_wait_seconds`` have passed."""
    wait_seconds = hop.rt.settings.agent_wait_seconds
    created = agentwaits.created_at(hop.obj["metadata"].get("creationTimestamp"))
    role = hop.job.spec.agent_role
    verdict = agentwaits.missing_agent(role, created, time.time(), wait_seconds)
    if isinstance(verdict, agentwaits.NoAgent):
        # With no wait configured the job ends as it always did: no condition of a wait.
        never = () if wait_seconds <= 0 else (_agent_missing(verdict.message),)
        return Ended("Failed", verdict.reason, verdict.message, init, never)
    # A waiting job can be stopped: the other gates are never reached while it waits.
    first = statuswriting.fields(init) if init is not None else {}
    stopped = await gating.stopped(hop, first)
    if stopped is not None:
        await _never_runs(hop, attempt)
        return stopped
    # Written once: its own watch event, the resync and AiAgent events come back here
    # and find the wait recorded (the message is the same on every look).
    if hop.job.status.reason != Reason.WAITING_FOR_AGENT:
        fields = {"phase": "Pending", "reason": Reason.WAITING_FOR_AGENT}
        await hop.patch(
            typed({**first, **fields, "message": verdict.message}), _agent_missing(verdict.message)
        )
        await events.emit(
            hop.obj, "Normal", Reason.WAITING_FOR_AGENT, verdict.message, key="agent-wait"
        )
    return Waiting()


def _agent_missing(message: str) -> Condition:
    return Condition(
        type=AGENT_FOUND, status="False", reason=Reason.AGENT_NOT_FOUND, message=message
    )


def _refusal(hop: Hop, agent: AiAgent | Ambiguous | None, init: AgentJobStatus | None) -> Ended:
    role = hop.job.spec.agent_role
    if isinstance(agent, Ambiguous):  # Never run on one of them (SPEC §1).
        return Ended("Failed", Reason.DUPLICATE_TRIGGER_NAME, agent.message, init)
    if agent is None:
        message = f"No AiAgent in this namespace has triggerName {role!r}."
        return Ended("Failed", Reason.AGENT_NOT_FOUND, message, init)
    message = f"AiAgent {role!r} is disabled (enabled: false)."
    return Ended("Failed", Reason.AGENT_NOT_ENABLED, message, init)


async def _chain_status(hop: Hop) -> AgentJobStatus:
    """The chain fields, for the job's first status write (with the Job's name)."""
    pos = statuswriting.position(hop.obj, hop.rt.operator_keys)
    job = hop.job
    if models.CHAIN_ID not in (hop.obj["metadata"].get("annotations") or {}):
        # A root job: its chain metadata goes on the object too, so that
        # `kubectl get agentjobs -l labrats.work/chain-id=<id>` lists it, under the
        # position seal only: the operator places it, but vouches for no hand-made event.
        # Its issue's label only for an event it vouches for, so that a comment command
        # on that issue finds it.
        annotations = chains.position_annotations(pos, None)
        keys = hop.rt.operator_keys
        annotations[models.SEAL] = sealing.position_seal(keys, hop.namespace, hop.name, annotations)
        patched = await resources.patch_metadata(
            hop.namespace,
            resources.AGENTJOBS,
            hop.name,
            labels={
                **chains.position_labels(pos, job.spec.agent_role),
                **chains.issue_labels(hop.github_event),
            },
            annotations=annotations,
        )
        hop.rt.writes.wrote(patched)
    accepted = AgentJobStatus(
        phase=job.status.phase or "Pending",
        reason=job.status.reason or Reason.CREATED,
        message=job.status.message or "Accepted by the operator.",
    )
    return statuswriting.merged(accepted, statuswriting.chain_fields(hop.obj, pos))


async def _build(
    hop: Hop,
    agent: AiAgent,
    deps: list[prompting.DependencyResult],
    attempt: int,
    mounting: jobmounts.Mounting | None,
) -> tuple[Obj, str]:
    """The batch Job of ``attempt`` (owned by the AgentJob) and its prompt; raises
    PromptRenderError (PromptTooLarge when the prompt cannot be delivered)."""
    job, pos = hop.job, statuswriting.position(hop.obj, hop.rt.operator_keys)
    prompt = await prompting.build(hop.rt, hop.obj, job, agent, pos, deps, attempt=attempt)
    jobspec.check_prompt(prompt)
    job_name = naming.attempt_job_name(hop.name, attempt)
    nonce = secrets.token_hex(naming.SECRET_NONCE_BYTES)
    inputs = JobInputs(
        agentjob_name=hop.name,
        job_name=job_name,
        namespace=hop.namespace,
        agent=agent.spec,
        chain_id=pos.chain_id,
        secret_name=naming.job_secret_name(job_name, nonce),
        labels=chains.position_labels(pos, job.spec.agent_role),
        annotations=chains.position_annotations(pos, statuswriting.parent_of(hop.obj)),
        attempt=attempt,
        workspace=mounting,
        trace_env=hop.rt.traces.agent_env(pos.chain_id, hop.namespace, hop.name),
    )
    body = build_job(inputs, hop.rt.settings)
    body["metadata"]["ownerReferences"] = [statuswriting.owner_reference(hop.obj)]
    return body, prompt


async def _gated(hop: Hop, first: Obj, attempt: int) -> Waiting | Ended | None:
    """What holds the job back (``gating.held``), if anything."""
    gate = await gating.held(hop, first, attempt)
    if isinstance(gate, Ended):
        await _never_runs(hop, attempt)
        return gate
    return Waiting() if gate is not None else None


async def _never_runs(hop: Hop, attempt: int) -> None:
    """A job ending where it would launch (stopped, superseded, refused) must not run:
    a launch killed between its batch Job's create and the status write naming it left
    that Job, which would run the agent after all.  Deleted if it is the one the
    operator names for this AgentJob (a read first: never anyone else's Job)."""
    name = naming.attempt_job_name(hop.name, attempt)
    job = hop.rt.jobs.get(hop.namespace, name) or await workloads.get_job(hop.namespace, name)
    if job is not None and policy_ownership.runs(job, hop.name):
        log.info("%s/%s ends before its launch: deleting its Job %s", hop.namespace, hop.name, name)
        await workloads.delete_job(hop.namespace, name)


async def _create(
    hop: Hop,
    agent: AiAgent,
    body: Obj,
    prompt: str,
    init: AgentJobStatus | None,
    retry: str | None,
    mounting: jobmounts.Mounting | None = None,
) -> Launched:
    """Create the batch Job and its Secret, then record the launch on the status."""
    job_name = body["metadata"]["name"]
    if mounting is not None:
        # The Secret first: ``workspace-prepare`` reads its clone token through
        # *optional* references to it (a job without a token clones anonymously), and
        # an optional reference does not wait for a Secret that is not there yet, so a
        # pod that started before it cloned a private repository without its token.
        await _ensure_secret(hop, body, prompt, mounting)
        existing, created = await workloads.create_job(hop.namespace, body)
    else:
        # Side by side: a pod whose Secret is not there yet waits for it (its references
        # are required: CreateContainerConfigError), and the token and its Secret are
        # two small writes.
        _, (existing, created) = await asyncio.gather(
            _ensure_secret(hop, body, prompt, mounting), workloads.create_job(hop.namespace, body)
        )
    if existing is not None and not created and _earlier_incarnation(hop, existing):
        existing, created = await _replace_earlier(hop, body)
    if existing is not None:
        # Indexed from the answer: its pod's first event needs no Job read even when
        # it beats the Job's own watch event (``ownership.controlling_job``).
        hop.rt.jobs.seen(existing)
        if not created:
            await _reuse(hop, existing, body, prompt, mounting)
    attempt = int(body["metadata"]["labels"][models.ATTEMPT_LABEL])
    launched = _launched(hop, job_name, attempt, retry)
    if mounting is not None:
        workspace = AgentJobStatus.model_validate({"workspace": attaching.status_of(mounting)})
        launched = statuswriting.merged(launched, workspace)
    await hop.patch(statuswriting.merged(init, launched), *_ready(hop))
    await teamkeeping.job(hop.rt, hop.obj)
    if retry is not None:
        await events.emit(hop.obj, "Warning", Reason.RETRYING, retry, key=f"retry:{attempt}")
    if created:
        trigger = agent.spec.trigger_name
        log.info(
            "Created batch Job %s/%s (attempt %d) for %s", hop.namespace, job_name, attempt, trigger
        )
    return Launched(job_name)


def _earlier_incarnation(hop: Hop, existing: Obj) -> bool:
    """Whether ``existing`` is the batch Job of an earlier AgentJob of this name (deleted,
    then created again) that the garbage collector has not removed yet."""
    owner = policy_ownership.controller_agentjob(existing)
    return owner is not None and owner.name == hop.name and owner.uid != hop.uid


async def _replace_earlier(hop: Hop, body: Obj) -> tuple[Obj | None, bool]:
    """Delete the earlier object's Job and create this job's.  Its owner is gone (a name
    has one AgentJob at a time), so it is garbage already; left there, this job would
    be recorded as launched into it and then end when the collector removes it.  Still
    there after the delete (being deleted): the launch fails, and is tried again."""
    name = body["metadata"]["name"]
    log.info("%s/%s: deleting batch Job %s of an earlier AgentJob", hop.namespace, hop.name, name)
    await workloads.delete_job(hop.namespace, name)
    existing, created = await workloads.create_job(hop.namespace, body)
    if existing is not None and not created and _earlier_incarnation(hop, existing):
        message = f"batch Job {name} of an earlier AgentJob {hop.name} is still being deleted"
        raise apierrors.Conflict(409, "Conflict", message)
    return existing, created


def _launched(hop: Hop, job_name: str, attempt: int, retry: str | None) -> AgentJobStatus:
    """The status of a launched attempt."""
    if retry is not None:
        message = f"{retry}: batch Job {job_name} created."
        return AgentJobStatus(
            phase="Pending",
            reason=Reason.RETRYING,
            message=message,
            job_name=job_name,
            attempt=attempt,
            pod_name=None,
        )
    status = AgentJobStatus(
        reason=Reason.JOB_CREATED,
        message=f"Batch Job {job_name} created.",
        job_name=job_name,
        attempt=attempt,
    )
    if hop.job.status.phase in (None, "Waiting"):
        status = statuswriting.merged(status, AgentJobStatus(phase="Pending"))
    return status


def _ready(hop: Hop) -> tuple[Condition, ...]:
    """``DependenciesReady`` for a job that had dependencies to wait for, ``AgentFound``
    for one that waited for its AiAgent."""
    ready: list[Condition] = []
    if hop.job.spec.depends_on:
        message = "Every job in dependsOn ended."
        ready.append(
            Condition(
                type=DEPENDENCIES_READY,
                status="True",
                reason=Reason.DEPENDENCIES_ENDED,
                message=message,
            )
        )
    if any(c.type == AGENT_FOUND for c in hop.job.status.conditions):
        message = f"AiAgent {hop.job.spec.agent_role!r} was created; the job was launched."
        ready.append(
            Condition(type=AGENT_FOUND, status="True", reason=Reason.AGENT_FOUND, message=message)
        )
    return tuple(ready)


async def _ensure_secret(
    hop: Hop, job: Obj, prompt: str, mounting: jobmounts.Mounting | None = None
) -> None:
    """Issue the job's token (the live one again on a replay or retry) into the Secret
    the batch Job ``job`` names, with the prompt.

    AlreadyExists means an earlier run created it (its name is random, recorded
    only in that Job).
    """
    secret = jobspec.secret_name_of(job)
    if secret is None:
        return  # Not a Job built by this version: it reads no Secret.
    chain_id = statuswriting.position(hop.obj, hop.rt.operator_keys).chain_id
    ttl = hop.rt.settings.job_token_ttl_seconds
    trust = storetrust.mark_of(hop.job.spec.event)  # Whose word its store entries are.
    token = await hop.rt.tokens.issue(hop.namespace, hop.name, hop.uid, chain_id, ttl, trust=trust)
    owner = statuswriting.owner_reference(hop.obj)
    data = jobspec.secret_data(prompt, token)
    data.update(await tokenminting.secret_data(hop.rt, hop.obj))  # GITHUB_TOKEN.
    data.update(await attaching.git_secret_data(hop, mounting))  # The clone's.
    await workloads.ensure_secret(hop.namespace, secret, data, owner)


async def _reuse(
    hop: Hop, existing: Obj, built: Obj, prompt: str, mounting: jobmounts.Mounting | None
) -> None:
    """A Job an earlier (crashed) run created: create the Secret it names (the one
    just created for ``built`` goes with the AgentJob, unused).  A Job that is not
    this AgentJob's (someone else's of that name) is left alone."""
    owners = [ref.get("uid") for ref in existing["metadata"].get("ownerReferences") or []]
    if hop.uid not in owners:
        return
    if jobspec.secret_name_of(existing) != jobspec.secret_name_of(built):
        await _ensure_secret(hop, existing, prompt, mounting)
