"""The reference agent images (``images/claude-code``, ``images/codex``), built from the
repository with no registry (``e2e/controlplane/agent_images.py``), run AgentJobs on
the real node: the operator builds each pod from the AiAgent's ``spec.runtime`` with no
command of the test's, the pinned CLI in the image calls the stand-in model server over
the node's bridge, and the runner in the image hands the answer and the usage to the
job API with the job's token.

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
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest

from e2e import chaining, operating
from e2e.controlplane import agent_images
from e2e.controlplane.cluster import (
    ClusterInfo,
    cluster,
    existing_kubeconfig,
    finish_workdir,
    make_workdir,
)
from e2e.models import DEFAULT_API_KEY, ModelStandIn, text, tool

pytestmark = pytest.mark.realnode

NAMESPACE = "agents"
JOB_TIMEOUT_SECONDS = 240.0
Obj = dict[str, Any]


def _agent(name: str, runtime: str, base_url: str, secret: str) -> Obj:
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AiAgent",
        "metadata": {"name": name},
        "spec": {
            "triggerName": name,
            "defaultModel": "claude-sonnet-4-5" if runtime == "claude-code" else "gpt-5",
            "eventTriggers": [{"source": "manual"}],
            "env": [
                # A refused key or a broken request fails at once instead of after the
                # CLI's ten retries with backoff.
                {"name": "AGENTCHAIN_MODEL_RETRIES", "value": "0"},
                # MCP tools in Claude Code's tool list itself, not behind its ToolSearch.
                {"name": "ENABLE_TOOL_SEARCH", "value": "false"},
            ],
            "runtime": {
                "type": runtime,
                "baseUrl": base_url,
                "credentials": {"secretName": secret, "key": "api-key"},
            },
        },
    }


def _secret(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "stringData": {"api-key": DEFAULT_API_KEY},
    }


def _ended(info: ClusterInfo, name: str) -> Obj:
    deadline = time.monotonic() + JOB_TIMEOUT_SECONDS
    while True:
        job = operating.get_json(info, "agentjob", name, "-n", NAMESPACE)
        status: Obj = dict(job.get("status") or {})
        if status.get("phase") in ("Succeeded", "Failed"):
            return status
        if time.monotonic() > deadline:
            pods = info.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide", check=False)
            events = info.kubectl("get", "events", "-n", NAMESPACE, check=False)
            pytest.fail(f"{name} did not end: {status}\n{pods.stdout}\n{events.stdout}")
        time.sleep(1)


def _pod_of(info: ClusterInfo, job: str) -> Obj:
    pods = operating.get_json(info, "pods", "-n", NAMESPACE)["items"]
    [pod] = [p for p in pods if p["metadata"].get("labels", {}).get("job-name", "").startswith(job)]
    return dict(pod)


def _store_entry(op: operating.OperatorProcess, namespace: str, key: str) -> Obj:
    request = urllib.request.Request(
        f"{op.url}/api/store/{namespace}/{key}",
        headers={"Authorization": f"Bearer {op.admin_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        entry: Obj = json.load(response)
    return entry


def _logs(info: ClusterInfo, pod: Obj) -> str:
    name = pod["metadata"]["name"]
    return info.kubectl("logs", "-n", NAMESPACE, name, check=False).stdout


def test_claude_code_and_codex_jobs_run_in_their_reference_images_on_the_real_node() -> None:
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")
    built = {runtime: agent_images.build(runtime) for runtime in agent_images.RUNTIMES}
    workdir = make_workdir()
    succeeded = False
    try:
        with cluster(workdir, node="real") as info:
            node = info.real_node
            assert node is not None
            for image in built.values():
                agent_images.import_into(node.paths.containerd_socket, image)
            gateway = node.network.gateway
            images = {
                "AGENTCHAIN_RUNTIME_IMAGE_CLAUDE_CODE": built["claude-code"].ref,
                "AGENTCHAIN_RUNTIME_IMAGE_CODEX": built["codex"].ref,
            }
            with (
                ModelStandIn(host=gateway) as standin,
                operating.running(info, images, host=gateway) as op,
            ):
                _run_both(info, op, standin)
                standin.assert_clean()
        succeeded = True
    finally:
        finish_workdir(workdir, succeeded)


def _run_both(info: ClusterInfo, op: operating.OperatorProcess, standin: ModelStandIn) -> None:
    info.kubectl("create", "namespace", NAMESPACE)
    chaining.apply(
        info,
        NAMESPACE,
        _secret("anthropic"),
        _secret("openai"),
        _agent("claude", "claude-code", standin.url, "anthropic"),
        _agent("codex", "codex", f"{standin.url}/v1", "openai"),
    )

    entry = {"namespace": "notes", "key": "plan", "value": "from the image", "ttl_seconds": 600}
    standin.script(
        tool("mcp__agentchain__store_set", entry),
        text("Six times seven is 42.", input_tokens=1000, output_tokens=200),
    )
    chaining.apply(info, NAMESPACE, chaining.root_job("ask-claude", "claude"))
    status = _ended(info, "ask-claude")
    pod = _pod_of(info, "ask-claude")
    assert status["phase"] == "Succeeded", (status, _logs(info, pod))
    assert status["result"].strip() == "Six times seven is 42.", status
    # The tool turn's 100 + 20 tokens (the stand-in's default) and the answer's 1,200;
    # Claude Code prices claude-sonnet-4-5 at $3 / $15 per million input / output tokens.
    assert status["usage"] == {"tokens": 1320, "cost": pytest.approx(0.0066), "turns": 2}, status
    [container] = pod["spec"]["containers"]
    assert container["image"] == op.env()["AGENTCHAIN_RUNTIME_IMAGE_CLAUDE_CODE"]
    # The store entry the model asked for was written by `agentchain mcp` in the image.
    assert _store_entry(op, "notes", "plan")["value"] == "from the image"

    standin.script(text("Forty-two.", input_tokens=300, output_tokens=40))
    chaining.apply(info, NAMESPACE, chaining.root_job("ask-codex", "codex"))
    status = _ended(info, "ask-codex")
    pod = _pod_of(info, "ask-codex")
    assert status["phase"] == "Succeeded", (status, _logs(info, pod))
    assert status["result"].strip() == "Forty-two.", status
    assert status["usage"] == {"tokens": 340, "cost": 0.0, "turns": 1}, status
    [request] = standin.exchanges("responses")
    assert request.body["model"] == "gpt-5"
    for job in ("ask-claude", "ask-codex"):
        [state] = _pod_of(info, job)["status"]["containerStatuses"]
        assert state["state"]["terminated"]["exitCode"] == 0, state
