"""The session's cluster on the real node: an agent of the ordinary suite runs in a
container of the e2e agent image built from this tree.

On a cluster named by ``AGENTCHAIN_E2E_KUBECONFIG`` the session has no real node and
this module skips.

Aspects covered:
- an AiAgent naming no image gets the session's agent image (``images/e2e-agent``), and
  its pod's container started from it (an image id in its status) and exited 0;
- the command ran inside the image, not on this machine: ``python_command``'s Python is
  the image's ``/usr/local/bin/python3``, as uid 10001 (the job pod's default user);
- it reached the operator's job API, listening on the node's bridge address
  (``AGENT_API_URL``), and read its own job there with its token.
"""

from __future__ import annotations

import pytest

from e2e import chaining, operating, realnodes
from e2e.controlplane.cluster import ClusterInfo

WHERE = "import os, sys; print(sys.executable, os.getuid())"
# The agent reads its own job through the job API with its token.
CALL = """
import os, urllib.request
api = os.environ["AGENT_API_URL"]
url = "{}/api/jobs/{}/{}".format(api, os.environ["AGENT_NAMESPACE"], os.environ["AGENT_JOB"])
token = os.environ["AGENT_TOKEN"]
request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
print(api, urllib.request.urlopen(request, timeout=10).status)
"""


def _on_the_real_node(info: ClusterInfo) -> None:
    if info.real_node is None or not info.agent_image:
        pytest.skip(realnodes.NAMED_CLUSTER)


def _pod(info: ClusterInfo, namespace: str, job: chaining.Obj) -> chaining.Obj:
    selector = f"job-name={job['status']['jobName']}"
    [pod] = operating.get_json(info, "pods", "-n", namespace, "-l", selector)["items"]
    assert isinstance(pod, dict)
    return pod


def test_an_agent_naming_no_image_runs_in_the_e2e_agent_image(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    _on_the_real_node(info)
    agent = chaining.ai_agent("where", chaining.python_command(WHERE), triggers=chaining.MANUAL)
    chaining.apply(info, namespace, agent, chaining.root_job("where-1", "where"))
    job = chaining.wait_job(info, namespace, "where-1")
    assert job["status"]["phase"] == "Succeeded", job["status"]
    pod = _pod(info, namespace, job)
    [container] = pod["spec"]["containers"]
    assert container["image"] == info.agent_image, container
    [state] = pod["status"]["containerStatuses"]
    assert state["imageID"], state
    assert state["state"]["terminated"]["exitCode"] == 0, state
    assert chaining.output_of(info, namespace, job) == "/usr/local/bin/python3 10001"


def test_an_agent_in_a_container_reaches_the_job_api(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    _on_the_real_node(info)
    assert operator.host == info.pod_host != "127.0.0.1"
    agent = chaining.ai_agent("caller", chaining.python_command(CALL), triggers=chaining.MANUAL)
    chaining.apply(info, namespace, agent, chaining.root_job("caller-1", "caller"))
    job = chaining.wait_job(info, namespace, "caller-1")
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert chaining.output_of(info, namespace, job) == f"{operator.url} 200"
