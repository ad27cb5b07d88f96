"""``PUT /api/jobs/{ns}/{name}/review``: a reviewer job sends its pull request review.

The route of the ``review`` MCP tool (``runtimes/inpod/mcpserving.py``), and the way
besides an ``agentchain-review`` block at the end of its output.  The body is the block's
JSON object (``verdict``; ``body``; ``comments`` with ``path``, ``line``, ``side``,
``start_line``), checked now by the block's own rules (``github/rules/reviews.py``), so
the agent hears at once what is wrong with it.  Nothing is posted here: the review is
kept on the job's AgentJob, and posted by the chain's write-back when the job succeeds,
once, exactly like a block (``github/reviewing.py``), and only for an agent that opted
in (``spec.github.review``).  Sent again, it replaces the one before; sent, it counts
over a block.

Only the job's own token may send, for its own job, while it runs: an admin's or another
job's is refused.  The kept value is sealed by the operator for this job (its namespace,
name and the uid its token proves), so neither someone who can edit AgentJobs nor a job
with another's name gets a review posted: a value the operator did not seal is ignored.
The review is the agent's text, posted as every write-back is (escaped; no pings unless
the chain's root agent allows them): the tool gives the job no authority its output
did not already have.

Answers: 200 ``{id, namespace, verdict, comments}``; 403 for any token but the job's;
404 when the job is gone (or is another incarnation); 409 once it has ended; 413 over
``reviews.MAX_BLOCK_CHARS`` characters; 422 with the reason when it is not a review.
"""

from __future__ import annotations

import json

from aiohttp import web

from agentchain import models
from agentchain.core import statuswriting
from agentchain.core.rules.outcomes import is_terminal
from agentchain.github import reviewing
from agentchain.github.rules import reviews
from agentchain.kube import resources
from agentchain.web import auth
from agentchain.web.jobapi import reads
from agentchain.web.requests import read_json
from agentchain.web.responses import ApiError, json_response

PATH = "/api/jobs/{namespace}/{name}/review"


async def put_review(request: web.Request) -> web.Response:
    rt = request.app[reads.RUNTIME_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    principal = auth.principal_of(request)
    scope = auth.require_job(principal, namespace, name)
    text = json.dumps(await read_json(request), ensure_ascii=False, separators=(",", ":"))
    if len(text) > reviews.MAX_BLOCK_CHARS:
        limit = reviews.MAX_BLOCK_CHARS
        raise ApiError(413, "review too large", f"At most {limit} characters.", limit=limit)
    review = reviews.parse_sent(text)
    if isinstance(review, reviews.Malformed):
        raise ApiError(422, "not a review", f"Not a review: {review.reason}.")
    obj = await reads.load_job(principal, namespace, name)
    if reads.uid_of(obj) != scope.uid:
        raise ApiError(404, "job not found", f"No AgentJob {name} in namespace {namespace}.")
    status = statuswriting.parse(obj).status
    if is_terminal(status):
        raise ApiError(409, "job ended", f"The job has ended ({status.phase}): nothing is posted.")
    kept = {models.REVIEW: reviewing.seal_sent(rt.operator_keys, obj, text)}
    patched = await resources.patch_metadata(
        namespace, resources.AGENTJOBS, name, labels={}, annotations=kept
    )
    if patched is None:
        raise ApiError(404, "job not found", f"No AgentJob {name} in namespace {namespace}.")
    answer = {"verdict": review.verdict, "comments": len(review.comments)}
    return json_response({"id": name, "namespace": namespace, **answer})


def add_routes(app: web.Application) -> None:
    app.router.add_put(PATH, put_review)
