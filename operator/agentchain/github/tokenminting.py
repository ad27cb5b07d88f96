"""A GitHub installation token per job: minted at launch, refreshed on request, revoked
at the end.

**Launch** (:func:`secret_data`, one call in ``launching._ensure_secret``): for a job
whose AiAgent declares ``github.permissions``, the scope is fixed from recorded facts
(``github/rules/githubscope.job_scope``: the event's installation and repository, the declared
permissions) and stored with the job's uid; a token is minted for exactly that scope and
goes into the job's Secret as ``github-token`` (the pod's ``GITHUB_TOKEN``).  A replay
of the launch gets the same live token again (the Secret it makes is the same).  When
no token can be had (no App configured, the job has no GitHub event, the App is not
installed there or lacks a permission) the job still runs, without the variable, and a
Warning Event ``GitHubTokenUnavailable`` on the AgentJob says why.

**Refresh** (:func:`refresh`, ``POST /api/github/token`` with the job token): a new
token for the scope recorded at launch, never one from the request; an agent cannot
widen it, and another job's token cannot ask for it: the scope is looked up by the
caller's own job and uid (the uid its job token proves), and sealed with the operator
key over all three (``github/githubrecords.py``), so neither an AgentJob created again under
the same name nor whoever can write Redis refreshes a scope that is not theirs.
At most :data:`MAX_TOKENS_PER_JOB` per job, so a looping
agent cannot spend the App's rate limit on tokens.

**End** (:func:`revoke`, from the write-back worker when the job's phase is terminal or
it is deleted): every token recorded for the job is taken from Redis and revoked at
GitHub, and the incarnation's scope record is dropped.  A refresh racing the end
re-checks that its caller's job token is still alive after recording the new token,
and revokes it itself if not.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from agentchain import metrics
from agentchain.core.rules import provenance
from agentchain.core.runtime import Runtime
from agentchain.github.appruntime import GitHubSide, side_of
from agentchain.github.apps import Minted
from agentchain.github.githuberrors import GitHubError
from agentchain.github.rules.githubscope import TOKEN_SECRET_KEY, NoScope, Scope, job_scope
from agentchain.kube import events
from agentchain.models.agentjob import AgentJob
from agentchain.models.aiagent import AiAgent
from agentchain.store import sealing

log = logging.getLogger(__name__)
Obj = dict[str, Any]
REASON_UNAVAILABLE = "GitHubTokenUnavailable"
NO_APP = "the operator has no GitHub App configured (docs/github.md)"
MAX_TOKENS_PER_JOB = 24
"""Tokens minted for one job over its life (an hour each): refreshes past it are 429."""


@dataclass(frozen=True)
class Refused(Exception):
    """No token for this caller; ``status`` is the HTTP answer."""

    status: int
    message: str


async def secret_data(rt: Runtime, obj: Obj) -> dict[str, str]:
    """The job Secret's GitHub entry: ``{github-token: <token>}``, or nothing."""
    meta = obj["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    job = AgentJob.model_validate({"spec": obj.get("spec") or {}})
    agent = await rt.agents.by_trigger(namespace, job.spec.agent_role)
    access = agent.spec.github if isinstance(agent, AiAgent) else None
    event = provenance.trusted_event(job.spec.event, sealing.vouched(rt.operator_keys, obj))
    scope = job_scope(access, event)
    if scope is None:
        return {}
    side = side_of(rt)
    if side is None:
        scope = NoScope(NO_APP)
    if isinstance(scope, NoScope):
        await _unavailable(obj, scope.reason, "NoScope")
        return {}
    assert side is not None
    try:
        token = await _token(side, namespace, name, str(meta.get("uid")), scope)
    except GitHubError as exc:
        await _unavailable(obj, f"{exc.reason}: {exc}", exc.reason)
        return {}
    except RedisError as exc:
        await _unavailable(obj, f"Redis: {exc}", "Redis")
        return {}
    return {TOKEN_SECRET_KEY: token}


async def _token(side: GitHubSide, namespace: str, name: str, uid: str, scope: Scope) -> str:
    live = await side.tokens.live(namespace, name)
    recorded = await side.tokens.scope(namespace, name, uid)
    if live is not None and recorded is not None:
        metrics.GITHUB_JOB_TOKENS.labels("reused").inc()
        return live
    await side.tokens.set_scope(namespace, name, uid, scope.to_record())
    minted = await _mint(side, namespace, name, scope)
    metrics.GITHUB_JOB_TOKENS.labels("minted").inc()
    return minted.token


async def _mint(side: GitHubSide, namespace: str, name: str, scope: Scope) -> Minted:
    try:
        minted = await side.app.mint(scope)
    except GitHubError:
        metrics.GITHUB_JOB_TOKENS.labels("failed").inc()
        raise
    await side.tokens.record(namespace, name, minted.token, minted.expires_at.timestamp())
    return minted


async def _unavailable(obj: Obj, reason: str, code: str) -> None:
    metrics.GITHUB_JOB_TOKENS.labels("refused").inc()
    message = f"The job runs without GITHUB_TOKEN: {reason}"
    log.warning("%s/%s: %s", obj["metadata"]["namespace"], obj["metadata"]["name"], message)
    try:
        await events.emit(obj, "Warning", REASON_UNAVAILABLE, message, key=f"github-token:{code}")
    except Exception as exc:  # The Event is best effort; the job must start anyway.
        log.warning("could not emit %s: %r", REASON_UNAVAILABLE, exc)


def _recorded_scope(record: dict[str, Any]) -> Scope:
    return Scope(
        int(record["installation"]),
        str(record["repository"]),
        {str(k): str(v) for k, v in dict(record["permissions"]).items()},
    )


async def refresh(rt: Runtime, namespace: str, name: str, uid: str) -> Minted:
    """A fresh token with the scope recorded at the launch of incarnation ``uid`` of the
    job; raises Refused."""
    side = side_of(rt)
    if side is None:
        raise Refused(404, NO_APP)
    record = await side.tokens.scope(namespace, name, uid)
    if record is None:
        raise Refused(404, "This job has no GitHub token: its AiAgent declares no permissions.")
    if await side.tokens.count(namespace, name) >= MAX_TOKENS_PER_JOB:
        # Each token lives an hour: a job needs one an hour, not one per request.
        message = f"This job already has {MAX_TOKENS_PER_JOB} GitHub tokens; use the last one."
        raise Refused(429, message)
    minted = await _mint(side, namespace, name, _recorded_scope(record))
    metrics.GITHUB_JOB_TOKENS.labels("refreshed").inc()
    return minted


async def revoke(side: GitHubSide, namespace: str, name: str, uid: str | None = None) -> None:
    """Revoke every token minted for the job (best effort: each lives an hour at most);
    with ``uid``, that incarnation's scope goes too, so nothing refreshes it any more."""
    try:
        tokens = await side.tokens.take(namespace, name)
        if uid:
            await side.tokens.drop_scope(namespace, name, uid)
    except RedisError as exc:
        log.warning("GitHub tokens of %s/%s not revoked: %r", namespace, name, exc)
        return
    for token in tokens:
        try:
            await side.app.revoke(token)
            metrics.GITHUB_JOB_TOKENS.labels("revoked").inc()
        except GitHubError as exc:
            log.warning("a GitHub token of %s/%s not revoked: %s", namespace, name, exc)


async def scope_record(rt: Runtime, namespace: str, name: str, uid: str) -> dict[str, Any]:
    """The job's recorded scope (repository, permissions), {} when it has none."""
    side = side_of(rt)
    record = await side.tokens.scope(namespace, name, uid) if side is not None else None
    return record or {}
