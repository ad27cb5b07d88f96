"""Rendering the Helm chart for tests: the helm binary, ``helm template``, parsed output.

helm is built from the Go module proxy by ``build-binaries.sh`` like the control-plane
binaries and cached per machine, so the chart tests need no helm on the PATH.  When it
cannot be built (no Go toolchain, no network) ``helm_binary`` returns None and the
callers skip, saying why.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "agentchain"
BUILD_SCRIPT = ROOT / "e2e" / "controlplane" / "build-binaries.sh"
RELEASE = "agentchain"
NAMESPACE = "agentchain-system"
BUILD_TIMEOUT_SECONDS = 1800


@functools.cache
def helm_binary() -> Path | None:
    """The cached helm binary, built on first use; None if it cannot be built."""
    try:
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT), "helm"],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        return None
    dirs = lines[-1].split(":")
    helm = Path(dirs[-1]) / "helm"
    return helm if helm.is_file() else None


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = helm_binary()
    if binary is None:
        raise RuntimeError("helm could not be built")
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=120, check=check
    )


def template_text(*sets: str, namespace: str = NAMESPACE) -> str:
    """``helm template`` output; each item of ``sets`` is one ``--set`` argument."""
    argv = ["template", RELEASE, str(CHART), "--namespace", namespace]
    for item in sets:
        argv += ["--set", item]
    return helm(*argv).stdout


def render(*sets: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The rendered manifests, parsed, without empty documents."""
    docs = yaml.safe_load_all(template_text(*sets, namespace=namespace))
    return [d for d in docs if d]


def only(manifests: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one manifest of ``kind`` (and ``name``), failing clearly if not exactly one."""
    found = [
        m
        for m in manifests
        if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
