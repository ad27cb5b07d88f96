"""The reference agent images (``images/agent/Dockerfile``, one per runtime), built from
the repository with no registry (``e2e/controlplane/agent_images.py``), run AgentJobs on
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
- opencode and gemini (Gemini CLI on the Node its image carries): each model's scripted
  store write, under the name its CLI gives the tool, goes through the image's
  ``agentchain mcp`` (the entry is read back through the job API), and the job Succeeds
  with the answer and its tokens and turns;
- each pod ran the image the operator was told to use, and its container exited 0;
- with a key the provider refuses (401), each runtime's job ends ``Failed`` with reason
  ``ModelAuthFailed`` (the exit code of the image's runner), shown by
  ``kubectl get aj -o wide``, after one model request;
- the images carry no trace of the build's host: the CA bundle mounted for the CLI's
  download (this machine's, with its TLS-intercepting CA) is in no layer, nor is the
  build's pip configuration, and the image's user is the numeric non-root 10001.
"""

from __future__ import annotations

import json
import os
import tarfile
import urllib.request
from pathlib import Path
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


def _image_files(archive: Path) -> tuple[Obj, dict[str, bytes]]:
    """The image's config, and the CA bundles and pip configurations its layers hold
    (by layer and path: a later layer's copy would replace the base image's)."""
    found: dict[str, bytes] = {}
    with tarfile.open(archive) as oci:

        def blob(digest: str) -> Any:
            return oci.extractfile(f"blobs/sha256/{digest.split(':')[1]}")

        [entry] = json.load(oci.extractfile("index.json"))["manifests"]  # type: ignore[arg-type]
        manifest = json.load(blob(entry["digest"]))
        config: Obj = json.load(blob(manifest["config"]["digest"]))
        for number, layer in enumerate(manifest["layers"]):
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r|*") as files:
                for member in files:
                    name = member.name
                    base = name.rsplit("/", 1)[-1]
                    wanted = base == "ca-certificates.crt" or base in ("pip.conf", "pip.ini")
                    if member.isfile() and wanted:
                        data = files.extractfile(member)
                        found[f"{number}:{name}"] = data.read() if data else b""
    return config, found


def _no_trace_of_the_build_host(archive: Path) -> None:
    config, files = _image_files(archive)
    assert config["config"]["User"] == "10001:10001", config["config"]
    host_bundle = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
    host = host_bundle.read_bytes()
    # The base image's own bundle, in its first layer, and nothing of the host's.
    assert [path for path in files if path.endswith("ca-certificates.crt")] == [
        "0:etc/ssl/certs/ca-certificates.crt"
    ], sorted(files)
    assert host not in files.values()
    assert not [path for path in files if path.endswith(".conf")], sorted(files)


def _ran_in(stage: runtime_stage.Stage, job: str, runtime: str) -> None:
    [pod] = stage.pods(job)
    [container] = pod["spec"]["containers"]
    assert container["image"] == stage.images[runtime].ref, container
    [state] = pod["status"]["containerStatuses"]
    assert state["state"]["terminated"]["exitCode"] == 0, state


# runtime -> the name its CLI gives agentchain mcp's store_set tool
STORE_SET = {"opencode": "agentchain_store_set", "gemini": "mcp_agentchain_store_set"}


def test_every_runtime_s_job_runs_in_its_reference_image_on_the_real_node() -> None:
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")
    with runtime_stage.stage() as stage:
        for image in stage.images.values():
            _no_trace_of_the_build_host(image.archive)
        for runtime in stage.images:
            stage.agent(runtime, runtime)

        entry = {"namespace": "notes", "key": "plan", "value": "from the image", "ttl_seconds": 600}
        stage.standin.script(
            tool("mcp__agentchain__store_set", entry),
            text("Six times seven is 42.", input_tokens=1000, output_tokens=200),
        )
        stage.start_job("ask-claude", "claude-code")
        status = stage.ended("ask-claude")
        assert status["phase"] == "Succeeded", (status, stage.logs("ask-claude"))
        assert status["result"].strip() == "Six times seven is 42.", status
        # The tool turn's 100 + 20 tokens (the stand-in's default) and the answer's 1,200;
        # Claude Code prices claude-sonnet-4-5 at $3 / $15 per million input / output tokens.
        usage = {"tokens": 1320, "cost": pytest.approx(0.0066), "turns": 2}
        usage |= {"inputTokens": 1100, "outputTokens": 220}
        assert status["usage"] == usage, status
        # The store entry the model asked for, written by `agentchain mcp` in the image.
        assert _store_entry(stage, "notes", "plan")["value"] == "from the image"
        _ran_in(stage, "ask-claude", "claude-code")

        stage.standin.script(text("Forty-two.", input_tokens=300, output_tokens=40))
        stage.start_job("ask-codex", "codex")
        status = stage.ended("ask-codex")
        assert status["phase"] == "Succeeded", (status, stage.logs("ask-codex"))
        assert status["result"].strip() == "Forty-two.", status
        split = {"inputTokens": 300, "outputTokens": 40}
        assert status["usage"] == {"tokens": 340, "cost": 0.0, "turns": 1, **split}, status
        [request] = stage.standin.exchanges("responses")
        assert request.body["model"] == "gpt-5"
        _ran_in(stage, "ask-codex", "codex")

        for runtime, name in STORE_SET.items():
            value = f"from the {runtime} image"
            entry = {"namespace": runtime, "key": "plan", "value": value, "ttl_seconds": 600}
            stage.standin.script(tool(name, entry), text("Stored the plan."))
            stage.start_job(f"ask-{runtime}", runtime)
            status = stage.ended(f"ask-{runtime}")
            assert status["phase"] == "Succeeded", (status, stage.logs(f"ask-{runtime}"))
            assert status["result"].strip() == "Stored the plan.", status
            # Two turns of the stand-in's default 100 + 20 tokens; neither CLI has a price.
            split = {"inputTokens": 200, "outputTokens": 40}
            assert status["usage"] == {"tokens": 240, "cost": 0.0, "turns": 2, **split}, status
            assert _store_entry(stage, runtime, "plan")["value"] == value
            _ran_in(stage, f"ask-{runtime}", runtime)

        for runtime in stage.images:
            before = len(stage.standin.exchanges())
            stage.agent(f"{runtime}-refused", runtime, key="sk-wrong")
            stage.start_job(f"refused-{runtime}", f"{runtime}-refused")
            status = stage.ended(f"refused-{runtime}")
            assert (status["phase"], status["reason"]) == ("Failed", "ModelAuthFailed"), status
            assert status["message"].startswith("the model provider refused the credentials")
            wide = stage.info.kubectl(
                "get", "aj", f"refused-{runtime}", "-n", runtime_stage.NAMESPACE, "-o", "wide"
            ).stdout
            assert wide.splitlines()[1].split()[-1] == "ModelAuthFailed", wide
            assert [e.status for e in stage.standin.exchanges()[before:]] == [401], runtime
        stage.standin.assert_clean()
