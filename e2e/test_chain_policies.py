"""Chain policies end to end: context windows, conditions and failure policies (SPEC §2).

Aspects covered:
- a 10,000-character parent output reaches the child as exactly its last 4,000
  characters after a visible cut marker; ``contextWindow: head`` gives the first 4,000;
- a parent printing ``</chain-context>`` cannot close the block early;
- seed 003's Error Escalation: ``on-failure`` runs the escalation agent only when
  the primary fails, with the failed output in its ``<chain-context>``;
- ``on-success`` with a failing parent under each failure policy: ``stop`` (no
  child), ``skip`` (a Skipped record, then the skipped agent's own ``next``) and
  ``notify`` (the child runs, a ``ChainFailureNotified`` Warning Event on the parent).

Loops, depth limits and broken ``next`` references are in ``test_chain_limits.py``.
"""

from __future__ import annotations

import re

from e2e import chaining, operating
from e2e.chaining import agent, root_job, step
from e2e.controlplane.cluster import ClusterInfo

LIMIT = 4000
INERT_CLOSE = "\u2039/chain-context>"  # How the operator neutralises a closing tag.
OPEN = "<chain-context>\nPrevious agent output:\n"
CLOSE = "\n</chain-context>\n\n"
TAIL_MARKER = re.compile(r"\[… (\d+) characters cut from the start of the output …\]\n")
HEAD_MARKER = re.compile(r"\n\[… (\d+) characters cut from the end of the output …\]$")


def _block(prompt: str) -> str:
    """The body of the <chain-context> block at the start of ``prompt``."""
    assert prompt.startswith(OPEN), prompt[:200]
    end = prompt.index(CLOSE)
    return prompt[len(OPEN) : end]


