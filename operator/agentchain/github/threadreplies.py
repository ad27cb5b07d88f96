"""A follow-up round's answer posted as a reply in the review thread that started it, once.

Part of the continued chain's write-back (``posting.flush`` calls :func:`post_due`, which
lists the chain's rounds with it), so it runs off the chains' path and is retried and
rate-limited like the comment.  A round's reply is due when:

- the round's root AgentJob carries an event the operator vouches for (sealed) that
  continues this chain and names a review thread (``reply_to``: set by the webhook for a
  round started by a reply in that thread, ``web/hooks/followrounds.py``);
- the round's job has ended;
- nothing is recorded for it yet.

The reply says how the round ended and carries its answer (the hand-off section of its
output under its own agent's heading, ``spec.handoffHeading``, else the result, its end
kept), escaped like every write-back: a code block, or Markdown with
HTML escaped when the chain's root agent allows mentions.  It is posted with
``POST /repos/{o}/{r}/pulls/{n}/comments/{id}/replies`` under the chain's creation claim,
looked for first by its marker among the App's own review comments on the pull request
(a crash between posting and recording finds it), and its id is recorded in the chain's
record right after.  When tracing, the reply is a span under its round's job's span, in
the round's trace (``github reply``, ``traces/rules/githubwrites``), recorded before its
id is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from agentchain.core.rules import provenance
from agentchain.core.rules.outcomes import is_terminal
from agentchain.github import apps
from agentchain.github.appruntime import GitHubSide
from agentchain.github.githuberrors import GitHubError
from agentchain.github.githubrecords import ChainRecord
from agentchain.github.rules import followups, markdown
from agentchain.github.rules.githubscope import Scope, Target
from agentchain.models.agentjob import AgentJob, JobEvent
from agentchain.prompts.rules.assembly import extract_handoff
from agentchain.store import sealing
from agentchain.traces.rules import githubwrites
from agentchain.traces.rules.githubwrites import WriteBack

log = logging.getLogger(__name__)
Claim = Callable[[], AbstractAsyncContextManager[None]]
Obj = dict[str, Any]


def _due(
    side: GitHubSide, chain_id: str, objects: dict[str, Obj], record: ChainRecord
) -> list[tuple[str, AgentJob, JobEvent]]:
    """The chain's rounds whose reply is still to be posted: (job, its AgentJob, its
    vouched event)."""
    found = []
    for name, obj in objects.items():
        if name in record.replies:
            continue
        status = obj.get("status") or {}  # A job just created has none yet.
        job = AgentJob.model_validate({"spec": obj.get("spec") or {}, "status": status})
        vouched = sealing.vouched(side.rt.operator_keys, obj)
        event = provenance.trusted_event(job.spec.event, vouched)
        if event is None or event.continues != chain_id or event.reply_to is None:
            continue
        if event.number is None or not event.repository or not is_terminal(job.status):
            continue
        found.append((name, job, event))
    return found


def _answer(job: AgentJob, heading: str, allow_mentions: bool) -> str | None:
    """The round's hand-off section, else its result (its end), escaped for GitHub."""
    result = job.status.result
    if not result:
        return None
    text = (extract_handoff(result, heading) or result)[-followups.REPLY_MAX :]
    return markdown.markdown(text) if allow_mentions else markdown.code_block(text)


async def post_due(
    side: GitHubSide,
    namespace: str,
    chain_id: str,
    objects: dict[str, Obj],
    target: Target,
    record: ChainRecord,
    claim: Claim,
    *,
    headings: Mapping[str, str],
    heading: str,
    allow_mentions: bool,
    run: WriteBack | None = None,
) -> None:
    """Post every due reply of the chain's rounds; ``claim``: the chain's creation claim;
    ``headings``: each agent's hand-off heading by trigger name (``heading`` for one not
    there); ``run``: what the spans of the replies say of the write-back (None: not
    tracing)."""
    for name, job, event in _due(side, chain_id, objects, record):
        start = time.time_ns()
        # The round's answer is under its own agent's heading, not the first chain's.
        own = headings.get(job.spec.agent_role, heading)
        answer = _answer(job, own, allow_mentions)
        phase = job.status.phase or ""
        body = followups.reply_body(
            namespace, name, job.spec.agent_role, event.round or 0, phase, answer
        )
        async with claim():
            if name in (await side.records.get(namespace, chain_id)).replies:
                continue  # Another writer posted it meanwhile.
            marker = followups.reply_marker(namespace, name)
            found, action = await _post(side, target, event, marker, body)
            if run is not None:
                await _traced(side, run, (name, objects[name]), event, (action, start))
            await side.records.set_reply(namespace, chain_id, name, str(found))


async def _traced(
    side: GitHubSide,
    run: WriteBack,
    job: tuple[str, Obj],
    event: JobEvent,
    done: tuple[githubwrites.Action, int],
) -> None:
    """Record the reply's span under the round's job's span, in the round's trace: the
    round's end is what caused it."""
    (name, obj), (action, start) = job, done
    error = "refused by GitHub" if action == "refused" else None
    write = githubwrites.Write(
        "reply", action, start, time.time_ns(), apps.last_status(),
        event.repository or "", event.number, error,
    )  # fmt: skip
    chain = side.chain_of(obj) or run.chain_id
    await side.traced(run, lambda r: githubwrites.job_write_span(r, write, name, chain))


async def _post(
    side: GitHubSide, target: Target, event: JobEvent, marker: str, body: str
) -> tuple[int, githubwrites.Action]:
    """The reply's id, and how: found by its marker, else created; 0 when GitHub refuses
    it (the thread is gone, or takes no reply): recorded so, and not tried again."""
    assert event.repository and event.number is not None and event.reply_to is not None
    scope = Scope(target.scope.installation_id, event.repository, {"pull_requests": "write"})
    found = await side.app.find_reply(scope, event.number, marker)
    if found is not None:
        return found, "found"
    try:
        made = await side.app.create_reply(scope, event.number, event.reply_to, body)
    except GitHubError as exc:
        if exc.status not in (404, 422):
            raise
        log.warning("%s: no reply in review thread %d: %s", marker, event.reply_to, exc)
        return 0, "refused"
    log.info("Replied in review thread %d of %s#%d", event.reply_to, scope.repository, event.number)
    return made, "created"
