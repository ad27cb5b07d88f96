"""Build the batch Job for an AgentJob: a pure function of its inputs.

Like dask-kubernetes' ``build_*_spec()``: no API calls here, so the whole
manifest can be asserted in unit tests, and the caller only adds ownership and
creates it (AlreadyExists meaning it was already done).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentchain import models
from agentchain.models.aiagent import AiAgentSpec
from agentchain.settings import Settings

CONTAINER_NAME = "agent"
TOKEN_SECRET_KEY = "token"


@dataclass(frozen=True)
class JobInputs:
    agentjob_name: str
    job_name: str
    namespace: str
    agent: AiAgentSpec
    prompt: str
    chain_id: str
    token_secret: str | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    attempt: int = 1


def agent_env(inputs: JobInputs, settings: Settings) -> list[dict[str, Any]]:
    """SPEC §1 variables first, so the agent's own env may refer to them as $(VAR)."""
    agent = inputs.agent
    env: list[dict[str, Any]] = [
        {"name": "AGENT_PROMPT", "value": inputs.prompt},
        {"name": "AGENT_MODEL", "value": agent.default_model or ""},
        {"name": "AGENT_EFFORT", "value": agent.default_effort or ""},
        {"name": "AGENT_JOB", "value": inputs.agentjob_name},
        {"name": "AGENT_ATTEMPT", "value": str(inputs.attempt)},
        {"name": "AGENT_ROLE", "value": agent.trigger_name},
        {"name": "AGENT_CHAIN_ID", "value": inputs.chain_id},
        {"name": "AGENT_NAMESPACE", "value": inputs.namespace},
        {"name": "AGENT_API_URL", "value": settings.api_url},
    ]
    if inputs.token_secret:
        ref = {"name": inputs.token_secret, "key": TOKEN_SECRET_KEY}
        env.append({"name": "AGENT_TOKEN", "valueFrom": {"secretKeyRef": ref}})
    return env + list(agent.env or [])


def build_job(inputs: JobInputs, settings: Settings) -> dict[str, Any]:
    agent = inputs.agent
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": agent.image or settings.default_image,
        "command": list(agent.command or settings.default_command),
        "env": agent_env(inputs, settings),
    }
    if agent.args is not None:
        container["args"] = list(agent.args)
    if agent.env_from:
        container["envFrom"] = list(agent.env_from)
    if agent.resources:
        container["resources"] = dict(agent.resources)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        # Agents get no API credentials unless their AiAgent names an account.
        "automountServiceAccountToken": agent.service_account_name is not None,
    }
    if agent.service_account_name:
        pod_spec["serviceAccountName"] = agent.service_account_name
    labels = {
        **inputs.labels,
        models.AGENTJOB_LABEL: inputs.agentjob_name,
        models.ATTEMPT_LABEL: str(inputs.attempt),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": inputs.job_name,
            "namespace": inputs.namespace,
            "labels": {**labels, models.MANAGED_BY: "agentchain"},
            "annotations": dict(inputs.annotations),
        },
        "spec": {
            # Retries are the operator's (a new Job per attempt, see naming.attempt_job_name).
            "backoffLimit": 0,
            "activeDeadlineSeconds": agent.timeout_seconds or settings.default_timeout_seconds,
            "template": {
                "metadata": {"labels": labels, "annotations": dict(inputs.annotations)},
                "spec": pod_spec,
            },
        },
    }
