"""Flow-control routes of the job API: stop a job, stop a chain (admin token only).

A stop through the API writes the same annotations as ``kubectl annotate aj X
labrats.work/stop=true`` (with ``stopped-by: api`` and the body's reason), and answers
202: the engine (on the leader, which may be another replica) terminates the pod and
ends the job ``Cancelled``.  Writing the request into the AgentJob rather than acting
here keeps one path for every kind of stop, makes it durable before the answer, and
leaves the race with the job's natural end to the one place that decides it
(``hop/stopping.py``; ``flow/gating.py`` for a job not started yet).  A job that
had already ended is a 409 naming its phase.

Job tokens may not stop anything, not even their own job: an agent that wants to end
simply exits.  What a job token may do is report its usage
(``POST /api/jobs/{ns}/{name}/usage``, its own job only): added to its chain's usage in
Redis, shown on the job (``status.usage``) and in metrics, and checked against the
chain's budget at once, so a chain is stopped at the first report over it.  And it
may leave a progress note (``PUT /api/jobs/{ns}/{name}/progress``, its own job only,
at most ``NOTE_MAX_CHARS`` characters): kept as an annotation of its AgentJob, whose
change brings the chain's GitHub comment up to date like any other, where the write-back
shows it as escaped text (``github/rules/progress.py``).  And its runner hands over the
job's final answer (``PUT /api/jobs/{ns}/{name}/answer``, its own job only, once per
attempt, ``store/answers.py``): the attempt's output, taken by the capture instead of a
``pods/log`` read.  That route reads nothing from Kubernetes: the token proves the job's
uid, and the answer is kept in Redis under it.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from agentchain import metrics, models
from agentchain.core import statuswriting
from agentchain.core.rules.outcomes import is_terminal
from agentchain.flow import budgeting, stoprequests
from agentchain.flow.rules import approvals, budgets, stoprules
from agentchain.flow.usage import UsageStore
from agentchain.kube import resources
from agentchain.store.answers import ANSWER_MAX_BYTES, Answer, AnswerStore, HandedOver
from agentchain.web import auth
from agentchain.web.jobapi import reads
from agentchain.web.requests import read_json, validate
from agentchain.web.responses import ApiError, json_response
from agentchain.web.schemas import AnswerHandover, ProgressNoteRequest, StopRequest, UsageReport

Obj = dict[str, Any]
STOPPED_BY_API = "api"
# Who asks, when not the API itself: the dashboard's routes call these same handlers.
ACTOR_KEY: web.RequestKey[str] = web.RequestKey("agentchain.actor")


async def _request_of(request: web.Request) -> stoprules.StopRequest:
    """The stop the body asks for; an empty body is a stop without a reason."""
    body = await read_json(request) if request.can_read_body else {}
    parsed = validate(StopRequest, body)  # JSON null is no request: 422.
    by = request.get(ACTOR_KEY, STOPPED_BY_API)
    return stoprules.StopRequest(by=by, reason=stoprules.clean(parsed.reason))


async def stop_job(request: web.Request) -> web.Response:
    principal = auth.require_admin(auth.principal_of(request))
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    wanted = await _request_of(request)  # A bad body reads nothing.
    obj = await reads.load_job(principal, namespace, name)
    status = statuswriting.parse(obj).status
    if is_terminal(status):
        raise ApiError(409, "already ended", f"{name} ended {status.phase}.", phase=status.phase)
    if await stoprequests.request_stop(namespace, name, wanted) is None:
        raise ApiError(404, "job not found", f"No AgentJob {name} in namespace {namespace}.")
    return json_response({"id": name, "namespace": namespace, "stopping": True}, status=202)


async def stop_chain(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    principal = auth.require_admin(auth.principal_of(request))
    namespace, chain_id = request.match_info["namespace"], request.match_info["chain_id"]
    auth.require_namespace(principal, namespace)
    reads.check_namespace(namespace)
    wanted = await _request_of(request)  # A bad body reads nothing.
    jobs = await reads.chain_jobs(namespace, chain_id)
    if not jobs:
        raise ApiError(404, "chain not found", f"No chain {chain_id} in namespace {namespace}.")
    asked = await stoprequests.request_chain_stop(rt, namespace, chain_id, jobs, wanted)
    view = {"chainId": chain_id, "namespace": namespace, "stopping": sorted(asked)}
    return json_response(view, status=202)


async def _decide(request: web.Request, approved: bool) -> web.Response:
    """Approve or reject a job's start (admin token): the approval annotations."""
    principal = auth.require_admin(auth.principal_of(request))
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    wanted = await _request_of(request)  # A bad body reads nothing.
    obj = await reads.load_job(principal, namespace, name)
    status = statuswriting.parse(obj).status
    if is_terminal(status):
        raise ApiError(409, "already ended", f"{name} ended {status.phase}.", phase=status.phase)
    annotations = approvals.annotations_for(approved, wanted.by, wanted.reason)
    await resources.patch_metadata(
        namespace, resources.AGENTJOBS, name, labels={}, annotations=annotations
    )
    verdict = "approved" if approved else "rejected"
    return json_response({"id": name, "namespace": namespace, verdict: True}, status=202)


