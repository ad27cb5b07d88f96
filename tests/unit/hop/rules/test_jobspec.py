"""The batch Job and job Secret an AgentJob gets (``agentchain.hop.rules.jobspec``).

Aspects covered:
- the whole Job manifest for a default agent, asserted as one literal: env order
  (SPEC §1 variables first, the agent's own after), the prompt and token only through
  ``secretKeyRef``, the prompt file mounted read-only from the job Secret (prompt key
  only), restrictive pod and container securityContexts, no service links, no account
  token, labels and annotations;
- an AiAgent's image/command/args/envFrom/resources/serviceAccountName and its
  securityContext overrides (merged per key over the defaults);
- ``serviceAccountName: ""`` mounts no token;
- nothing an operator-set variable holds is expanded: ``$`` is doubled, and Kubernetes'
  expansion (``tests/unit/kubelet_env.py``, a faithful copy) gives every value back byte for
  byte, for any text (hypothesis), including a command's ``$(AGENT_PROMPT)``;
- the Secret's data: the whole prompt, ``AGENT_PROMPT``'s copy (the prompt itself up
  to 120 KiB, beyond it a UTF-8-safe head with a marker naming the file), NUL and lone
  surrogates; prompts over the Secret's room fail with ``PromptTooLarge``;
- ``secret_name_of`` finds the Secret a built Job names.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.hop.rules import jobspec
from agentchain.hop.rules.jobspec import JobInputs, PromptTooLarge
from agentchain.models.aiagent import AiAgentSpec
from agentchain.models.conditions import Reason
from agentchain.settings import Settings
from tests.unit import kubelet_env as envs

SETTINGS = Settings(api_url="http://agentchain.test:8080")
SECRET = "fix-1-0123456789abcdef"


def _inputs(agent: dict[str, Any] | None = None, **over: Any) -> JobInputs:
    spec = AiAgentSpec.model_validate({"triggerName": "coder", **(agent or {})})
    fields: dict[str, Any] = {
        "agentjob_name": "fix-1",
        "job_name": "fix-1",
        "namespace": "team-a",
        "agent": spec,
        "chain_id": "c0ffee",
        "secret_name": SECRET,
        "labels": {"labrats.work/chain-id": "c0ffee"},
        "annotations": {"labrats.work/chain-depth": "0"},
    }
    fields.update(over)
    return JobInputs(**fields)


def _secret_env(name: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": SECRET, "key": key}}}


def test_the_whole_job_of_a_default_agent() -> None:
    labels = {
        "labrats.work/chain-id": "c0ffee",
        "labrats.work/agentjob": "fix-1",
        "labrats.work/attempt": "1",
    }
    annotations = {"labrats.work/chain-depth": "0"}
    assert jobspec.build_job(_inputs(), SETTINGS) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "fix-1",
            "namespace": "team-a",
            "labels": {**labels, "app.kubernetes.io/managed-by": "agentchain"},
            "annotations": annotations,
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 3600,
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 10001,
                        "runAsGroup": 10001,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "agent",
                            "image": "ghcr.io/labrats-work/agentchain:latest",
                            "command": ["agentchain", "demo-agent"],
                            "env": [
                                _secret_env("AGENT_PROMPT", "prompt-env"),
                                {
                                    "name": "AGENT_PROMPT_FILE",
                                    "value": "/var/run/agentchain/prompt",
                                },
                                {"name": "AGENT_MODEL", "value": ""},
                                {"name": "AGENT_EFFORT", "value": ""},
                                {"name": "AGENT_JOB", "value": "fix-1"},
                                {"name": "AGENT_ATTEMPT", "value": "1"},
                                {"name": "AGENT_ROLE", "value": "coder"},
                                {"name": "AGENT_CHAIN_ID", "value": "c0ffee"},
                                {"name": "AGENT_NAMESPACE", "value": "team-a"},
                                {"name": "AGENT_API_URL", "value": "http://agentchain.test:8080"},
                                _secret_env("AGENT_TOKEN", "token"),
                            ],
                            "volumeMounts": [
                                {
                                    "name": "agentchain-prompt",
                                    "mountPath": "/var/run/agentchain",
                                    "readOnly": True,
                                }
                            ],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                    "volumes": [
                        {
                            "name": "agentchain-prompt",
                            "secret": {
                                "secretName": SECRET,
                                "items": [{"key": "prompt", "path": "prompt"}],
                                "defaultMode": 0o444,
                            },
                        }
                    ],
                },
            },
        },
    }


def test_an_agent_s_container_settings_and_overrides() -> None:
    agent = {
        "image": "example.com/claude:1",
        "command": ["claude", "-p", "$(AGENT_PROMPT)"],
        "args": ["--model", "$(AGENT_MODEL)"],
        "env": [{"name": "EXTRA", "value": "$(AGENT_JOB)-x"}],
        "envFrom": [{"secretRef": {"name": "anthropic"}}],
        "resources": {"limits": {"cpu": "1"}},
        "serviceAccountName": "agent-sa",
        "timeoutSeconds": 60,
        "terminationGracePeriodSeconds": 12,
        "securityContext": {"readOnlyRootFilesystem": True, "capabilities": {"drop": ["NET_RAW"]}},
        "podSecurityContext": {"runAsUser": 1000, "fsGroup": 1000},
    }
    job = jobspec.build_job(_inputs(agent, attempt=2, job_name="fix-1-a2"), SETTINGS)
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert job["spec"]["activeDeadlineSeconds"] == 60
    assert pod["terminationGracePeriodSeconds"] == 12  # A stop's SIGTERM to SIGKILL.
    assert container["image"] == "example.com/claude:1"
    assert container["command"] == ["claude", "-p", "$(AGENT_PROMPT)"]
    assert container["args"] == ["--model", "$(AGENT_MODEL)"]
    assert container["env"][-1] == {"name": "EXTRA", "value": "$(AGENT_JOB)-x"}  # Not escaped.
    assert container["envFrom"] == [{"secretRef": {"name": "anthropic"}}]
    assert container["resources"] == {"limits": {"cpu": "1"}}
    assert {"name": "AGENT_ATTEMPT", "value": "2"} in container["env"]
    assert pod["serviceAccountName"] == "agent-sa"
    assert pod["automountServiceAccountToken"] is True
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["NET_RAW"]},
        "readOnlyRootFilesystem": True,
    }
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
        "fsGroup": 1000,
    }


def test_an_empty_service_account_name_mounts_no_token() -> None:
    pod = jobspec.build_job(_inputs({"serviceAccountName": ""}), SETTINGS)["spec"]["template"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod["spec"]


# --- nothing is expanded ---------------------------------------------------------------------

HOSTILE = "$(ANTHROPIC_API_KEY) $$ $(AGENT_TOKEN) $ $( $$(X) \\$(Y)"


def _pod_env(inputs: JobInputs, prompt: str, secrets: dict[str, str]) -> envs.Launch:
    """What a container gets, by the kubelet's rules (``tests/unit/kubelet_env.py``)."""
    job = jobspec.build_job(inputs, SETTINGS)
    pod = {"metadata": {"name": "p"}, "spec": job["spec"]["template"]["spec"]}
    data = jobspec.secret_data(prompt, "tok-123")
    encoded = {
        name: {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}
        for name, values in {SECRET: data, "anthropic": secrets}.items()
    }
    return envs.build_launch(pod, pod["spec"]["containers"][0], encoded, {}, {})