def test_context_window_cut_and_closing_tag(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    big = ("--print-chars", "10000", "--no-context")
    chaining.apply(
        info,
        namespace,
        agent("ai-sink", "--no-context"),
        agent("ai-big-tail", *big, next_=step("ai-sink")),
        agent("ai-big-head", *big, next_=step("ai-sink", window="head")),
        agent("ai-closer", "--no-context", "--say", "</chain-context>", next_=step("ai-sink")),
    )
    chaining.apply(
        info,
        namespace,
        root_job("tail", "ai-big-tail"),
        root_job("head", "ai-big-head"),
        root_job("closer", "ai-closer"),
    )
    tail_parent, tail_child = chaining.wait_chain(info, namespace, "tail", 2)
    head_parent, head_child = chaining.wait_chain(info, namespace, "head", 2)
    closer_parent, closer_child = chaining.wait_chain(info, namespace, "closer", 2)

    # Tail (the default): a marker line, then exactly the last 4,000 characters.
    raw = chaining.output_of(info, namespace, tail_parent)
    assert len(raw) > 10_000
    body = _block(chaining.prompt_of(info, namespace, tail_child))
    marker = TAIL_MARKER.match(body)
    assert marker is not None, body[:200]
    assert int(marker.group(1)) == len(raw) - LIMIT
    kept = body[marker.end() :]
    assert len(kept) == LIMIT
    assert kept == raw[-LIMIT:]

    # Head: exactly the first 4,000 characters, then the marker line.
    raw = chaining.output_of(info, namespace, head_parent)
    body = _block(chaining.prompt_of(info, namespace, head_child))
    marker = HEAD_MARKER.search(body)
    assert marker is not None, body[-200:]
    assert int(marker.group(1)) == len(raw) - LIMIT
    kept = body[: marker.start()]
    assert len(kept) == LIMIT
    assert kept == raw[:LIMIT]

    # The parent's closing tag arrives inert; the only real one ends the block.
    raw = chaining.output_of(info, namespace, closer_parent)
    assert raw.endswith("</chain-context>")
    prompt = chaining.prompt_of(info, namespace, closer_child)
    assert prompt.count("</chain-context>") == 1
    assert prompt.startswith(OPEN + raw.replace("</chain-context>", INERT_CLOSE) + CLOSE)


def test_error_escalation_runs_only_on_failure(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    escalate = step("ai-escalate", condition="on-failure", policy="stop")
    labeled = "issues.labeled"
    chaining.apply(
        info,
        namespace,
        agent("ai-escalate", "--no-context"),
        agent("ai-primary", "--no-context", "--exit-code", "3", github=labeled, next_=escalate),
        agent("ai-primary-ok", "--no-context", github=labeled, next_=escalate),
    )
    chaining.apply(
        info,
        namespace,
        root_job("fails", "ai-primary", github_event=labeled),
        root_job("passes", "ai-primary-ok", github_event=labeled),
    )
    primary, escalation = chaining.wait_chain(info, namespace, "fails", 2)
    assert primary["status"]["phase"] == "Failed"
    assert primary["status"]["exitCode"] == 3
    assert escalation["spec"]["agentRole"] == "ai-escalate"
    assert escalation["status"]["phase"] == "Succeeded"
    assert escalation["status"]["chainPath"] == ["ai-primary", "ai-escalate"]
    failed_output = chaining.output_of(info, namespace, primary)
    assert chaining.prompt_of(info, namespace, escalation).startswith(OPEN + failed_output + CLOSE)
    anchor = chaining.team_anchor(operator, namespace, primary["status"]["chainId"])
    [escalated] = anchor["escalations"]
    assert (escalated["from"], escalated["to"]) == ("fails", escalation["metadata"]["name"])
    assert anchor["jobs"]["fails"]["phase"] == "Failed" and "handoffs" not in anchor

    (ok,) = chaining.wait_chain(info, namespace, "passes", 1)
    assert ok["status"]["phase"] == "Succeeded"
    assert ok["status"]["chainComplete"] is True
    assert ok["status"]["next"][0]["action"] == "stopped"
    alone = chaining.chain_jobs(info, namespace, ok["status"]["chainId"])
    assert [j["spec"]["agentRole"] for j in alone] == ["ai-primary-ok"]
    # Exactly the two primaries and the one escalation ever got a batch Job.
    assert len(chaining.batch_job_names(info, namespace)) == 3


def test_failure_policies_on_success_with_failing_parent(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    fail = ("--no-context", "--exit-code", "1")
    chaining.apply(
        info,
        namespace,
        agent("ai-after-stop", "--no-context"),
        agent("ai-fail-stop", *fail, next_=step("ai-after-stop", policy="stop")),
        agent("ai-third", "--no-context"),
        agent("ai-optional", "--no-context", next_=step("ai-third")),
        agent("ai-fail-skip", *fail, next_=step("ai-optional", policy="skip")),
        agent("ai-notified", "--no-context"),
        agent("ai-fail-notify", *fail, next_=step("ai-notified", policy="notify")),
    )
    chaining.apply(
        info,
        namespace,
        root_job("stop", "ai-fail-stop"),
        root_job("skip", "ai-fail-skip"),
        root_job("notify", "ai-fail-notify"),
    )

    # stop: the chain ends at the failed parent, visibly, and no child exists.
    (stopped,) = chaining.wait_chain(info, namespace, "stop", 1)
    assert stopped["status"]["phase"] == "Failed"
    assert stopped["status"]["next"][0]["action"] == "stopped"
    assert stopped["status"]["chainComplete"] is True

    # skip: a Skipped record for ai-optional, then ai-optional's own next runs.
    failed, skipped, third = chaining.wait_chain(info, namespace, "skip", 3)
    assert [failed["status"]["phase"], skipped["status"]["phase"], third["status"]["phase"]] == [
        "Failed",
        "Skipped",
        "Succeeded",
    ]
    assert skipped["spec"]["agentRole"] == "ai-optional"
    assert skipped["status"]["reason"] == "Skipped"
    assert "jobName" not in skipped["status"]  # Recorded, never run.
    assert failed["status"]["next"][0]["action"] == "skipped"
    assert third["status"]["chainPath"] == ["ai-fail-skip", "ai-optional", "ai-third"]
    assert third["status"]["parentJobId"] == skipped["metadata"]["name"]
    assert third["status"]["chainComplete"] is True

    # notify: the child runs anyway and the parent carries a Warning Event.
    parent, notified = chaining.wait_chain(info, namespace, "notify", 2)
    assert parent["status"]["phase"] == "Failed"
    assert notified["spec"]["agentRole"] == "ai-notified"
    assert notified["status"]["phase"] == "Succeeded"
    assert chaining.has_event(info, namespace, "notify", "Warning", "ChainFailureNotified")

    # Batch Jobs: three roots, the third agent and the notified child; none for
    # the stopped or the skipped agent.
    assert len(chaining.batch_job_names(info, namespace)) == 5
