"""The generated CRDs on a real API server: samples apply, bad manifests are refused clearly.

Aspects covered (issue 3, "Done when", SPEC §1):
* ``crds/`` applies and both CRDs become Established (so the schemas are structural and
  their defaults valid: the API server refuses anything else);
* seed 003's manifests (``config/samples/seed-003/``) apply unchanged, and come back with
  the schema's defaults filled in and still parse with the models;
* ``kubectl apply -f config/samples/`` applies the working set into one namespace (no
  sample names a namespace; issue 15);
* ``condition: sometimes``, a missing ``triggerName`` and a workspace ``keepFor`` that is
  no duration (issue 18) are refused with the API server's
  human-readable messages, asserted word for word, and nothing is created (for a type,
  enum or required error the API server adds that it skipped the CEL rules);
* each ``spec.runtime`` rule (a CEL rule or a field's own) is refused with its own
  message; a runtime and a manifest without one apply;
* ``kubectl get`` shows the printer columns, reading the status subresource, and the short
  names and the ``ai`` category resolve.

Namespaced samples go into the test's namespace; the one sample that names ``ai-agents``
goes there (created if absent, removed again if this test created it).  The CRDs stay
installed: other tests need them, and deleting a CRD deletes every object of its kind.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentchain.models import aiagent
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

ROOT = Path(__file__).resolve().parents[1]
CRDS = ROOT / "crds"
SAMPLES = ROOT / "config" / "samples"
SEED_SAMPLES = SAMPLES / "seed-003"
TRIAGE = SEED_SAMPLES / "triage.yaml"
SEED_NAMESPACE = "ai-agents"


@pytest.fixture
def crds(cluster_info: ClusterInfo) -> ClusterInfo:
    cluster_info.kubectl("apply", "-f", str(CRDS))
    operating.wait_established(cluster_info)
    return cluster_info


@pytest.fixture
def seed_namespace(crds: ClusterInfo) -> Iterator[str]:
    """``ai-agents``, which seed 003's first example names; removed if created here."""
    existed = crds.kubectl("get", "namespace", SEED_NAMESPACE, check=False).returncode == 0
    if not existed:
        crds.kubectl("create", "namespace", SEED_NAMESPACE)
    yield SEED_NAMESPACE
    crds.kubectl("delete", "-f", str(TRIAGE), "--ignore-not-found", "--wait=false")
    if not existed:
        crds.kubectl("delete", "namespace", SEED_NAMESPACE, "--wait=false")


def namespaced_samples() -> list[Path]:
    """The working set: what ``kubectl apply -f config/samples/`` applies."""
    return sorted(SAMPLES.glob("*.yaml"))


def seed_samples() -> list[Path]:
    """Seed 003's manifests as written there, all but the one that names its namespace."""
    return sorted(p for p in SEED_SAMPLES.glob("*.yaml") if p != TRIAGE)


def get_json(kube: ClusterInfo, *args: str) -> Any:
    return json.loads(kube.kubectl("get", *args, "-o", "json").stdout)


def table(kube: ClusterInfo, *args: str) -> list[list[str]]:
    """``kubectl get`` output as rows of cells (cells here never contain spaces)."""
    return [line.split() for line in kube.kubectl("get", *args).stdout.splitlines()]


def test_seed_samples_apply_unchanged(
    crds: ClusterInfo, namespace: str, seed_namespace: str
) -> None:
    applied = crds.kubectl("apply", "-f", str(TRIAGE)).stdout
    for sample in seed_samples():
        applied += crds.kubectl("apply", "-n", namespace, "-f", str(sample)).stdout
    assert sorted(applied.splitlines()) == [
        "aiagent.labrats.work/developer created",
        "aiagent.labrats.work/issue-triage created",
        "aiagent.labrats.work/primary-agent created",
        "aiagent.labrats.work/reviewer created",
        "aiagent.labrats.work/triage created",
    ]
    triage = get_json(crds, "aiagent", "triage", "-n", seed_namespace)
    assert triage["spec"]["eventTriggers"][0]["next"]["failurePolicy"] == "stop"


def test_working_samples_apply_together_into_one_namespace(
    crds: ClusterInfo, namespace: str
) -> None:
    applied = crds.kubectl("apply", "-n", namespace, "-f", str(SAMPLES)).stdout
    assert sorted(applied.splitlines()) == [
        "agentjob.labrats.work/triage-manual-run created",
        "aiagent.labrats.work/developer created",
        "aiagent.labrats.work/escalation created",
        "aiagent.labrats.work/issue-triage created",
        "aiagent.labrats.work/primary-agent created",
        "aiagent.labrats.work/reviewer created",
        "aiagent.labrats.work/workspace-developer created",
    ]