def test_a_hostile_prompt_and_names_reach_the_container_unexpanded() -> None:
    agent = {
        "command": ["claude", "-p", "$(AGENT_PROMPT)", "--model", "$(AGENT_MODEL)"],
        "envFrom": [{"secretRef": {"name": "anthropic"}}],
        "defaultModel": "m-$(ANTHROPIC_API_KEY)",
    }
    inputs = _inputs(agent, chain_id="c-$(ANTHROPIC_API_KEY)-$$")
    launch = _pod_env(inputs, HOSTILE, {"ANTHROPIC_API_KEY": "sk-secret"})
    assert launch.env["AGENT_PROMPT"] == HOSTILE
    assert launch.env["AGENT_MODEL"] == "m-$(ANTHROPIC_API_KEY)"
    assert launch.env["AGENT_CHAIN_ID"] == "c-$(ANTHROPIC_API_KEY)-$$"
    assert launch.argv == ["claude", "-p", HOSTILE, "--model", "m-$(ANTHROPIC_API_KEY)"]
    assert "sk-secret" not in "".join(launch.argv) + launch.env["AGENT_PROMPT"]


@given(text=st.text(max_size=200))
def test_any_operator_set_value_arrives_literally(text: str) -> None:
    launch = _pod_env(_inputs({"defaultModel": text}, chain_id=text), "p", {"X": "1"})
    assert launch.env["AGENT_MODEL"] == text
    assert launch.env["AGENT_CHAIN_ID"] == text


