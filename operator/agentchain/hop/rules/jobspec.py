"""Build the batch Job for an AgentJob, and its Secret's data: pure functions of their inputs.

Like dask-kubernetes' ``build_*_spec()``: no API calls here, so the whole
manifest can be asserted in unit tests, and the caller only adds ownership and
creates it (AlreadyExists meaning it was already done).

**Nothing the operator puts in the pod is ever expanded.** Kubernetes expands
``$(NAME)`` in ``env[].value`` (and turns ``$$`` into ``$``) against the variables
defined before it, ``envFrom`` Secrets first; ``valueFrom`` values are taken
verbatim.  So the prompt, which carries issue text and agent output, never travels
as a ``value``: it is written into the job's own Secret and reaches the container
as ``AGENT_PROMPT`` through ``secretKeyRef`` and as a read-only file
(``AGENT_PROMPT_FILE``) from a volume of that Secret.  The other variables the
operator sets are plain values with every ``$`` doubled, so whatever they hold
arrives literally.  A command's ``$(AGENT_PROMPT)`` is expanded once from the
variable's value, and the value is not scanned again.

**Runtimes.** An AiAgent whose ``spec.runtime`` names an agent CLI (claude-code, codex)
gets the runtime's image, the runner's command and its variables from
``runtimecontainers.container_for``, after SPEC §1's and before the AiAgent's own ``env``;
one the runner cannot run yet raises ``runtimecontainers.RuntimeUnsupported``.

**Size.** Linux refuses to exec a process when one argv or environment string is
over 128 KiB (MAX_ARG_STRLEN), and a Secret holds at most 1 MiB.  The file always
holds the whole prompt; ``AGENT_PROMPT`` holds it too when it fits in
:data:`ENV_PROMPT_MAX_BYTES`, otherwise its head and a visible marker naming the
file.  A prompt over :data:`PROMPT_MAX_BYTES` cannot be delivered at all and fails
the job (:class:`PromptTooLarge`).  The Job itself never depends on the prompt:
both keys are always there, so a Job from an earlier (crashed) run fits any Secret.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from agentchain import models
from agentchain.github.rules import githubscope
from agentchain.models.aiagent import AiAgentSpec
from agentchain.models.conditions import Reason
from agentchain.prompts.rules.assembly import PromptRenderError
from agentchain.runtimes.rules import runtimecontainers
from agentchain.settings import Settings
from agentchain.workspaces.rules import jobmounts

CONTAINER_NAME = "agent"
TOKEN_SECRET_KEY = "token"
PROMPT_KEY = "prompt"
"""The whole prompt, byte for byte: the file at :data:`PROMPT_FILE`."""
PROMPT_ENV_KEY = "prompt-env"
"""``AGENT_PROMPT``: the prompt, or its head and a marker when it is too long for one."""
PROMPT_VOLUME = "agentchain-prompt"
PROMPT_DIR = "/var/run/agentchain"
PROMPT_FILE = f"{PROMPT_DIR}/{PROMPT_KEY}"

MAX_ARG_STRLEN = 128 * 1024
ENV_PROMPT_MAX_BYTES = 120 * 1024
"""Under MAX_ARG_STRLEN with room for ``AGENT_PROMPT=`` or an argument's own prefix."""
SECRET_MAX_BYTES = 1024 * 1024
"""The API server refuses a Secret whose data adds up to more."""
PROMPT_MAX_BYTES = SECRET_MAX_BYTES - ENV_PROMPT_MAX_BYTES - 4 * 1024
"""The whole prompt, its head for the env variable and the token must fit one Secret."""

DEFAULT_POD_SECURITY_CONTEXT: Mapping[str, Any] = {
    "runAsNonRoot": True,
    # A numeric user, so runAsNonRoot holds for any image (the operator's own is 10001).
    "runAsUser": 10001,
    "runAsGroup": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}
