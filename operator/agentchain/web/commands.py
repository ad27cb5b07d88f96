"""Comment commands: ``/agentchain stop|retry|approve|reject`` on an issue or PR.

An ``issue_comment`` delivery (already authenticated by its signature) whose body
starts with a command acts on the AgentJobs of that issue (same repository and
number in their event), in the namespaces the operator serves, as the agents allow:

* ``approve`` / ``reject``: jobs in ``AwaitingApproval`` whose agent's ``approval``
  lets the commenter approve (its ``approvers`` by login, or its ``associations``);
  written as the approval annotations, ``approval-by: github:<login>``;
* ``stop``: jobs not ended, when the job's agent's sender policy admits the
  commenter; written as the stop annotations (``stopped-by: github:<login>``);
* ``retry``: not supported yet, refused with that reason.

Anything else changes nothing: a stranger's command, a bot's, a command with no job
to act on.  Every command is one log line and counted
(``agentchain_comment_commands_total{verb, result}``); the answer to the delivery says
what was done.  There is no reply or reaction on GitHub: this operator has no GitHub
write-back, and the log line says so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from agentchain import metrics
from agentchain.engine import stoprequests
from agentchain.kube import errors, resources
from agentchain.models.agentjob import AgentJob
from agentchain.models.aiagent import AiAgentSpec, SenderPolicy
from agentchain.policy import approvals, matching, stops
from agentchain.policy.outcomes import is_terminal

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NO_REPLY = "no reply on GitHub: GitHub write-back is not configured"


def _text(payload: Mapping[str, Any], *path: str) -> str:
    value: Any = payload
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, str) else ""


async def handle(
    event: str, payload: Mapping[str, Any], agents: Mapping[str, Sequence[Any]]
) -> Obj | None:
    """Apply the delivery's comment command, if it is one; what was done, for the answer."""
    if event != "issue_comment" or payload.get("action") != "created":
        return None
    command = approvals.parse_command(_text(payload, "comment", "body"))
    if command is None:
        return None
    login = _text(payload, "sender", "login") or _text(payload, "comment", "user", "login")
    association = matching.sender_association(event, payload)
    bot = _text(payload, "sender", "type") == "Bot" or login.endswith("[bot]")
    issue = payload.get("issue") if isinstance(payload.get("issue"), Mapping) else {}
    number = issue.get("number") if isinstance(issue, Mapping) else None
    repository = _text(payload, "repository", "full_name")
    results: list[Obj] = []
    for namespace in sorted(agents):
        specs = {c.spec.trigger_name: c.spec for c in agents[namespace]}
        for obj in await _jobs_of(namespace, repository, number):
            job = AgentJob.model_validate({"spec": obj["spec"], "status": obj.get("status") or {}})
            spec = specs.get(job.spec.agent_role)
            verdict = await _apply(command, namespace, obj, job, spec, login, association, bot)
            results.append({"namespace": namespace, "job": obj["metadata"]["name"], **verdict})
    done = [r for r in results if r["result"] not in ("refused", "ignored")]
    outcome = "applied" if done else ("refused" if results else "no_job")
    metrics.COMMENT_COMMANDS.labels(command.verb, outcome).inc()
    log.info(
        "comment command /agentchain %s by %s (%s) on %s#%s: %s; %s",
        command.verb,
        login or "unknown",
        association,
        repository,
        number,
        outcome,
        NO_REPLY,
    )
    return {"command": command.verb, "result": outcome, "jobs": results, "reply": NO_REPLY}


async def _jobs_of(namespace: str, repository: str, number: object) -> list[Obj]:
    """The AgentJobs of that issue in ``namespace``."""
    if not repository or not isinstance(number, int):
        return []
    try:
        items, _ = await resources.list_objects(namespace, resources.AGENTJOBS)
    except errors.KubeError as exc:
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
    login: str,
    association: str,
    bot: bool,
) -> Obj:
    name = obj["metadata"]["name"]
    if is_terminal(job.status):
        return {"result": "ignored", "why": f"it ended {job.status.phase}"}
    by = f"github:{login or 'unknown'}"
    if command.verb in ("approve", "reject"):
        approval = spec.approval if spec is not None else None
        if job.status.phase != "AwaitingApproval" or approval is None:
            return {"result": "ignored", "why": "it awaits no approval"}
        if bot or not approvals.may_approve(approval, login, association):
            return {"result": "refused", "why": f"{login or 'unknown'} may not approve it"}
        annotations = approvals.annotations_for(command.verb == "approve", by, command.reason)
        await resources.patch_metadata(
            namespace, resources.AGENTJOBS, name, labels={}, annotations=annotations
        )
        return {"result": "approved" if command.verb == "approve" else "rejected"}
    if command.verb == "stop":
        policy = (spec.sender_policy if spec is not None else None) or SenderPolicy()
        refusal = matching.association_refusal(policy, association, login, bot=bot)
        if refusal is not None:
            return {"result": "refused", "why": refusal}
        await stoprequests.request_stop(namespace, name, stops.StopRequest(by, command.reason))
        return {"result": "stopping"}
    return {"result": "refused", "why": "/agentchain retry is not supported yet"}
