"""Chains written back to GitHub, on the real control plane with the GitHub stand-in.

The operator runs as a GitHub App (its settings name the stand-in's URL, the App's id
and its private key file); deliveries are GitHub's own example payloads
(``@octokit/webhooks-examples``), signed, with the App's ``installation``.  The stand-in
checks every request the operator makes against GitHub's OpenAPI description (the
``github`` fixture fails the test otherwise).

Aspects covered:
* seed 003's Issue → Fix → Review chain, started by ``issues.opened``, produces exactly
  ONE comment on the issue, created once and edited as the chain runs, ending with the
  three steps Succeeded, links to the dashboard and the reviewer's result; a redelivery
  of the same delivery creates nothing new, and a restarted operator sends GitHub
  nothing for the finished chain;
* a ``pull_request.opened`` chain: one comment on the PR and one Check Run on its head
  commit, queued/in progress and then completed with ``success`` and the summary;
* the operator SIGKILLed right after creating the comment, before recording its id
  (crashpoint ``github-comment-created``): the restarted operator finds the comment by
  its marker and edits it, so there is still exactly one; SIGKILLed while the chain
  runs, the restarted operator edits the recorded comment to the end;
* a storm of 429s and secondary limits (every request for a while: token mints,
  searches, creates) delays the write-back but not the chain, and after each limit the
  operator asks GitHub nothing until its ``Retry-After`` has passed;
* the App installed without the repository: the chain still succeeds, and the root job
  and its AiAgent get a Warning Event ``GitHubWriteBackFailed`` saying ``NotInstalled``,
  and the AiAgent the condition ``GitHubWriteBack=False`` (reason ``NotInstalled``) beside
  its ``Ready``; after a chain written back, the condition is ``True``.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest

from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.githubloop import (
    DASHBOARD,
    ISSUE,
    PULL,
    REPOSITORY,
    Installed,
    app_delivery,
    app_operator,
    install,
)

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "config" / "samples" / "seed-003" / "issue-fix-review.yaml"
TIMEOUT = 120.0
SLOW_AGENTS = {"AGENTCHAIN_DEFAULT_COMMAND": "agentchain,demo-agent,--sleep,1.5"}


@pytest.fixture
def app_installed(github: GitHubStandIn, tmp_path: Path) -> Installed:
    return install(github, tmp_path)


def _deliver(
    op: operating.OperatorProcess, installed: Installed, event: str, action: str
) -> tuple[bytes, dict[str, str]]:
    payload = app_delivery(event, action, installed.installation.id)
    body, headers = delivering.signed(op.webhook_secret, payload, event=event)
    status, answer = delivering.send(op, body, headers)
    assert status == 202 and answer["jobs"], answer
    return body, headers


def _seed_chain(info: ClusterInfo, namespace: str) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []

    def three_done() -> bool:
        nonlocal jobs
        items = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
        jobs = items
        return len(items) == 3 and any((i.get("status") or {}).get("chainComplete") for i in items)

    operating.wait_until(three_done, timeout=TIMEOUT, what="the seed chain to complete")
    return jobs


def _final_comment(installed: Installed, number: int = ISSUE, agents: int = 3) -> str:
    def final() -> bool:
        comments = installed.comments(number)
        return (
            len(comments) == 1
            and comments[0].body.count("✅ Succeeded") == agents
            and "**Succeeded**" in comments[0].body
        )

    operating.wait_until(final, timeout=60, what="the final comment", interval=0.5)
    (comment,) = installed.comments(number)
    assert comment.author == "agentchain[bot]"
    return comment.body


def test_issue_chain_keeps_one_comment(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    app_installed: Installed,
) -> None:
    info, installed = cluster_info, app_installed
    with app_operator(operator, info, namespace, installed, SLOW_AGENTS) as op:
        info.kubectl("apply", "-n", namespace, "-f", str(SEED))
        body, headers = _deliver(op, installed, "issues", "opened")
        operating.wait_until(lambda: installed.comments(), timeout=60, what="the first comment")
        running = installed.comments()[0].body
        assert "**Succeeded**" not in running and "ai-triage" in running
        jobs = _seed_chain(info, namespace)
        final = _final_comment(installed)
        assert final.startswith(f"<!-- agentchain:chain={namespace}/")
        assert "Verdict: approve" in final and "```text" in final
        for job in jobs:
            assert f"({DASHBOARD}/ui/jobs/{namespace}/{job['metadata']['name']})" in final
        assert installed.creates() == 1
        assert len(installed.github.requests("issues/update-comment", status=200)) >= 1
        operating.wait_until(
            lambda: _write_back_condition(info, namespace, "issue-triage") is not None,
            timeout=30,
            what="the agent's GitHubWriteBack condition",
        )
        condition = _write_back_condition(info, namespace, "issue-triage")
        assert condition is not None and condition["status"] == "True", condition
        status, answer = delivering.send(op, body, headers)  # A redelivery.
        assert status == 202 and answer["duplicate"] is True, answer
        operating.stays(
            lambda: installed.creates() == 1 and len(installed.comments()) == 1,
            seconds=3,
            what="one comment after a redelivery",
        )
        before = len(installed.github.requests())
        op.stop()  # A restart lists every job again: a finished chain costs GitHub nothing.
        op.start()
        operating.stays(
            lambda: len(installed.github.requests()) == before,
            seconds=3,
            what="no GitHub request after a restart",
        )
        assert "Traceback" not in op.log_text()


def test_pull_request_chain_has_a_check_run(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    app_installed: Installed,
) -> None:
    info, installed = cluster_info, app_installed
    reviewer = chaining.agent(
        "pr-reviewer",
        "--no-context",
        "--say",
        "LGTM @octocat, fixes #1",
        "--sleep",
        "4",  # Long enough for a write-back while it runs (0.5 s coalescing here).
        github="pull_request.opened",
    )
    with app_operator(operator, info, namespace, installed) as op:
        chaining.apply(info, namespace, reviewer)
        _deliver(op, installed, "pull_request", "opened")
        final = _final_comment(installed, PULL, agents=1)
        assert "LGTM @octocat, fixes #1" in final.split("```text", 1)[1]  # Inert, in a code block.

        def completed() -> bool:
            runs = installed.github.check_runs(REPOSITORY)
            return len(runs) == 1 and runs[0].status == "completed"

        operating.wait_until(completed, timeout=60, what="the Check Run to complete")
        (run,) = installed.github.check_runs(REPOSITORY)
        assert run.conclusion == "success" and run.name == "agentchain"
        assert run.head_sha == "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
        assert (run.external_id or "").startswith(f"agentchain:{namespace}/")
        assert run.output is not None and "LGTM" in str(run.output["summary"])
        assert len(installed.github.requests("checks/create", status=201)) == 1
        # queued -> in_progress -> completed, in that order, edited in place (states may
        # be skipped: write-back is coalesced, and a pending pod may start within it).
        sent = [
            str((x.body or {}).get("status"))
            for x in installed.github.requests("checks/create", status=201)
            + installed.github.requests("checks/update", status=200)
            if (x.body or {}).get("status")
        ]
        shown = [status for i, status in enumerate(sent) if i == 0 or status != sent[i - 1]]
        assert shown[-1] == "completed" and "in_progress" in shown, sent
        order = ["queued", "in_progress", "completed"]
        assert shown == sorted(shown, key=order.index), sent


def test_operator_killed_after_creating_the_comment(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    app_installed: Installed,
) -> None:
    info, installed = cluster_info, app_installed
    with app_operator(operator, info, namespace, installed) as op:
        info.kubectl("apply", "-n", namespace, "-f", str(SEED))

        def deliver() -> None:
            _deliver(op, installed, "issues", "opened")

        code = op.crash_at("github-comment-created", deliver, timeout=TIMEOUT)
        assert code != 0
        assert installed.creates() == 1  # Created, never recorded.
        op.start()
        _seed_chain(info, namespace)
        final = _final_comment(installed)
        assert "Verdict: approve" in final
        assert installed.creates() == 1 and len(installed.comments()) == 1


def test_operator_killed_while_the_chain_runs(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    app_installed: Installed,
) -> None:
    info, installed = cluster_info, app_installed
    with app_operator(operator, info, namespace, installed, SLOW_AGENTS) as op:
        info.kubectl("apply", "-n", namespace, "-f", str(SEED))
        _deliver(op, installed, "issues", "opened")
        operating.wait_until(installed.comments, timeout=60, what="the first comment")
        op.kill()  # SIGKILL with the chain half-way and its comment showing it running.
        assert "**Succeeded**" not in installed.comments()[0].body
        op.start()
        _seed_chain(info, namespace)
        assert "Verdict: approve" in _final_comment(installed)
        assert installed.creates() == 1


def test_rate_limit_storm_delays_the_comment_not_the_chain(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    app_installed: Installed,
) -> None:
    info, installed = cluster_info, app_installed
    with app_operator(operator, info, namespace, installed) as op:
        info.kubectl("apply", "-n", namespace, "-f", str(SEED))
        # Every request for a while: token mints, searches, creates and edits alike.
        installed.github.inject("rate_limit", times=4, retry_after=3)
        installed.github.inject("secondary_rate_limit", times=2, retry_after=3)
        started = time.monotonic()
        _deliver(op, installed, "issues", "opened")
        _seed_chain(info, namespace)
        chain_done = time.monotonic() - started
        final = _final_comment(installed)
        assert "Verdict: approve" in final
        exchanges = installed.github.requests()
        limited = [e for e in exchanges if e.fault is not None]
        assert [e.fault for e in limited] == ["rate_limit"] * 4 + ["secondary_rate_limit"] * 2
        # After each limit the operator waited out its Retry-After (times are whole
        # seconds) before asking GitHub anything again.
        for limit, after in itertools.pairwise(exchanges):
            if limit.fault is not None:
                assert (after.at - limit.at).total_seconds() >= 2, (limit, after)
        assert chain_done < 60, chain_done
        assert installed.creates() == 1 and len(installed.comments()) == 1


def test_app_not_installed_on_the_repository(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    tmp_path: Path,
) -> None:
    info = cluster_info
    elsewhere = install(github, tmp_path, repositories=["secret-plans"])
    with app_operator(operator, info, namespace, elsewhere) as op:
        info.kubectl("apply", "-n", namespace, "-f", str(SEED))
        _deliver(op, elsewhere, "issues", "opened")
        jobs = _seed_chain(info, namespace)
        assert all((j.get("status") or {}).get("phase") == "Succeeded" for j in jobs)
        root = next(j for j in jobs if (j.get("status") or {}).get("chainDepth") == 0)
        name = root["metadata"]["name"]

        def reported() -> bool:
            return chaining.has_event(info, namespace, name, "Warning", "GitHubWriteBackFailed")

        operating.wait_until(reported, timeout=60, what="the write-back failure Event")
        (event,) = [
            e
            for e in chaining.events_for(info, namespace, name)
            if e["reason"] == "GitHubWriteBackFailed"
        ]
        assert "NotInstalled" in event["message"]
        agent_events = [
            e
            for e in chaining.events_for(info, namespace, "issue-triage")
            if e["reason"] == "GitHubWriteBackFailed"
        ]
        assert len(agent_events) == 1 and agent_events[0]["involvedObject"]["kind"] == "AiAgent"
        operating.wait_until(  # Set right after the Events.
            lambda: _write_back_condition(info, namespace, "issue-triage") is not None,
            timeout=30,
            what="the agent's GitHubWriteBack condition",
        )
        condition = _write_back_condition(info, namespace, "issue-triage")
        assert condition is not None and condition["status"] == "False", condition
        assert condition["reason"] == "NotInstalled", condition
        ready = _write_back_condition(info, namespace, "issue-triage", "Ready")
        assert ready is not None and ready["status"] == "True", ready  # Not dropped.
        assert elsewhere.comments() == []
    github.take_violations()  # The refused token requests are GitHub's 422s, as expected.


def _write_back_condition(
    info: ClusterInfo, namespace: str, agent: str, kind: str = "GitHubWriteBack"
) -> dict[str, Any] | None:
    got = operating.get_json(info, "aiagent", agent, "-n", namespace)
    found = [c for c in (got.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else None
