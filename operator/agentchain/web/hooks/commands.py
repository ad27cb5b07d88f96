"""Comment commands: ``/agentchain stop|retry|approve|reject`` on an issue or PR.

An ``issue_comment`` delivery (already authenticated by its signature) whose body
starts with a command acts on the AgentJobs of that issue (same repository and
number in their event), in the namespaces the operator serves, as the agents allow:

* ``approve`` / ``reject``: jobs in ``AwaitingApproval`` whose agent's ``approval``
  lets the commenter approve (its ``approvers`` by login, its ``associations``, or
  their permission on the repository, ``repositoryPermission``: write by default, asked
  of GitHub once per command; without an App only the OWNER); written as the approval
  annotations, ``approval-by: github:<login>``;
* ``stop``: jobs not ended, when the job's agent's sender policy admits the
  commenter; written as the stop annotations (``stopped-by: github:<login>``);
* ``retry``: the failed step of the issue's latest chain (its newest root job's chain,
  complete, with a Failed job) runs again as a new chain starting at that step, with
  the same event, prompt and ``<chain-context>``, when the step's agent's sender
  policy admits the commenter; named from the failed job and the comment, so a
  redelivered comment retries once.

Anything else changes nothing: a stranger's command, a bot's, a command with no job
to act on.  Who commented is checked first, against every agent of a namespace: when
none could let them act, nothing is listed there.  Otherwise the issue's jobs are
listed by their ``labrats.work/github-issue`` label (stamped at creation from the
event, ``chains.issue_labels``), a page at a time, and each is judged by its agent.
A command acts at most once per comment (the webhook claims the comment id first).
Every command is one log line and counted
(``agentchain_comment_commands_total{verb, result}``); the answer to the delivery says
what was done.  What GitHub is told (a reaction, maybe a reply; nothing for a refused
sender) is decided by ``github/rules/replies.py`` and sent by
``github/commandreplies.py`` after this, off the webhook's path, when the operator is
a GitHub App; otherwise the answer's ``reply`` says there is none
(:data:`NO_REPLY`).  A refusal because of who commented carries ``"sender": True``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentchain import metrics, models
from agentchain.aiagents.rules import senderpolicy
from agentchain.core.rules import naming
from agentchain.core.rules.outcomes import is_terminal
from agentchain.flow import stoprequests
from agentchain.flow.rules import approvals, stoprules
from agentchain.github.rules import matching
from agentchain.hop.rules import chains
from agentchain.kube import apierrors, resources
from agentchain.models.agentjob import AgentJob, AgentJobSpec
from agentchain.models.aiagent import AiAgentSpec, Approval, SenderPolicy
from agentchain.store import sealing
from agentchain.store.signing import OperatorKeys
from agentchain.web.jobapi import bodies

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NO_REPLY = "no reply on GitHub: GitHub write-back is not configured"
NO_REPLY_AGAIN = "no reply on GitHub: this comment's command already acted"
DUPLICATE = "duplicate"
UNAPPLIED = "unavailable"
# An issue's AgentJobs are listed a page at a time, at most this many pages.
PAGE_SIZE = 100
MAX_PAGES = 50
RETRY_OF = models.RETRY_OF
"""On a job ``/agentchain retry`` created: the failed job it runs again (its trace's
root span names the command: ``hop/tracing.root``)."""


PermissionLookup = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True)
class Commenter:
    """Who commented, as the policies judge them."""

    login: str
    association: str
    bot: bool
    permission: str | None
    """On the repository, as GitHub said (None: not asked, or not known)."""

    @property
    def name(self) -> str:
        return self.login or "unknown"

    def may_approve(self, approval: Approval) -> bool:
        if self.bot:
            return False
        return approvals.may_approve(approval, self.login, self.association, self.permission)

    def refusal(self, policy: SenderPolicy) -> str | None:
        return senderpolicy.association_refusal(policy, self.association, self.login, bot=self.bot)


def _text(payload: Mapping[str, Any], *path: str) -> str:
    value: Any = payload
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, str) else ""


def commenter_login(payload: Mapping[str, Any]) -> str:
    """Who sent the comment ("" when the delivery does not say)."""
    return _text(payload, "sender", "login") or _text(payload, "comment", "user", "login")


def parse(event: str, payload: Mapping[str, Any]) -> tuple[approvals.Verb, int] | None:
    """The delivery's command verb and its comment's id; None: no command to apply.

    A comment without GitHub's numeric id is no command: the id is what makes a command
    act at most once (``githubrecords.claim_command``).
    """
    if event != "issue_comment" or payload.get("action") != "created":
        return None
    command = approvals.parse_command(_text(payload, "comment", "body"))
    comment = payload.get("comment")
    comment_id = comment.get("id") if isinstance(comment, Mapping) else None
    if command is None or not isinstance(comment_id, int) or isinstance(comment_id, bool):
        return None
    return command.verb, comment_id


def duplicate(verb: str, why: str) -> Obj:
    """The answer for a command that does not act again (its comment already acted)."""
    metrics.COMMENT_COMMANDS.labels(verb, DUPLICATE).inc()
    return {"command": verb, "result": DUPLICATE, "why": why, "jobs": [], "reply": NO_REPLY_AGAIN}


def unapplied(verb: str, why: str) -> Obj:
    """The answer for a command that could not be claimed, so did not act."""
    metrics.COMMENT_COMMANDS.labels(verb, UNAPPLIED).inc()
    return {"command": verb, "result": UNAPPLIED, "why": why, "jobs": [], "reply": NO_REPLY}


async def handle(
    event: str,
    payload: Mapping[str, Any],
    agents: Mapping[str, Sequence[Any]],
    keys: OperatorKeys,
    permission_of: PermissionLookup | None = None,
) -> Obj | None:
    """Apply the delivery's comment command, if it is one; what was done, for the answer.

    The issue's jobs are those whose event the operator vouches for (``keys``: its
    seals, ``core.rules.provenance``): a hand-made AgentJob naming the issue is none of them.

    The caller has claimed the comment (``parse``, then ``githubrecords.claim_command``).
    ``permission_of`` asks GitHub for the commenter's permission on the repository
    (``github/collaborators.py``); it is called at most once, only for an approval that
    the approvers and associations do not already decide.  None: it is not known.
    """
    if event != "issue_comment" or payload.get("action") != "created":
        return None
    command = approvals.parse_command(_text(payload, "comment", "body"))
    if command is None:
        return None
    login = commenter_login(payload)
    association = matching.sender_association(event, payload)
    bot = _text(payload, "sender", "type") == "Bot" or login.endswith("[bot]")
    issue = payload.get("issue") if isinstance(payload.get("issue"), Mapping) else {}
    number = issue.get("number") if isinstance(issue, Mapping) else None
    repository = _text(payload, "repository", "full_name")
    results: list[Obj] = []
    comment_id = str((payload.get("comment") or {}).get("id") or "")
    permission = None
    if command.verb in ("approve", "reject") and not bot and permission_of is not None:
        gates = [c.spec.approval for cs in agents.values() for c in cs if c.spec.approval]
        if any(approvals.needs_permission(g, login, association) for g in gates):
            permission = await permission_of()
    who = Commenter(login, association, bot, permission)
    for namespace in sorted(agents):
        specs = {c.spec.trigger_name: c.spec for c in agents[namespace]}
        # Who commented is checked before anything is listed: a stranger's command costs
        # no API server call.  Each job is judged again below, by its own agent.
        refusal = _sender_refusal(command, specs.values(), who)
        if refusal is not None:
            refused = {"namespace": namespace, "result": "refused", "why": refusal}
            results.append({**refused, "sender": True})
            continue
        listed = await _jobs_of(namespace, repository, number)
        jobs = [o for o in listed if sealing.vouched(keys, o)]
        if command.verb == "retry":
            retried = await _retry(keys, namespace, jobs, specs, who, comment_id)
            results.extend([{"namespace": namespace, **retried}] if retried else [])
            continue
        for obj in jobs:
            job = AgentJob.model_validate({"spec": obj["spec"], "status": obj.get("status") or {}})
            spec = specs.get(job.spec.agent_role)
            verdict = await _apply(command, namespace, obj, job, spec, who)
            results.append({"namespace": namespace, "job": obj["metadata"]["name"], **verdict})
    done = [r for r in results if r["result"] not in ("refused", "ignored")]
    outcome = "applied" if done else ("refused" if results else "no_job")
    metrics.COMMENT_COMMANDS.labels(command.verb, outcome).inc()
    log.info(
        "comment command /agentchain %s by %s (%s) on %s#%s: %s",
        command.verb,
        login or "unknown",
        association,
        repository,
        number,
        outcome,
    )
    return {"command": command.verb, "result": outcome, "jobs": results, "reply": NO_REPLY}


def _sender_refusal(
    command: approvals.Command, specs: Iterable[AiAgentSpec], who: Commenter
) -> str | None:
    """Why no job in a namespace could let this commenter act (None: some job might).

    Approving needs an agent with an approval gate that lets the commenter approve; stop
    and retry need a sender policy that admits them, the default one counting too (a job
    whose agent is gone is judged by it).
    """
    if command.verb in ("approve", "reject"):
        gates = [s.approval for s in specs if s.approval is not None]
        if any(who.may_approve(g) for g in gates):
            return None
        return f"{who.name} may not approve any job here"
    policies = [s.sender_policy or SenderPolicy() for s in specs] + [SenderPolicy()]
    refusals = [who.refusal(p) for p in policies]
    if any(r is None for r in refusals):
        return None
    return refusals[0] or f"{who.name} may not {command.verb} any job here"


async def _jobs_of(namespace: str, repository: str, number: object) -> list[Obj]:
    """The AgentJobs of that issue in ``namespace``: selected by its label, page by page.

    The label narrows the listing; the event in each job's spec decides.
    """
    if not repository or not isinstance(number, int) or isinstance(number, bool):
        return []
    selector = f"{models.GITHUB_ISSUE}={naming.issue_label(repository, number)}"
    items: list[Obj] = []
    token: str | None = None
    try:
        for _ in range(MAX_PAGES):
            page, token = await resources.list_objects(
                namespace,
                resources.AGENTJOBS,
                label_selector=selector,
                limit=PAGE_SIZE,
                continue_token=token,
            )
            items.extend(page)
            if token is None:
                break
        else:
            log.warning("comment command: more than %d AgentJobs of one issue", len(items))
    except apierrors.KubeError as exc:
        log.warning("comment command: listing AgentJobs in %s failed: %s", namespace, exc)
        return []
    return [
        o
        for o in items
        if ((o.get("spec") or {}).get("event") or {}).get("repository") == repository
        and ((o.get("spec") or {}).get("event") or {}).get("number") == number
    ]


async def _apply(
    command: approvals.Command,
    namespace: str,
    obj: Obj,
    job: AgentJob,
    spec: AiAgentSpec | None,
    who: Commenter,
) -> Obj:
    name = obj["metadata"]["name"]
    if is_terminal(job.status):
        return {"result": "ignored", "why": f"it ended {job.status.phase}"}
    by = f"github:{who.name}"
    if command.verb in ("approve", "reject"):
        approval = spec.approval if spec is not None else None
        if job.status.phase != "AwaitingApproval" or approval is None:
            return {"result": "ignored", "why": "it awaits no approval"}
        if not who.may_approve(approval):
            return {"result": "refused", "why": f"{who.name} may not approve it", "sender": True}
        annotations = approvals.annotations_for(command.verb == "approve", by, command.reason)
        await resources.patch_metadata(
            namespace, resources.AGENTJOBS, name, labels={}, annotations=annotations
        )
        return {"result": "approved" if command.verb == "approve" else "rejected"}
    if command.verb == "stop":
        policy = (spec.sender_policy if spec is not None else None) or SenderPolicy()
        refusal = who.refusal(policy)
        if refusal is not None:
            return {"result": "refused", "why": refusal, "sender": True}
        await stoprequests.request_stop(namespace, name, stoprules.StopRequest(by, command.reason))
        return {"result": "stopping"}
    return {"result": "ignored", "why": "no such command"}


def _status(obj: Obj) -> Obj:
    return dict(obj.get("status") or {})


async def _retry(
    keys: OperatorKeys,
    namespace: str,
    jobs: list[Obj],
    specs: Mapping[str, AiAgentSpec],
    who: Commenter,
    comment_id: str,
) -> Obj | None:
    """Run the failed step of the latest chain again, as a new chain; None: no chain here."""
    roots = [o for o in jobs if _status(o).get("chainDepth") == 0 and _status(o).get("chainId")]
    if not roots:
        return None
    latest = max(roots, key=lambda o: str(o["metadata"].get("creationTimestamp") or ""))
    chain = _status(latest)["chainId"]
    members = [o for o in jobs if _status(o).get("chainId") == chain]
    if not any(_status(o).get("chainComplete") for o in members):
        return {"job": latest["metadata"]["name"], "result": "refused", "why": "its chain runs"}
    failed = [o for o in members if _status(o).get("phase") == "Failed"]
    if not failed:
        return {"job": latest["metadata"]["name"], "result": "ignored", "why": "nothing failed"}
    step = max(failed, key=lambda o: int(_status(o).get("chainDepth") or 0))
    spec = AgentJob.model_validate({"spec": step["spec"]}).spec
    agent = specs.get(spec.agent_role)
    policy = (agent.sender_policy if agent is not None else None) or SenderPolicy()
    refusal = who.refusal(policy)
    if refusal is not None:
        return {
            "job": step["metadata"]["name"],
            "result": "refused",
            "why": refusal,
            "sender": True,
        }
    created = await _rerun(keys, namespace, step, spec, comment_id)
    return {"job": step["metadata"]["name"], "result": "retried", "retry": created}


async def _rerun(
    keys: OperatorKeys, namespace: str, step: Obj, spec: AgentJobSpec, comment_id: str
) -> str:
    seed = f"retry/{step['metadata']['name']}/{comment_id}"
    name = naming.root_job_name(spec.agent_role, seed)
    position = chains.root_position(naming.chain_id_for(f"{namespace}/{seed}"), spec.agent_role)
    body = bodies.agentjob_body(namespace, name, spec, position, None)
    body["metadata"]["annotations"][RETRY_OF] = step["metadata"]["name"]
    # The step's event was vouched for (only such jobs are listed): the retry's is too.
    await resources.create(namespace, resources.AGENTJOBS, sealing.seal_job(keys, body))
    return name
