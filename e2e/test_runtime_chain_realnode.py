"""Seed 003's chain on real agent CLIs, each step in its reference image on the real node.

The chain of ``e2e/test_runtime_chain.py`` (``e2e/runtime_chain.py``: the same AiAgents,
the same scripted model turns, the same account afterwards), with nothing of this tree
outside the images: the operator, a host process listening on the node's bridge address,
builds every pod from the AiAgent's ``spec.runtime``; the runner, ``agentchain mcp`` and
the CLI are those of the reference image (``images/agent/Dockerfile``), and the
workspace containers run the operator image (``AGENTCHAIN_WORKSPACE_IMAGE``), cloning
from the git stand-in on the bridge address. The models are the stand-in model server,
also on the bridge address, reached by the CLIs through their documented base-URL
settings (``e2e/runtime_stage.py`` sets the node up).

Marked ``realnode`` (``make realnode``): it needs root, buildah, mmdebstrap and the real
node.

Aspects covered:
- GitHub's ``issues.opened`` example, signed, starts the chain: triage (claude-code) ->
  developer (codex) -> reviewer (claude-code), every step Succeeded in a pod of its
  runtime's reference image, whose container exited 0;
- the models' tool calls go through the image's ``agentchain mcp``: triage's store write
  (read back through the job API with its writer, and by the developer's codex, another
  pod), triage's anchor (read through the job API), the reviewer's delegation to a
  fourth agent with a wait (the delegated job, the reviewer's child in the chain, and its
  answer back in the reviewer's next request);
- the developer's codex commits in the chain's workspace (a volume every step mounts)
  with its own shell tool, and the reviewer's prompt carries the workspace's report of
  that commit;
- usage from every step (Claude Code's tokens and cost, codex's tokens), and the chain's
  protocol in both CLIs' standing instructions.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentchain.hop.rules import jobspec
from e2e import runtime_stage
from e2e.controlplane.cluster import existing_kubeconfig
from e2e.runtime_chain import (
    apply,
    chain_complete,
    chain_script,
    check_chain,
    deliver_issue,
    jobs_when,
    secrets_for_models,
    seed_chain,
)

pytestmark = pytest.mark.realnode

Obj = dict[str, Any]
RUNTIMES = {"ai-triage": "claude-code", "ai-developer": "codex", "ai-reviewer": "claude-code",
            "ai-security": "claude-code"}  # fmt: skip


def _ran_in(stage: runtime_stage.Stage, job: Obj, runtime: str) -> None:
    """The job's agent container (the pod's main container, or with a workspace its
    second init container) ran the runtime's reference image and exited 0."""
    [pod] = stage.pods(job["metadata"]["name"])
    spec, status = pod["spec"], pod["status"]
    containers = spec.get("initContainers", []) + spec["containers"]
    states = status.get("initContainerStatuses", []) + status["containerStatuses"]
    [agent] = [c for c in containers if c["name"] == jobspec.CONTAINER_NAME]
    [state] = [s for s in states if s["name"] == jobspec.CONTAINER_NAME]
    assert agent["image"] == stage.images[runtime].ref, agent
    assert state["state"]["terminated"]["exitCode"] == 0, state


def test_issue_to_review_with_each_step_in_its_reference_image_on_the_real_node() -> None:
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")
    with runtime_stage.stage(("claude-code", "codex"), github=True) as stage:
        assert stage.github is not None
        namespace = runtime_stage.NAMESPACE
        stage.standin.script(*chain_script())
        apply(stage.info, namespace, [*secrets_for_models(), *seed_chain(stage.standin, None)])
        deliver_issue(stage.operator, stage.github)
        jobs = jobs_when(stage.info, namespace, chain_complete, "the chain to complete")
        by_agent = check_chain(stage.operator, namespace, stage.standin, jobs)
        for agent, job in by_agent.items():
            _ran_in(stage, job, RUNTIMES[agent])
        # The workspace's containers ran the operator image, and cloned over the bridge.
        [developer] = stage.pods(by_agent["ai-developer"]["metadata"]["name"])
        [prepare] = [c for c in developer["spec"]["initContainers"]
                     if c["name"] == "workspace-prepare"]  # fmt: skip
        assert prepare["image"] == stage.workspace_image, prepare
        stage.standin.assert_clean()