def test_defaults_are_filled_in_and_the_model_reads_them(crds: ClusterInfo, namespace: str) -> None:
    crds.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        str(SAMPLES / "labrats.work_v1alpha1_aiagent_issue-fix-review.yaml"),
    )
    stored = get_json(crds, "aiagent", "developer", "-n", namespace)
    assert stored["spec"]["enabled"] is True
    assert stored["spec"]["eventTriggers"][0]["next"] == {
        "agentTriggerName": "ai-reviewer",
        "condition": "on-success",
        "failurePolicy": "stop",
        "contextWindow": "tail",
    }
    agent = aiagent.AiAgent.model_validate(stored)
    assert agent.manual_next() == aiagent.ChainStep(agent_trigger_name="ai-reviewer")


@pytest.mark.parametrize(
    ("filename", "message"),
    [
        (
            "aiagent_condition-sometimes.yaml",
            # The error itself; the API server adds that it skipped the CEL rules then.
            'spec.eventTriggers[0].next.condition: Unsupported value: "sometimes": '
            'supported values: "always", "on-success", "on-failure"',
        ),
        (
            "aiagent_missing-triggername.yaml",
            "spec.triggerName: Required value",
        ),
        (
            "aiagent_workspace-keepfor.yaml",
            'The AiAgent "invalid-workspace" is invalid: spec.workspace.keepFor: Invalid value: '
            "\"forever\": spec.workspace.keepFor in body should match '^(0|([0-9]+(s|m|h|d))+)$'",
        ),
    ],
)
def test_invalid_manifest_is_refused_with_a_clear_message(
    crds: ClusterInfo, namespace: str, filename: str, message: str
) -> None:
    refused = crds.kubectl(
        "apply", "-n", namespace, "-f", str(SAMPLES / "invalid" / filename), check=False
    )
    assert refused.returncode != 0
    assert message in refused.stderr
    assert refused.stderr.startswith('The AiAgent "invalid-'), refused.stderr
    assert get_json(crds, "aiagents", "-n", namespace)["items"] == []


# The samples' job would run under the session operator and spawn children, and the
# table below must show exactly the status this test writes.
@pytest.mark.usefixtures("operator_paused")
def test_printer_columns_short_names_and_category(crds: ClusterInfo, namespace: str) -> None:
    for sample in namespaced_samples():
        crds.kubectl("apply", "-n", namespace, "-f", str(sample))
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "AgentReady",
        "message": "ok",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }
    patch_status(crds, namespace, "aiagent/developer", {"conditions": [ready]})
    patch_status(
        crds,
        namespace,
        "agentjob/triage-manual-run",
        {
            "phase": "Failed",
            "chainId": "chain-1",
            "chainDepth": 1,
            "parentJobId": "job-0",
            "exitCode": 3,
            "reason": "ContainerFailed",
        },
    )

    agents = table(crds, "aia", "-n", namespace)
    assert agents[0] == ["NAME", "TRIGGER", "ENABLED", "READY", "AGE"]
    assert ["developer", "ai-developer", "true", "True"] in [row[:4] for row in agents]
    jobs = table(crds, "aj", "-n", namespace)
    assert jobs[0] == ["NAME", "AGENT", "PHASE", "CHAIN", "DEPTH", "PARENT", "EXIT", "AGE"]
    assert jobs[1][:7] == ["triage-manual-run", "ai-triage", "Failed", "chain-1", "1", "job-0", "3"]
    wide = table(crds, "aj", "-n", namespace, "-o", "wide")
    assert wide[0][-1] == "REASON" and wide[1][-1] == "ContainerFailed"
    listed = crds.kubectl("get", "ai", "-n", namespace, "-o", "name").stdout.split()
    assert "agentjob.labrats.work/triage-manual-run" in listed
    assert "aiagent.labrats.work/developer" in listed


