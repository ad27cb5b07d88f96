"""Building and observing chains in end-to-end tests: manifests in, finished chains out.

The tests each declare a handful of small agents and read back what the operator
did; these helpers keep that declaration one line per agent and every observation
(a job's status, its wait for a phase, a chain's jobs, a child's prompt, an object's
Events) one call, so the tests read as the behaviour they check and differ only
where the behaviour does.  :func:`agent` runs the demo agent, whose flags
(``--exit-code``, ``--print-chars``, ``--say``, ``--no-context``) make each outcome
deterministic; :func:`ai_agent` takes any command and spec fields.
"""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Sequence
from typing import Any

import yaml

from agentchain.hop.rules import jobspec
from e2e import operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
API_VERSION = "labrats.work/v1alpha1"
CHAIN_TIMEOUT_SECONDS = 120


def step(
    target: str, condition: str = "on-success", policy: str = "stop", window: str | None = None
) -> Obj:
    """A ``next`` entry."""
    out: Obj = {"agentTriggerName": target, "condition": condition, "failurePolicy": policy}
    if window is not None:
        out["contextWindow"] = window
    return out


MANUAL: tuple[Obj, ...] = ({"source": "manual"},)
# The phases a job ends in: nothing changes it afterwards.
ENDED = ("Succeeded", "Failed", "Cancelled")


def ai_agent(
    trigger: str,
    command: list[str] | None = None,
    *,
    object_name: str | None = None,
    triggers: Sequence[Obj] | None = None,
    **spec: Any,
) -> Obj:
    """An AiAgent for ``triggerName`` ``trigger``, named ``object_name`` (``trigger`` by
    default), running ``command``, with ``triggers`` as its ``eventTriggers``.

    ``spec`` adds fields spelled as in the CRD (``backoffLimit=2``); a field given as
    None is left out, so a caller passes an optional one through as it is.  With no
    ``triggers`` the agent declares none; :data:`MANUAL` is the manual trigger alone.
    """
    fields: Obj = {"triggerName": trigger}
    if command is not None:
        fields["command"] = command
    if triggers is not None:
        fields["eventTriggers"] = [dict(t) for t in triggers]
    fields.update((key, value) for key, value in spec.items() if value is not None)
    return {
        "apiVersion": API_VERSION,
        "kind": "AiAgent",
        "metadata": {"name": object_name or trigger},
        "spec": fields,
    }


def demo_command(*flags: str) -> list[str]:
    """The command that runs the demo agent with ``flags``."""
    return ["agentchain", "demo-agent", *flags]


def agent_python() -> str:
    """The Python an agent's command names: the agent image's ``python3`` on its PATH (an
    agent runs in a container, never on this machine)."""
    return "python3"


def python_command(script: str, *args: str) -> list[str]:
    """The command that runs ``script`` with the agent's Python, ``args`` after it."""
    return [agent_python(), "-c", script, *args]


def agent(
    trigger: str,
    *flags: str,
    next_: Obj | None = None,
    github: str | None = None,
    enabled: bool = True,
    github_settings: Obj | None = None,
    **spec: Any,
) -> Obj:
    """An AiAgent named after its triggerName, running the demo agent with ``flags``.

    ``next_`` goes on its manual trigger, or on a github trigger for events
    ``github`` (e.g. ``"issues.labeled"``) when that is given.  ``spec`` adds fields
    as :func:`ai_agent` does; the spec's own ``github`` field (permissions, write-back)
    is ``github_settings``, since ``github`` names the trigger's event.
    """
    trigger_entry: Obj = {"source": "manual"}
    if github is not None:
        trigger_entry = {"source": "github", "events": [github]}
    if next_ is not None:
        trigger_entry["next"] = next_
    return ai_agent(
        trigger,
        demo_command(*flags),
        triggers=[trigger_entry],
        name=trigger,
        enabled=enabled,
        github=github_settings,
        **spec,
    )


def root_job(name: str, agent_role: str, *, github_event: str | None = None) -> Obj:
    """A root AgentJob; with ``github_event`` ("issues.labeled") it follows a github trigger."""
    spec: Obj = {"agentRole": agent_role, "type": "e2e", "prompt": f"Work on {name}"}
    if github_event is not None:
        event, _, action = github_event.partition(".")
        spec["origin"] = "github"
        spec["event"] = {"source": "github", "name": event, "action": action}
    else:
        spec["origin"] = "manual"
    return {"apiVersion": API_VERSION, "kind": "AgentJob", "metadata": {"name": name}, "spec": spec}


def bare_job(name: str, image: str, command: list[str], labels: dict[str, str]) -> Obj:
    """A batch Job of one container of ``image`` (on the node, never pulled), run once,
    owned by nothing: what the operator's jobs are measured or told apart against."""
    container = {"name": "agent", "image": image, "imagePullPolicy": "Never", "command": command}
    pod_spec = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "containers": [container],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": pod_spec}},
    }


def apply(info: ClusterInfo, namespace: str, *docs: Obj) -> None:
    body = "\n---\n".join(yaml.safe_dump(d) for d in docs)
    info.kubectl("apply", "-n", namespace, "-f", "-", input=body)


def chain_jobs(info: ClusterInfo, namespace: str, chain_id: str) -> list[Obj]:
    """The chain's AgentJobs, by depth."""
    selector = f"labrats.work/chain-id={chain_id}"
    out = info.kubectl("get", "agentjobs", "-n", namespace, "-l", selector, "-o", "json")
    items: list[Obj] = json.loads(out.stdout)["items"]
    return sorted(items, key=lambda j: (j.get("status") or {}).get("chainDepth", 0))


