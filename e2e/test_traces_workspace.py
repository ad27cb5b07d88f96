"""A workspace chain's GitHub write-back in its traces, received by a real OpenTelemetry
Collector (``e2e/collecting``), on the real control plane with the GitHub stand-in and
its git server (docs/observability.md).

Aspects covered:
* a chain that opens a pull request (the developer's workspace, published at the chain's
  end) and whose reviewer (``spec.github.review: true``) posts a review is one trace, a
  whole tree: the start of its publish Job (``agentjob <agent> publish``, naming the Job,
  the repository and that it is the chain's final one) under the span of the job whose
  hop completed the chain, the Job's run (``publish <outcome>``) under that, and the
  review (``github review``, ``created``, the pull request's number, never its text)
  under the reviewer's job's span;
* a reply in the pull request's review thread starts a round, a chain of its own and so
  a trace of its own, a whole tree: the round's push to the same branch
  (``agentjob <agent> publish``) and its answer posted in the thread (``github reply``,
  the pull request's number) are spans under the round's job's span there.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import chaining, collecting, operating
from e2e.collecting import attrs
from e2e.controlplane.cluster import ClusterInfo
from e2e.github.gitserver import GitServer
from e2e.githubloop import REPOSITORY, Installed, app_delivery, app_operator
from e2e.test_github_followups import DEVELOPER, deliver, replies_to, thread_comment
from e2e.test_github_followups import repo as repo  # The fixture: a fresh repository.
from e2e.test_github_reviews import REVIEWER
from e2e.test_workspaces import workspace_env

Obj = dict[str, Any]
# A workspace chain clones, runs and publishes in containers: on a loaded machine one
# took 49 s to its pull request (test_github_followups.py), close to the 60 s this waited.
TIMEOUT = float(chaining.CHAIN_TIMEOUT_SECONDS)
# Per job: its span, its waiting and running parts, one attempt, its capture, its decision.
JOB_SPANS = 6


@pytest.fixture(scope="module")
def collector(cluster_info: ClusterInfo) -> Iterator[collecting.Collector]:
    # Where the agents' pods, which get the operator's endpoint, reach it too.
    running = collecting.Collector(cluster_info.workdir, host=cluster_info.pod_host)
    yield running
    running.process.stop()


def _agents() -> list[Obj]:
    """The developer (its workspace published at the chain's end, rounds on review
    threads) followed by the reviewer, whose verdict is a pull request review."""
    return [
        chaining.ai_agent(
            "ai-developer",
            ["sh", "-c", DEVELOPER],
            object_name="developer",
            workspace={"publish": True, "keepFor": "0"},
            github={"followUps": {"reviews": True, "maxRounds": 3}},
            triggers=[
                {
                    "source": "github",
                    "events": ["issues.opened"],
                    "next": {"agentTriggerName": "ai-reviewer"},
                }
            ],
        ),
        chaining.ai_agent(
            "ai-reviewer", ["sh", "-c", REVIEWER], object_name="reviewer", github={"review": True}
        ),
    ]


def _one(spans: list[Obj], name: str, **said: object) -> Obj:
    """The one span named ``name`` whose attributes include ``said``."""
    found = [
        s for s in spans if s["name"] == name and all(attrs(s).get(k) == v for k, v in said.items())
    ]
    assert len(found) == 1, (name, said, [s["name"] for s in spans])
    return found[0]


def test_a_workspace_chains_publish_review_and_reply_are_spans_under_their_jobs(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    repo: Installed,
    git_server: GitServer,
    collector: collecting.Collector,
) -> None:
    info, github, owner = cluster_info, repo.github, REPOSITORY.split("/")[0]
    env = {
        **workspace_env(git_server),
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_SERVICE_NAME": "agentchain-e2e",
    }
    with app_operator(operator, info, namespace, repo, env) as op:
        for obj in _agents():
            info.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))
        payload = app_delivery("issues", "opened", repo.installation.id)
        started = deliver(op, payload, "issues", f"issue-{uuid.uuid4()}")
        chain_id = str(chaining.wait_phase(info, namespace, started["jobs"][0]["name"])["chainId"])
        operating.wait_until(
            lambda: len(github.pulls(REPOSITORY)) == 1, timeout=TIMEOUT, what="the pull request"
        )
        (pull,) = github.pulls(REPOSITORY)
        operating.wait_until(
            lambda: github.reviews(REPOSITORY, pull.number), timeout=TIMEOUT, what="the review"
        )

        thread = github.add_review(
            REPOSITORY, pull.number, "", [("README.md", 1, "Is this right?")], author=owner,
            state="COMMENTED",
        )  # fmt: skip
        top = thread.comments[0].id
        reply = thread_comment(repo, pull, owner, "OWNER", reply_to=top)
        answer = deliver(op, reply, "pull_request_review_comment", f"c-{uuid.uuid4()}")
        (round_job,) = [j["name"] for j in answer["jobs"]]
        operating.wait_until(
            lambda: replies_to(repo, pull, top), timeout=TIMEOUT, what="the round's reply"
        )
        round_chain = str(chaining.job_status(info, namespace, round_job)["chainId"])

        # The root, the two jobs, the publish's two spans, the review, and at least one
        # write of the chain's comment.
        spans = collector.trace_of(chain_id, 1 + 2 * JOB_SPANS + 2 + 1 + 1)
        rounds = collector.trace_of(round_chain, 1 + JOB_SPANS + 1)
        assert "Traceback" not in op.log_text()

    collecting.assert_one_tree(spans)
    developer = _one(spans, "agentjob ai-developer")
    reviewer = _one(spans, "agentjob ai-reviewer")
    assert reviewer["parentSpanId"] == developer["spanId"]
    # The chain's last hop (the reviewer's) completed it and started the publish Job.
    publish = _one(spans, "agentjob ai-reviewer publish")
    assert publish["parentSpanId"] == reviewer["spanId"], publish
    said = attrs(publish)
    assert said["agentchain.publish.final"] is True
    assert said["agentchain.publish.repository"] == REPOSITORY
    assert said["agentchain.publish.job"].startswith("agentchain-publish-"), said
    (pushed,) = [s for s in spans if s.get("parentSpanId") == publish["spanId"]]
    assert pushed["name"].startswith("publish "), pushed["name"]
    assert attrs(pushed)["agentchain.publish.job"] == said["agentchain.publish.job"]
    assert pushed.get("status", {}).get("code") != 2, pushed  # Not an error: it pushed.

    review = _one(spans, "github review")
    assert review["parentSpanId"] == reviewer["spanId"], review
    found = attrs(review)
    assert found["agentchain.github.action"] == "created", found
    assert (found["agentchain.github.repository"], int(found["agentchain.github.number"])) == (
        REPOSITORY,
        pull.number,
    )
    assert not any("Nearly there" in str(v) for v in found.values())  # Never its text.

    collecting.assert_one_tree(rounds)
    answered = _one(rounds, "agentjob ai-developer", **{"agentchain.job.name": round_job})
    written = _one(rounds, "github reply")
    assert written["parentSpanId"] == answered["spanId"], written
    assert int(attrs(written)["agentchain.github.number"]) == pull.number
    assert not [s for s in rounds if s["name"] == "github review"]  # The first chain's.
    # The round pushed its commit to the same branch: its own publish, in its own trace.
    again = _one(rounds, "agentjob ai-developer publish")
    assert again["parentSpanId"] == answered["spanId"], again
    assert attrs(again)["agentchain.publish.final"] is True
