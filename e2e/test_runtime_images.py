"""The reference agent images (``images/claude-code``, ``images/codex``), built from the
repository with no registry (``e2e/controlplane/agent_images.py``), run AgentJobs on
the real node: the operator builds each pod from the AiAgent's ``spec.runtime`` with no
command of the test's, the pinned CLI in the image calls the stand-in model server over
the node's bridge, and the runner in the image hands the answer and the usage to the
job API with the job's token (``e2e/runtime_stage.py`` sets it up).

Marked ``realnode`` like ``test_operator_image.py``: it needs root, buildah, mmdebstrap
and the real node, so ``make test`` deselects it and ``make realnode`` runs it. The
operator is a host process (as in every other e2e test) listening on the bridge address;
what this test is about is the agent container.

Aspects covered:
- claude-code: the job Succeeds with the model's scripted answer as its result, and
  tokens, cost and turns in ``status.usage``; the model's scripted call of an
  ``agentchain mcp`` tool is answered by the server the image carries (the store entry
  is then read back through the job API);
- codex: the job Succeeds with the scripted answer, and tokens and turns (codex reports
  no cost);
- each pod ran the image the operator was told to use, and its container exited 0.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from e2e import runtime_stage
from e2e.controlplane.cluster import existing_kubeconfig
from e2e.models import text, tool

pytestmark = pytest.mark.realnode

Obj = dict[str, Any]


def _store_entry(stage: runtime_stage.Stage, namespace: str, key: str) -> Obj:
    request = urllib.request.Request(
        # An admin names the tenant: the Kubernetes namespace whose store it is.
        f"{stage.operator.url}/api/store/{namespace}/{key}?tenant={runtime_stage.NAMESPACE}",
        headers={"Authorization": f"Bearer {stage.operator.admin_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        entry: Obj = json.load(response)
    return entry


def _ran_in(stage: runtime_stage.Stage, job: str, runtime: str) -> None:
    [pod] = stage.pods(job)
    [container] = pod["spec"]["containers"]
    assert container["image"] == stage.images[runtime].ref, container
    [state] = pod["status"]["containerStatuses"]
    assert state["state"]["terminated"]["exitCode"] == 0, state


def test_claude_code_and_codex_jobs_run_in_their_reference_images_on_the_real_node() -> None:
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")
    with runtime_stage.stage() as stage:
        stage.agent("claude", "claude-code")
        stage.agent("codex", "codex")

        entry = {"namespace": "notes", "key": "plan", "value": "from the image", "ttl_seconds": 600}
        stage.standin.script(
            tool("mcp__agentchain__store_set", entry),
            text("Six times seven is 42.", input_tokens=1000, output_tokens=200),
        )
        stage.start_job("ask-claude", "claude")
        status = stage.ended("ask-claude")
        assert status["phase"] == "Succeeded", (status, stage.logs("ask-claude"))
        assert status["result"].strip() == "Six times seven is 42.", status
        # The tool turn's 100 + 20 tokens (the stand-in's default) and the answer's 1,200;
        # Claude Code prices claude-sonnet-4-5 at $3 / $15 per million input / output tokens.
        usage = {"tokens": 1320, "cost": pytest.approx(0.0066), "turns": 2}
        assert status["usage"] == usage, status
        # The store entry the model asked for, written by `agentchain mcp` in the image.
        assert _store_entry(stage, "notes", "plan")["value"] == "from the image"
        _ran_in(stage, "ask-claude", "claude-code")

        stage.standin.script(text("Forty-two.", input_tokens=300, output_tokens=40))
        stage.start_job("ask-codex", "codex")
        status = stage.ended("ask-codex")
        assert status["phase"] == "Succeeded", (status, stage.logs("ask-codex"))
        assert status["result"].strip() == "Forty-two.", status
        assert status["usage"] == {"tokens": 340, "cost": 0.0, "turns": 1}, status
        [request] = stage.standin.exchanges("responses")
        assert request.body["model"] == "gpt-5"
        _ran_in(stage, "ask-codex", "codex")
        stage.standin.assert_clean()