def patch_status(kube: ClusterInfo, namespace: str, name: str, status: dict[str, Any]) -> None:
    kube.kubectl(
        "patch",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


# --- spec.runtime: each rule refused with its own message ----------------------------------

CLAUDE = {"type": "claude-code"}
SECRET_REF = {"secretKeyRef": {"name": "s", "key": "k"}}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"runtime": {"type": "command", "maxTurns": 3}},
            'spec.runtime: Invalid value: "object": type command runs spec.command as it is: '
            "maxTurns, allowedTools, instructions, credentials, baseUrl and mcpServers need an "
            "agent CLI type (claude-code, codex, gemini or opencode)",
        ),
        (
            {"runtime": {"type": "codex", "maxTurns": 3}},
            "codex has no turn limit: remove maxTurns",
        ),
        (
            {"runtime": {"type": "codex", "allowedTools": ["Read"]}},
            "codex has no tool allow-list: remove allowedTools",
        ),
        (
            {
                "runtime": {
                    "type": "codex",
                    "credentials": {"secretName": "s", "key": "k", "kind": "oauthToken"},
                }
            },
            "credentials kind oauthToken is for type claude-code only",
        ),
        (
            {
                "runtime": {
                    **CLAUDE,
                    "instructions": {"text": "x", "configMapRef": {"name": "c", "key": "k"}},
                }
            },
            'spec.runtime.instructions: Invalid value: "object": give either text or configMapRef',
        ),
        (
            {
                "runtime": {
                    **CLAUDE,
                    "mcpServers": [
                        {
                            "name": "t",
                            "command": "t",
                            "env": [{"name": "T", "value": "v", "valueFrom": SECRET_REF}],
                        }
                    ],
                }
            },
            'spec.runtime.mcpServers[0].env[0]: Invalid value: "object": give either value '
            "or valueFrom",
        ),
        (
            {
                "runtime": {
                    **CLAUDE,
                    "mcpServers": [
                        {
                            "name": "t",
                            "command": "t",
                            "env": [{"name": "AGENT_TOKEN", "value": "v"}],
                        }
                    ],
                }
            },
            "AGENT_ and AGENTCHAIN_ variables are the operator's",
        ),
        (
            {"runtime": {**CLAUDE, "mcpServers": [{"name": "agentchain", "command": "x"}]}},
            "the name agentchain is the operator's own server",
        ),
        (
            {
                "runtime": {
                    **CLAUDE,
                    "mcpServers": [{"name": "t", "command": "a"}, {"name": "t", "command": "b"}],
                }
            },
            'spec.runtime.mcpServers[1]: Duplicate value: {"name":"t"}',
        ),
        (
            {"command": ["my-agent"], "runtime": CLAUDE},
            'spec: Invalid value: "object": spec.runtime runs the agent CLI through agentchain '
            "agent run: remove spec.command and spec.args, or use runtime type command",
        ),
        (
            {"runtime": {"type": "cursor"}},
            'spec.runtime.type: Unsupported value: "cursor": supported values: "command", '
            '"claude-code", "codex", "gemini", "opencode"',
        ),
        (
            {"runtime": {**CLAUDE, "baseUrl": "models.svc:8000"}},
            'spec.runtime.baseUrl: Invalid value: "models.svc:8000"',
        ),
    ],
)
def test_an_invalid_runtime_is_refused_with_its_own_message(
    crds: ClusterInfo, namespace: str, spec: dict[str, Any], message: str
) -> None:
    manifest = json.dumps(chaining.ai_agent("runtime-invalid", **spec))
    refused = crds.kubectl("apply", "-n", namespace, "-f", "-", input=manifest, check=False)
    assert refused.returncode != 0
    assert message in refused.stderr, refused.stderr
    assert get_json(crds, "aiagents", "-n", namespace)["items"] == []


def test_a_runtime_applies_and_reads_back_with_its_defaults(
    crds: ClusterInfo, namespace: str
) -> None:
    runtime = {
        "type": "claude-code",
        "maxTurns": 5,
        "credentials": {"secretName": "anthropic", "key": "api-key"},
        "instructions": {"text": "Keep $(AGENT_TOKEN) out of it."},
        "mcpServers": [
            {
                "name": "tracker",
                "command": "tracker-mcp",
                "env": [{"name": "T", "valueFrom": SECRET_REF}],
            }
        ],
    }
    crds.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(chaining.ai_agent("runtime-ok", runtime=runtime)),
    )
    stored = get_json(crds, "aiagent", "runtime-ok", "-n", namespace)["spec"]["runtime"]
    assert stored["mcp"] is True and stored["credentials"]["kind"] == "apiKey"
    agent = aiagent.AiAgentSpec.model_validate(
        get_json(crds, "aiagent", "runtime-ok", "-n", namespace)["spec"]
    )
    assert agent.runtime is not None and agent.runtime.max_turns == 5
    # A manifest without runtime still applies unchanged (no runtime added).
    crds.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(chaining.ai_agent("plain")))
    assert "runtime" not in get_json(crds, "aiagent", "plain", "-n", namespace)["spec"]
