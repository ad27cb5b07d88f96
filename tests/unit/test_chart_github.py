"""The chart's GitHub App values (issue 17), rendered with the real helm.

Aspects covered:
* without an App nothing is mounted and the App id is empty (the operator runs as
  before, writing nothing back);
* ``github.privateKey`` becomes a chart-owned Secret, mounted read-only and named by
  ``AGENTCHAIN_GITHUB_PRIVATE_KEY_FILE``; the key never appears in the pod spec;
* ``github.existingSecret`` mounts that Secret instead and renders none;
* the API URL (GitHub Enterprise Server), dashboard URL, delay and check name reach
  their variables; the values schema refuses an App id that is not a number.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from e2e import charting

PEM = "-----BEGIN PRIVATE KEY-----\nMIIfake\n-----END PRIVATE KEY-----\n"

pytestmark = pytest.mark.skipif(charting.helm_binary() is None, reason="helm cannot be built")


def _operator(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = charting.only(manifests, "Deployment", "agentchain")["spec"]
    return dict(spec["template"]["spec"])


def _env(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in _operator(manifests)["containers"][0]["env"]}


def _github_volume(manifests: list[dict[str, Any]]) -> dict[str, Any] | None:
    volumes = _operator(manifests)["volumes"]
    return next((v for v in volumes if v["name"] == "github-app"), None)


def test_no_app_by_default() -> None:
    manifests = charting.render()
    env = _env(manifests)
    assert env["AGENTCHAIN_GITHUB_APP_ID"] == ""
    assert env["AGENTCHAIN_GITHUB_API_URL"] == "https://api.github.com"
    assert _github_volume(manifests) is None
    assert not [m for m in manifests if m["metadata"]["name"] == "agentchain-github"]


def test_private_key_value_becomes_a_mounted_secret() -> None:
    manifests = charting.render("github.appId=123456", f"github.privateKey={PEM}")
    secret = charting.only(manifests, "Secret", "agentchain-github")
    assert secret["stringData"] == {"private-key.pem": PEM}
    volume = _github_volume(manifests)
    assert volume is not None and volume["secret"]["secretName"] == "agentchain-github"
    env = _env(manifests)
    assert env["AGENTCHAIN_GITHUB_APP_ID"] == "123456"
    assert env["AGENTCHAIN_GITHUB_PRIVATE_KEY_FILE"] == "/etc/agentchain/github/private-key.pem"
    mounts = _operator(manifests)["containers"][0]["volumeMounts"]
    assert {"name": "github-app", "mountPath": "/etc/agentchain/github", "readOnly": True} in mounts
    pod_spec = yaml.safe_dump(_operator(manifests))
    assert "MIIfake" not in pod_spec


def test_existing_secret_is_mounted_instead() -> None:
    manifests = charting.render(
        "github.appId=7",
        "github.existingSecret=my-app",
        "github.existingSecretKey=app.pem",
        "github.apiUrl=https://ghe.example.com/api/v3",
        "github.dashboardUrl=https://agentchain.example.com",
        "github.writebackDelaySeconds=5",
        "github.checkName=agents",
        "github.appSlug=acme-agents",
    )
    assert not [m for m in manifests if m["metadata"]["name"] == "agentchain-github"]
    volume = _github_volume(manifests)
    assert volume is not None and volume["secret"]["secretName"] == "my-app"
    env = _env(manifests)
    assert env["AGENTCHAIN_GITHUB_PRIVATE_KEY_FILE"] == "/etc/agentchain/github/app.pem"
    assert env["AGENTCHAIN_GITHUB_API_URL"] == "https://ghe.example.com/api/v3"
    assert env["AGENTCHAIN_GITHUB_DASHBOARD_URL"] == "https://agentchain.example.com"
    assert env["AGENTCHAIN_GITHUB_WRITEBACK_DELAY_SECONDS"] == "5"
    assert env["AGENTCHAIN_GITHUB_CHECK_NAME"] == "agents"
    assert env["AGENTCHAIN_GITHUB_APP_SLUG"] == "acme-agents"


def test_app_id_must_be_a_number() -> None:
    result = charting.helm(
        "template", "x", str(charting.CHART), "--set-string", "github.appId=abc", check=False
    )
    assert result.returncode != 0
