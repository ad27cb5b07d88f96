"""What the README tells a new user to do, done as a user would (issue 15).

Aspects covered:
* ``python -m e2e.controlplane up --with-operator`` starts the control plane and the real
  node with the e2e agent image imported, installs the CRDs and RBAC, runs the operator
  and prints how to reach it;
* the admin kubeconfig it prints embeds its certificates, so a copy works elsewhere;
* ``kubectl apply -f config/samples/`` into one namespace gives a working set: every
  AiAgent becomes ``Ready=True``, and the sample manual run chains as the README says:
  triage, developer, reviewer, all ``Succeeded``, each in a container of the image ``up``
  imported (the operator's default image: the samples name none), which ran and ended 0;
* SIGTERM stops the operator and the cluster and removes the work directory.

This starts a cluster of its own (the command under test is the whole point), with a
real node, in another process: so it is marked ``realnode`` and runs in the real node's
lane (``make test``, ``make realnode``), where no session cluster holds the lane's node;
outside a lane this session holds the machine's one real node, and it skips.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e import realnodes
from e2e.controlplane import agent_images, operator_image

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "config" / "samples"
# Building the e2e agent image when a change made it stale, and the real node's start.
START_TIMEOUT_SECONDS = 600.0
READY_TIMEOUT_SECONDS = 60.0
CHAIN_TIMEOUT_SECONDS = 120.0
CHAIN = ["ai-triage", "ai-developer", "ai-reviewer"]


def _wait_for_line(out: Path, process: subprocess.Popen[bytes], pattern: str) -> str:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        text = out.read_text(errors="replace") if out.exists() else ""
        if re.search(pattern, text):
            return text
        assert process.poll() is None, f"`up` exited {process.returncode}:\n{text}"
        time.sleep(0.5)
    raise AssertionError(f"`up` printed no {pattern!r} in {START_TIMEOUT_SECONDS}s")


pytestmark = pytest.mark.realnode


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    realnodes.skip_on_an_existing_cluster()
    realnodes.skip_outside_a_lane("`python -m e2e.controlplane up`")
    out = tmp_path / "stdout"
    with out.open("wb") as fh:
        process = subprocess.Popen(
            [sys.executable, "-m", "e2e.controlplane", "up", "--with-operator"],
            cwd=ROOT,
            stdout=fh,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        yield process, _wait_for_line(out, process, r"# Ctrl-C stops the operator")
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                raise


def _exported(text: str, name: str) -> str:
    match = re.search(rf"^export {name}=(.*)$", text, re.MULTILINE)
    assert match, f"`up` did not print export {name}=…"
    return match.group(1)


def _kubectl(text: str) -> str:
    match = re.search(r"kubectl is in (\S+)", text)
    assert match
    found = Path(match.group(1)) / "kubectl"
    return str(found) if found.exists() else "kubectl"


def _ready(kubectl: list[str], namespace: str) -> dict[str, str]:
    got = subprocess.run(
        [*kubectl, "get", "aiagents", "-n", namespace, "-o", "json"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    ready: dict[str, str] = {}
    for item in json.loads(got.stdout)["items"]:
        conditions = (item.get("status") or {}).get("conditions") or []
        status = {c["type"]: c["status"] for c in conditions}.get("Ready", "")
        ready[item["metadata"]["name"]] = status
    return ready


def _jobs(kubectl: list[str], namespace: str) -> dict[str, str]:
    """Each AgentJob's agent (by chain depth) and phase: ``{"0 ai-triage": "Succeeded"}``."""
    got = subprocess.run(
        [*kubectl, "get", "agentjobs", "-n", namespace, "-o", "json"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    jobs: dict[str, str] = {}
    for item in json.loads(got.stdout)["items"]:
        status = item.get("status") or {}
        jobs[f"{status.get('chainDepth', 0)} {item['spec']['agentRole']}"] = status.get("phase", "")
    return jobs


def _chain_done(jobs: dict[str, str]) -> bool:
    expected = {f"{depth} {agent}": "Succeeded" for depth, agent in enumerate(CHAIN)}
    return jobs == expected


def test_up_with_operator_runs_the_samples(
    started: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    process, text = started
    # A copy of the kubeconfig works on its own: no certificate paths inside.
    copied = tmp_path / "copied.kubeconfig"
    shutil.copy(_exported(text, "KUBECONFIG"), copied)
    workdir = Path(_exported(text, "KUBECONFIG")).parent
    assert "-data:" in copied.read_text()
    kubectl = [_kubectl(text), "--kubeconfig", str(copied)]
    subprocess.run([*kubectl, "create", "namespace", "samples"], check=True)
    subprocess.run([*kubectl, "apply", "-n", "samples", "-f", str(SAMPLES)], check=True)

    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    ready = _ready(kubectl, "samples")
    while time.monotonic() < deadline and set(ready.values()) != {"True"}:
        time.sleep(1)
        ready = _ready(kubectl, "samples")
    assert len(ready) >= 5 and set(ready.values()) == {"True"}, ready
    # The sample's manual run is a chain, not a lone job: triage → developer → reviewer.
    deadline = time.monotonic() + CHAIN_TIMEOUT_SECONDS
    jobs = _jobs(kubectl, "samples")
    while time.monotonic() < deadline and not _chain_done(jobs):
        time.sleep(1)
        jobs = _jobs(kubectl, "samples")
    assert _chain_done(jobs), jobs
    # Each step ran in a container of the image `up` imported, and ended 0.
    pods = json.loads(
        subprocess.run(
            [*kubectl, "get", "pods", "-n", "samples", "-o", "json"],
            check=True, capture_output=True, text=True,
        ).stdout
    )["items"]  # fmt: skip
    assert len(pods) == len(CHAIN), [p["metadata"]["name"] for p in pods]
    for pod in pods:
        [state] = pod["status"]["containerStatuses"]
        image = f"{operator_image.REGISTRY}/{agent_images.E2E_IMAGE_NAME}:"
        assert state["image"].startswith(image), state
        assert state["imageID"] and state["state"]["terminated"]["exitCode"] == 0, state

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=90) == 0
    assert not workdir.exists(), f"the workdir {workdir} was left behind"