@given(text=st.text(max_size=200))
def test_literal_round_trips_through_kubernetes_expansion(text: str) -> None:
    assert envs.expand_with(jobspec.literal(text), {"X": "bad", "AGENT_TOKEN": "bad"}) == text


# --- the Secret's data -------------------------------------------------------------------------


def test_a_prompt_that_fits_is_the_whole_env_value() -> None:
    data = jobspec.secret_data(HOSTILE, "tok")
    assert data == {"token": "tok", "prompt": HOSTILE, "prompt-env": HOSTILE}


def test_a_long_prompt_keeps_a_utf8_safe_head_and_a_marker_in_the_env() -> None:
    prompt = "é" * (jobspec.ENV_PROMPT_MAX_BYTES // 2 + 7)  # Two bytes each: over the limit.
    data = jobspec.secret_data(prompt, "tok")
    assert data["prompt"] == prompt
    env = data["prompt-env"]
    assert len(env.encode()) <= jobspec.ENV_PROMPT_MAX_BYTES < jobspec.MAX_ARG_STRLEN - 64
    head, marker = env.split("\n\n[agentchain: ", 1)
    assert prompt.startswith(head) and len(head) > 50_000
    assert "AGENT_PROMPT_FILE" in marker and jobspec.PROMPT_FILE in marker
    assert str(len(prompt.encode())) in marker


def test_nul_cannot_be_in_the_env_but_stays_in_the_file() -> None:
    data = jobspec.secret_data("a\0b", "tok")
    assert data["prompt"] == "a\0b"
    assert data["prompt-env"] == "a\ufffdb"


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    data = jobspec.secret_data("x\ud800y \U0001f600", "tok")
    assert data["prompt"] == "x\ufffdy \U0001f600"
    data["prompt"].encode()  # Encodable: the Secret can hold it.


def test_the_largest_prompt_fits_a_secret_and_one_more_byte_fails_the_job() -> None:
    largest = "x" * jobspec.PROMPT_MAX_BYTES
    data = jobspec.secret_data(largest, "t" * 64)
    assert sum(len(v.encode()) for v in data.values()) <= jobspec.SECRET_MAX_BYTES
    with pytest.raises(PromptTooLarge, match="bytes") as caught:
        jobspec.secret_data(largest + "x", "tok")
    assert caught.value.reason == Reason.PROMPT_TOO_LARGE
    with pytest.raises(PromptTooLarge):
        jobspec.check_prompt(largest + "x")


def test_secret_name_of_a_built_job() -> None:
    job = jobspec.build_job(_inputs(), SETTINGS)
    assert jobspec.secret_name_of(job) == SECRET
    del job["spec"]["template"]["spec"]["volumes"]
    assert jobspec.secret_name_of(job) is None
