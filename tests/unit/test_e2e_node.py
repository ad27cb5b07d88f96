"""The e2e session's node switch (``AGENTCHAIN_E2E_NODE``) and the e2e agent image's
build inputs (``images/e2e-agent``).

Aspects covered:
- the session's node is the local stand-in unless the switch says ``real``; any other
  value is refused with a message naming the variable;
- an agent's Python is this interpreter on the local node and the image's ``python3``
  when agents run in containers (the real node, or an existing cluster);
- an operator of a cluster on the real node listens on the bridge address and makes the
  session's agent image the default and workspace image; on the local node it listens on
  loopback and leaves the operator's defaults;
- the e2e agent image's dependency and package stages are the top-level Dockerfile's
  word for word (buildah's layer cache shares them), it builds from the slim Python
  image only, runs as the job pods' user, has git, and its context holds the package only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from e2e import chaining, operating
from e2e.controlplane import agent_images, realnode
from e2e.controlplane import realnode_config as config
from e2e.controlplane.cluster import ClusterInfo, HarnessError, node_choice
from e2e.controlplane.operator_image import base_images, context_files, ignore_rules

ROOT = Path(__file__).resolve().parents[2]
E2E_DOCKERFILE = (ROOT / agent_images.E2E_DOCKERFILE).read_text()


@pytest.fixture(autouse=True)
def _no_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGENTCHAIN_E2E_NODE", "AGENTCHAIN_E2E_KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENTCHAIN_E2E_USE_KUBECONFIG", "0")


def _info(tmp_path: Path, *, real: bool, image: str = "") -> ClusterInfo:
    node = realnode.RealNode(
        config.NODE_NAME, config.Network(), config.NodePaths(tmp_path), "pause", "test"
    )
    return ClusterInfo(
        tmp_path / "kubeconfig", "https://127.0.0.1:1", "redis://127.0.0.1:1/0", tmp_path,
        local=True, bin_dir=None, real_node=node if real else None, agent_image=image,
    )  # fmt: skip


def test_the_session_node_is_local_unless_the_switch_says_real(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert node_choice() == "local"
    monkeypatch.setenv("AGENTCHAIN_E2E_NODE", "real")
    assert node_choice() == "real"


def test_a_misspelt_node_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCHAIN_E2E_NODE", "kind")
    with pytest.raises(HarnessError, match="AGENTCHAIN_E2E_NODE must be 'local' or 'real'"):
        node_choice()


def test_an_agents_python_is_the_images_when_agents_run_in_containers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert chaining.python_command("print(1)") == [sys.executable, "-c", "print(1)"]
    monkeypatch.setenv("AGENTCHAIN_E2E_NODE", "real")
    assert chaining.python_command("print(1)", "x") == ["python3", "-c", "print(1)", "x"]
    monkeypatch.delenv("AGENTCHAIN_E2E_NODE")
    monkeypatch.setenv("AGENTCHAIN_E2E_KUBECONFIG", "/somewhere/kubeconfig")
    assert chaining.agent_python() == "python3"


def test_an_operator_on_the_real_node_listens_on_the_bridge_with_the_agent_image(
    tmp_path: Path,
) -> None:
    info = _info(tmp_path, real=True, image="agentchain.local/agentchain-e2e-agent:k")
    op = operating.OperatorProcess(info, tmp_path / "operator.kubeconfig")
    env = op.env()
    assert op.host == config.Network().gateway != "127.0.0.1"
    assert env["AGENTCHAIN_LISTEN_HOST"] == op.host
    assert env["AGENTCHAIN_API_URL"] == f"http://{op.host}:{op.port}"
    assert env["AGENTCHAIN_DEFAULT_IMAGE"] == "agentchain.local/agentchain-e2e-agent:k"
    assert env["AGENTCHAIN_WORKSPACE_IMAGE"] == "agentchain.local/agentchain-e2e-agent:k"
    # A test's own settings still win.
    own = operating.OperatorProcess(
        info, tmp_path / "k", extra_env={"AGENTCHAIN_WORKSPACE_IMAGE": "mine"}, host="10.9.9.9"
    )
    assert own.host == "10.9.9.9"
    assert own.env()["AGENTCHAIN_WORKSPACE_IMAGE"] == "mine"


def test_an_operator_on_the_local_node_keeps_loopback_and_the_default_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTCHAIN_DEFAULT_IMAGE", raising=False)
    monkeypatch.delenv("AGENTCHAIN_WORKSPACE_IMAGE", raising=False)
    op = operating.OperatorProcess(_info(tmp_path, real=False), tmp_path / "operator.kubeconfig")
    env = op.env()
    assert op.host == "127.0.0.1"
    assert "AGENTCHAIN_DEFAULT_IMAGE" not in env
    assert "AGENTCHAIN_WORKSPACE_IMAGE" not in env


def _stages(dockerfile: str) -> list[list[str]]:
    """Each stage's instructions, continuation lines joined, comments and blanks dropped."""
    stages: list[list[str]] = [[]]
    pending = ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line, pending = pending + line, ""
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_the_dependency_and_package_stages_are_the_operator_images() -> None:
    ours, product = _stages(E2E_DOCKERFILE), _stages((ROOT / "Dockerfile").read_text())
    assert ours[0] == product[0]  # ARG PYTHON_IMAGE
    assert ours[1:3] == product[1:3]  # deps, builder
    assert len(ours) == 4


def test_the_e2e_agent_image_builds_from_slim_python_as_the_job_pods_user_with_git() -> None:
    assert set(base_images(E2E_DOCKERFILE)) == {"python:3.11-slim"}
    final = _stages(E2E_DOCKERFILE)[-1]
    assert "USER 10001:10001" in final
    assert "ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp" in final
    [install] = [line for line in final if "apt-get install" in line]
    assert " git " in f"{install} "


def test_the_e2e_agent_images_context_holds_the_package_only(tmp_path: Path) -> None:
    ignore = (ROOT / f"{agent_images.E2E_DOCKERFILE}.dockerignore").read_text()
    for path in ("pyproject.toml", "README.md", "operator/agentchain/x.py", "e2e/conftest.py",
                 "images/versions.env", "operator/agentchain/__pycache__/x.pyc"):  # fmt: skip
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert context_files(tmp_path, ignore_rules(ignore)) == [
        "README.md",
        "operator/agentchain/x.py",
        "pyproject.toml",
    ]
