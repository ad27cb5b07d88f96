"""What reaches an agent's pod, on the real control plane (issue 14).

Aspects covered:
- a prompt holding ``$(SOME_SECRET_ENV)`` (a key of the agent's ``envFrom`` Secret),
  ``$$`` and ``$(AGENT_TOKEN)`` reaches the agent byte for byte in ``AGENT_PROMPT``, in
  the file ``AGENT_PROMPT_FILE`` names, and through a command's ``$(AGENT_PROMPT)``;
  the Secret's value appears nowhere in what the agent saw;
- a prompt too long for one environment string: the file holds all of it,
  ``AGENT_PROMPT`` a head under 128 KiB and a marker naming the file; a prompt no
  Secret can hold fails the job with ``PromptTooLarge``;
- a Secret named like the old token Secret (``<job>-token``), created before the job
  with ``token: stolen``, never reaches the agent: its token is its own and the job API
  accepts it;
- a chain runs to Succeeded in a namespace that enforces PodSecurity ``restricted``
  (the API server refuses an ordinary pod there, so the admission is really on), one
  agent with its own ``podSecurityContext``/``securityContext`` merged over the defaults.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from agentchain.hop.rules import jobspec
from agentchain.models.conditions import Reason
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
LEAKED = "sk-leak-0123456789"

# Prints what the agent received, as JSON on one line. Standard library only.
ECHO = """
import json, os, sys
text = None
if "AGENT_PROMPT_FILE" in os.environ:
    with open(os.environ["AGENT_PROMPT_FILE"], encoding="utf-8", newline="") as f:
        text = f.read()
print(json.dumps({"env": os.environ["AGENT_PROMPT"], "file": text, "arg": sys.argv[1]}))
"""
SIZES = """
import hashlib, json, os
with open(os.environ["AGENT_PROMPT_FILE"], "rb") as f:
    raw = f.read()
env = os.environ["AGENT_PROMPT"].encode()
print(json.dumps({"file": hashlib.sha256(raw).hexdigest(), "env_bytes": len(env),
                  "env_tail": env[-300:].decode(errors="replace")}))
"""
TOKEN = """
import json, os, urllib.request, urllib.error
token = os.environ["AGENT_TOKEN"]
url = "{}/api/jobs/{}/{}".format(
    os.environ["AGENT_API_URL"], os.environ["AGENT_NAMESPACE"], os.environ["AGENT_JOB"])
request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
try:
    status = urllib.request.urlopen(request, timeout=10).status
except urllib.error.HTTPError as exc:
    status = exc.code
print(json.dumps({"stolen": token == "stolen", "api": status}))
"""


def _job(name: str, agent: str, prompt: str) -> Obj:
    return {
        "apiVersion": chaining.API_VERSION,
        "kind": "AgentJob",
        "metadata": {"name": name},
        "spec": {"agentRole": agent, "prompt": prompt},
    }


def _secret(name: str, data: dict[str, str]) -> Obj:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": encoded}


def _create(info: ClusterInfo, namespace: str, *docs: Obj) -> None:
    # `create`, not `apply`: a large prompt must not go into the last-applied annotation.
    for doc in docs:
        info.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(doc))


def _said(info: ClusterInfo, namespace: str, job: Obj) -> Obj:
    """The JSON line the agent printed."""
    said: Obj = json.loads(chaining.output_of(info, namespace, job).splitlines()[-1])
    return said


def test_a_prompt_reaches_the_agent_byte_for_byte_never_expanded(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    prompt = "Fix it. $(SOME_SECRET_ENV) costs $$5; token $(AGENT_TOKEN), job $(AGENT_JOB) $"
    env_from = [{"secretRef": {"name": "llm-keys"}}]
    _create(info, namespace, _secret("llm-keys", {"SOME_SECRET_ENV": LEAKED}))
    command = chaining.python_command(ECHO, "$(AGENT_PROMPT)")
    _create(
        info,
        namespace,
        chaining.ai_agent("echo", command, triggers=chaining.MANUAL, envFrom=env_from),
    )
    _create(info, namespace, _job("hostile-1", "echo", prompt))

    job = chaining.wait_job(info, namespace, "hostile-1")
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert chaining.prompt_of(info, namespace, job) == prompt
    assert _said(info, namespace, job) == {"env": prompt, "file": prompt, "arg": prompt}
    assert LEAKED not in chaining.output_of(info, namespace, job)


def test_a_long_prompt_is_whole_in_the_file_and_one_too_large_fails_the_job(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    long_prompt = "$(AGENT_JOB) " + "ü" * 100_000  # 200 KB: over one env string's limit.
    command = chaining.python_command(SIZES, "$(AGENT_PROMPT)")
    _create(info, namespace, chaining.ai_agent("sizer", command, triggers=chaining.MANUAL))
    _create(info, namespace, _job("long-1", "sizer", long_prompt))
    _create(info, namespace, _job("huge-1", "sizer", "x" * (jobspec.PROMPT_MAX_BYTES + 1)))

    job = chaining.wait_job(info, namespace, "long-1")
    assert job["status"]["phase"] == "Succeeded", job["status"]
    said = _said(info, namespace, job)
    assert said["file"] == hashlib.sha256(long_prompt.encode()).hexdigest()
    assert 100_000 < said["env_bytes"] <= jobspec.ENV_PROMPT_MAX_BYTES
    assert jobspec.PROMPT_FILE in said["env_tail"] and "AGENT_PROMPT_FILE" in said["env_tail"]

    huge = chaining.wait_job(info, namespace, "huge-1")["status"]
    assert (huge["phase"], huge["reason"]) == ("Failed", Reason.PROMPT_TOO_LARGE)
    assert "jobName" not in huge  # Nothing ran.


def test_a_secret_named_like_the_job_never_reaches_the_agent(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    _create(info, namespace, _secret("victim-1-token", {"token": "stolen", "prompt": "p"}))
    command = chaining.python_command(TOKEN, "$(AGENT_PROMPT)")
    _create(info, namespace, chaining.ai_agent("tokens", command, triggers=chaining.MANUAL))
    _create(info, namespace, _job("victim-1", "tokens", "use your token"))

    job = chaining.wait_job(info, namespace, "victim-1")
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert _said(info, namespace, job) == {"stolen": False, "api": 200}
    assert chaining.job_secret(info, namespace, job)["token"] != "stolen"


@pytest.fixture
def restricted(cluster_info: ClusterInfo, namespace: str) -> str:
    label = "pod-security.kubernetes.io/enforce=restricted"
    cluster_info.kubectl("label", "namespace", namespace, label)
    return namespace


def test_a_chain_runs_where_pod_security_is_restricted(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, restricted: str
) -> None:
    info, namespace = cluster_info, restricted
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]},
    }
    refused = info.kubectl(
        "create", "-n", namespace, "-f", "-", input=json.dumps(plain), check=False
    )
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr

    second = chaining.agent("second")
    second["spec"]["podSecurityContext"] = {"runAsUser": 2000}  # Kept by the CRD's schema.
    second["spec"]["securityContext"] = {"readOnlyRootFilesystem": True}
    chaining.apply(
        info,
        namespace,
        chaining.agent("first", next_=chaining.step("second")),
        second,
        chaining.root_job("locked-1", "first"),
    )
    jobs = chaining.wait_chain(info, namespace, "locked-1", 2)
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded", "Succeeded"]
    batch = operating.get_json(info, "job", jobs[1]["status"]["jobName"], "-n", namespace)
    pod = batch["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 2000
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