def find_job(info: ClusterInfo, namespace: str, name: str) -> Obj:
    """AgentJob ``name``, or ``{}`` while it does not exist (a delivery's job is created
    by the webhook's dispatcher, a moment after the answer names it)."""
    found = info.kubectl("get", "agentjob", name, "-n", namespace, "-o", "json", check=False)
    if found.returncode != 0 and "NotFound" in found.stderr:
        return {}
    if found.returncode != 0:
        raise AssertionError(f"kubectl get agentjob {name}: {found.stderr}")
    job: Obj = json.loads(found.stdout)
    return job


def job_status(info: ClusterInfo, namespace: str, name: str) -> Obj:
    """AgentJob ``name``'s status; ``{}`` while it has none or does not exist."""
    return dict(find_job(info, namespace, name).get("status") or {})


def wait_job(
    info: ClusterInfo,
    namespace: str,
    name: str,
    *phases: str,
    timeout: float = CHAIN_TIMEOUT_SECONDS,
) -> Obj:
    """Wait until AgentJob ``name`` is in one of ``phases`` (by default: ended); return it."""
    wanted = phases or ENDED
    found: list[Obj] = [{}]

    def reached() -> bool:
        found[0] = find_job(info, namespace, name)
        return (found[0].get("status") or {}).get("phase") in wanted

    operating.wait_until(reached, timeout=timeout, what=f"{name} to be {'/'.join(wanted)}")
    return found[0]


def wait_phase(
    info: ClusterInfo,
    namespace: str,
    name: str,
    *phases: str,
    timeout: float = CHAIN_TIMEOUT_SECONDS,
) -> Obj:
    """Wait until AgentJob ``name`` is in one of ``phases`` (by default: ended); return
    its status."""
    return dict(wait_job(info, namespace, name, *phases, timeout=timeout).get("status") or {})


def wait_chain(
    info: ClusterInfo, namespace: str, root: str, count: int, timeout: float = CHAIN_TIMEOUT_SECONDS
) -> list[Obj]:
    """Wait until the chain started by AgentJob ``root`` has ``count`` jobs and is complete."""
    chain_id = ""

    def root_chain() -> str:
        nonlocal chain_id
        job: Obj = operating.get_json(info, "agentjob", root, "-n", namespace)
        chain_id = str((job.get("status") or {}).get("chainId") or "")
        return chain_id

    operating.wait_until(root_chain, timeout=60, what=f"chain id of {root}")
    jobs: list[Obj] = []

    def complete() -> bool:
        nonlocal jobs
        jobs = chain_jobs(info, namespace, chain_id)
        done = any((j.get("status") or {}).get("chainComplete") for j in jobs)
        return len(jobs) == count and done

    what = f"chain of {root} to complete with {count} jobs"
    operating.wait_until(complete, timeout=timeout, interval=0.5, what=what)
    return jobs


def batch_secret(info: ClusterInfo, namespace: str, batch: Obj) -> dict[str, str]:
    """The decoded data of the Secret a batch Job takes its token and prompt from."""
    name = jobspec.secret_name_of(batch)
    assert name is not None, f"batch Job {batch['metadata']['name']} names no job Secret"
    secret = operating.get_json(info, "secret", name, "-n", namespace)
    data: dict[str, str] = secret.get("data") or {}
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def job_secret(info: ClusterInfo, namespace: str, job: Obj) -> dict[str, str]:
    """The decoded data of the Secret of the job's (current attempt's) batch Job."""
    batch = operating.get_json(info, "job", job["status"]["jobName"], "-n", namespace)
    return batch_secret(info, namespace, batch)


def prompt_of(info: ClusterInfo, namespace: str, job: Obj) -> str:
    """The prompt exactly as the job's container gets it (AGENT_PROMPT_FILE)."""
    return job_secret(info, namespace, job)[jobspec.PROMPT_KEY]


def output_of(info: ClusterInfo, namespace: str, job: Obj) -> str:
    """The job's container output as ``kubectl logs`` shows it, final newline removed."""
    out = info.kubectl("logs", f"job/{job['status']['jobName']}", "-n", namespace).stdout
    return out.rstrip("\n")


def events_for(info: ClusterInfo, namespace: str, name: str) -> list[Obj]:
    selector = f"involvedObject.name={name}"
    out = info.kubectl("get", "events", "-n", namespace, "--field-selector", selector, "-o", "json")
    items: list[Obj] = json.loads(out.stdout)["items"]
    return items


def has_event(info: ClusterInfo, namespace: str, name: str, type_: str, reason: str) -> bool:
    return any(
        e.get("type") == type_ and e.get("reason") == reason
        for e in events_for(info, namespace, name)
    )


def batch_job_names(info: ClusterInfo, namespace: str) -> list[str]:
    out = info.kubectl("get", "jobs", "-n", namespace, "-o", "json")
    return sorted(j["metadata"]["name"] for j in json.loads(out.stdout)["items"])


def batch_jobs(info: ClusterInfo, namespace: str, agentjob: str | None = None) -> list[Obj]:
    """The operator's batch Jobs in ``namespace``, or those of one AgentJob."""
    selector = f"labrats.work/agentjob={agentjob}" if agentjob else "labrats.work/agentjob"
    items = operating.get_json(info, "jobs", "-n", namespace, "-l", selector)["items"]
    assert isinstance(items, list)
    return items


def condition(obj: Obj, type_: str) -> Obj | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), None)


def team_anchor(operator: operating.OperatorProcess, namespace: str, chain_id: str) -> Obj:
    """The chain's team anchor, read through the job API with an admin token."""
    request = urllib.request.Request(
        f"{operator.url}/api/chains/{namespace}/{chain_id}/anchor",
        headers={"Authorization": f"Bearer {operator.admin_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        anchor: Obj = json.load(resp)["anchor"]
    return anchor