DEFAULT_SECURITY_CONTEXT: Mapping[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
"""With the pod's defaults, what PodSecurity ``restricted`` requires of a container."""


class PromptTooLarge(PromptRenderError):
    """The built prompt is too large for the job's Secret."""

    reason: ClassVar[str] = Reason.PROMPT_TOO_LARGE


@dataclass(frozen=True)
class JobInputs:
    agentjob_name: str
    job_name: str
    namespace: str
    agent: AiAgentSpec
    chain_id: str
    secret_name: str
    """The job's own Secret (token and prompt); see ``naming.job_secret_name``."""
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    attempt: int = 1
    workspace: jobmounts.Mounting | None = None
    """The chain's workspace, when the job mounts one (``workspaces/rules/jobmounts.py``)."""
    trace_env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The job's trace context (``TRACEPARENT``, the OTLP endpoint) when the operator
    traces (``traces/rules/spans.agent_env``): derived from the job's name and chain, so
    a Job built again after a crash is the same Job."""


def literal(value: str) -> str:
    """``value`` escaped so that Kubernetes' ``$(VAR)`` expansion gives it back unchanged."""
    return value.replace("$", "$$")


def utf8(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone surrogate (from JSON's ``\\ud800``) becomes
    U+FFFD, as the API server's own JSON decoding would make it."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def check_prompt(prompt: str) -> None:
    """Raise :class:`PromptTooLarge` when ``prompt`` cannot go into the job's Secret."""
    size = len(utf8(prompt).encode())
    if size > PROMPT_MAX_BYTES:
        raise PromptTooLarge(
            f"The prompt is {size} bytes; at most {PROMPT_MAX_BYTES} fit the job's Secret."
        )


def env_prompt(prompt: str) -> str:
    """What ``AGENT_PROMPT`` holds: the prompt, or its head and a marker naming the file.

    NUL cannot be in an environment string, so it becomes U+FFFD here (the file
    keeps it).
    """
    text = utf8(prompt).replace("\0", "\ufffd")
    raw = text.encode()
    if len(raw) <= ENV_PROMPT_MAX_BYTES:
        return text
    marker = (
        f"\n\n[agentchain: the prompt is {len(raw)} bytes, too long for one environment "
        f"variable; this is its beginning. The whole prompt is in the file named by "
        f"AGENT_PROMPT_FILE ({PROMPT_FILE}).]\n"
    )
    head = raw[: ENV_PROMPT_MAX_BYTES - len(marker.encode())]
    # Never split a UTF-8 character: "ignore" drops only a cut sequence at the end.
    return head.decode("utf-8", "ignore") + marker


def secret_data(prompt: str, token: str) -> dict[str, str]:
    """The job Secret's data: its token, the whole prompt and the env variable's copy."""
    check_prompt(prompt)
    prompt = utf8(prompt)
    return {TOKEN_SECRET_KEY: token, PROMPT_KEY: prompt, PROMPT_ENV_KEY: env_prompt(prompt)}


def workspace_of(job: Mapping[str, Any]) -> str | None:
    """The workspace claim a batch Job (built here) mounts, if any."""
    for volume in job["spec"]["template"]["spec"].get("volumes") or []:
        if volume.get("name") == jobmounts.WORKSPACE_VOLUME:
            return str(volume["persistentVolumeClaim"]["claimName"])
    return None


def secret_name_of(job: Mapping[str, Any]) -> str | None:
    """The job Secret a batch Job (built here, possibly by an earlier run) refers to."""
    for volume in job["spec"]["template"]["spec"].get("volumes") or []:
        if volume.get("name") == PROMPT_VOLUME:
            return str(volume["secret"]["secretName"])
    return None


def _secret_ref(inputs: JobInputs, key: str) -> dict[str, Any]:
    return {"valueFrom": {"secretKeyRef": {"name": inputs.secret_name, "key": key}}}


def agent_env(
    inputs: JobInputs, settings: Settings, runtime: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """SPEC §1 variables first, so the agent's own env may refer to them as $(VAR); then
    the runtime's (``agentruntime``), then the AiAgent's own ``env``."""
    agent = inputs.agent
    plain = {
        "AGENT_PROMPT_FILE": PROMPT_FILE,
        "AGENT_MODEL": agent.default_model or "",
        "AGENT_EFFORT": agent.default_effort or "",
        "AGENT_JOB": inputs.agentjob_name,
        "AGENT_ATTEMPT": str(inputs.attempt),
        "AGENT_ROLE": agent.trigger_name,
        "AGENT_CHAIN_ID": inputs.chain_id,
        "AGENT_NAMESPACE": inputs.namespace,
        "AGENT_API_URL": settings.api_url,
        **inputs.trace_env,
    }
    env: list[dict[str, Any]] = [{"name": "AGENT_PROMPT", **_secret_ref(inputs, PROMPT_ENV_KEY)}]
    env += [{"name": name, "value": literal(value)} for name, value in plain.items()]
    env.append({"name": "AGENT_TOKEN", **_secret_ref(inputs, TOKEN_SECRET_KEY)})
    env += githubscope.job_env(agent.github, inputs.secret_name, settings.github_api_url)
    return env + list(runtime or []) + list(agent.env or [])


def _container(inputs: JobInputs, settings: Settings) -> dict[str, Any]:
    """The agent container; with a runner runtime its image, command and variables are
    the runtime's (raises ``RuntimeUnsupported`` for a type the runner cannot run)."""
    agent = inputs.agent
    runtime = runtimecontainers.container_for(agent, settings)
    image = runtime.image if runtime else agent.image or settings.default_image
    command = runtime.command if runtime else list(agent.command or settings.default_command)
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": image,
        "command": command,
        "env": agent_env(inputs, settings, runtime.env if runtime else None),
        "volumeMounts": [{"name": PROMPT_VOLUME, "mountPath": PROMPT_DIR, "readOnly": True}],
        "securityContext": {**DEFAULT_SECURITY_CONTEXT, **(agent.security_context or {})},
    }
    if agent.args is not None and runtime is None:
        container["args"] = list(agent.args)
    if agent.env_from:
        container["envFrom"] = list(agent.env_from)
    if agent.resources:
        container["resources"] = dict(agent.resources)
    return container


def _pod_spec(inputs: JobInputs, settings: Settings) -> dict[str, Any]:
    agent = inputs.agent
    # "" names no account: it must not mount the namespace default's token either.
    account = agent.service_account_name or None
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [_container(inputs, settings)],
        # Agents get no API credentials unless their AiAgent names an account.
        "automountServiceAccountToken": account is not None,
        # Nor the environment variables of every Service in the namespace.
        "enableServiceLinks": False,
        "securityContext": {**DEFAULT_POD_SECURITY_CONTEXT, **(agent.pod_security_context or {})},
        "volumes": [
            {
                "name": PROMPT_VOLUME,
                # Only the prompt: the token reaches the container as AGENT_TOKEN alone.
                "secret": {
                    "secretName": inputs.secret_name,
                    "items": [{"key": PROMPT_KEY, "path": PROMPT_KEY}],
                    "defaultMode": 0o444,
                },
            }
        ],
    }
    if account is not None:
        pod_spec["serviceAccountName"] = account
    if agent.termination_grace_period_seconds is not None:  # A stop's SIGTERM to SIGKILL.
        pod_spec["terminationGracePeriodSeconds"] = agent.termination_grace_period_seconds
    if inputs.workspace is not None:
        tool = jobmounts.tool_of(settings)
        return jobmounts.workspace_pod(
            pod_spec, inputs.workspace, inputs.secret_name, tool, DEFAULT_SECURITY_CONTEXT
        )
    return pod_spec


def build_job(inputs: JobInputs, settings: Settings) -> dict[str, Any]:
    agent = inputs.agent
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
                "spec": _pod_spec(inputs, settings),
            },
        },
    }