async def approve_job(request: web.Request) -> web.Response:
    return await _decide(request, approved=True)


async def reject_job(request: web.Request) -> web.Response:
    return await _decide(request, approved=False)


async def report_usage(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    scope = auth.require_job(auth.principal_of(request), namespace, name)
    report = validate(UsageReport, await read_json(request))
    obj = await reads.load_job(auth.principal_of(request), namespace, name)
    counted, _ = await budgeting.counted_in(rt, obj)  # A round: the chain it continues.
    reported = await UsageStore(rt.redis).report(
        namespace,
        counted,
        name,
        report.tokens,
        report.cost,
        budgeting.agent_of(obj),
        turns=report.turns,
        split=(report.input_tokens, report.output_tokens),
    )
    usage = reported.usage.chain
    budget = await budgeting.budget_of(rt, obj)
    job_usage: dict[str, float] = {"tokens": reported.job_tokens, "cost": reported.job_cost}
    if reported.job_turns:  # Only a runtime that counts turns shows them.
        job_usage["turns"] = reported.job_turns
    if reported.job_input_tokens or reported.job_output_tokens:  # Only a runtime that splits.
        job_usage["inputTokens"] = reported.job_input_tokens
        job_usage["outputTokens"] = reported.job_output_tokens
    await resources.patch_status(namespace, resources.AGENTJOBS, name, {"usage": job_usage})
    role = obj["spec"]["agentRole"]
    metrics.USAGE_TOKENS.labels(namespace, role).inc(report.tokens)
    currency = budget.currency if budget is not None else "USD"
    metrics.USAGE_COST.labels(namespace, role, currency).inc(report.cost)
    limits = await budgeting.limits_of(rt, obj, reported.usage)
    why = budgets.breached(limits, time.time())
    if why is not None:
        await budgeting.stop_chain(rt, namespace, scope.chain_id, why)
    chain = {"tokens": usage.tokens, "cost": usage.cost, "attempts": usage.attempts}
    body = {"job": job_usage, "chain": chain, "currency": currency, "budgetExceeded": why}
    return json_response(body)


async def put_progress_note(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    auth.require_job(auth.principal_of(request), namespace, name)
    note = validate(ProgressNoteRequest, await read_json(request)).note
    annotations = {models.PROGRESS_NOTE: note}
    patched = await resources.patch_metadata(
        namespace, resources.AGENTJOBS, name, labels={}, annotations=annotations
    )
    if patched is None:
        raise ApiError(404, "job not found", f"No AgentJob {name} in namespace {namespace}.")
    return json_response({"id": name, "namespace": namespace, "note": note})


async def hand_over_answer(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    scope = auth.require_job(auth.principal_of(request), namespace, name)
    body = validate(AnswerHandover, await read_json(request))
    size = len(body.answer.encode("utf-8"))
    if size > ANSWER_MAX_BYTES:
        raise ApiError(
            413,
            "answer too large",
            f"Send at most the last {ANSWER_MAX_BYTES} bytes, with truncated and size.",
            limit=ANSWER_MAX_BYTES,
        )
    captured = await rt.outputs.get_capture(namespace, name, scope.uid)
    if captured is not None and captured.attempt >= body.attempt:
        # Its end was decided from the log already: an answer now would change nothing.
        raise ApiError(
            409, "already captured", f"Attempt {captured.attempt}'s output was captured."
        )
    answer = Answer(body.attempt, body.answer, body.size or size)
    done = await AnswerStore(rt.redis).hand_over(namespace, name, scope.uid, answer)
    if done is HandedOver.REFUSED:
        raise ApiError(
            409,
            "answer already handed over",
            "A different answer for this attempt, or one for a later attempt, was handed over.",
        )
    view = {
        "id": name,
        "namespace": namespace,
        "attempt": body.attempt,
        "size": answer.full_size,
        "truncated": answer.full_size > size,
        "stored": done is HandedOver.STORED,
    }
    return json_response(view)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/api/jobs/{namespace}/{name}/stop", stop_job)
    app.router.add_post("/api/chains/{namespace}/{chain_id}/stop", stop_chain)
    app.router.add_post("/api/jobs/{namespace}/{name}/usage", report_usage)
    app.router.add_put("/api/jobs/{namespace}/{name}/progress", put_progress_note)
    app.router.add_put("/api/jobs/{namespace}/{name}/answer", hand_over_answer)
    app.router.add_post("/api/jobs/{namespace}/{name}/approve", approve_job)
    app.router.add_post("/api/jobs/{namespace}/{name}/reject", reject_job)
