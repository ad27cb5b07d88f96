"""An AgentJob deleted and created again under the same name is a new run, end to end.

Records that describe one run (the captured output and how it ended, the job's
anchor) belong to one object, not to a name: a second object of the same name, with
its own uid, must end from its own container.

Aspects covered:
- ``same-name`` runs an agent that prints FIRST RUN and exits 0; deleted and created
  again for an agent that prints SECOND RUN and exits 7, the new object ends Failed
  with exit code 7, its result and its ``/output`` say SECOND RUN, never FIRST RUN, and
  a Warning Event about the new object (its uid) says why;
- the same after the whole namespace is deleted and created again.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import kubernetes

from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
NAME = "same-name"


def _agents() -> list[Obj]:
    first = chaining.agent("first", "--no-context", "--say", "FIRST RUN")
    second = chaining.agent("second", "--no-context", "--say", "SECOND RUN", "--exit-code", "7")
    return [first, second]


def _status(info: ClusterInfo, namespace: str) -> Obj:
    obj = operating.get_json(info, "agentjob", NAME, "-n", namespace)
    return dict(obj.get("status") or {})


def _run(info: ClusterInfo, namespace: str, agent: str) -> tuple[str, Obj]:
    """Create ``same-name`` for ``agent``; its uid and status once it ended."""
    chaining.apply(info, namespace, chaining.root_job(NAME, agent))
    uid = str(operating.get_json(info, "agentjob", NAME, "-n", namespace)["metadata"]["uid"])
    operating.wait_until(
        lambda: _status(info, namespace).get("phase") in {"Succeeded", "Failed"},
        timeout=120,
        what=f"{NAME} for {agent} to end",
    )
    return uid, _status(info, namespace)


def _output(op: operating.OperatorProcess, namespace: str) -> Obj:
    request = urllib.request.Request(
        f"{op.url}/api/jobs/{namespace}/{NAME}/output",
        headers={"Authorization": f"Bearer {op.admin_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        body: Obj = json.load(resp)
    return body


def _assert_second_run(op: operating.OperatorProcess, namespace: str, status: Obj) -> None:
    assert status["phase"] == "Failed", status
    assert status.get("exitCode") == 7, status
    assert "SECOND RUN" in status.get("result", ""), status
    assert "FIRST RUN" not in status.get("result", ""), status
    text = json.dumps(_output(op, namespace))
    assert "SECOND RUN" in text and "FIRST RUN" not in text, text


def _delete_job(info: ClusterInfo, namespace: str) -> None:
    info.kubectl("delete", "agentjob", NAME, "-n", namespace, "--wait=true")


def test_a_recreated_agentjob_ends_from_its_own_run(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, *_agents())
    first_uid, first = _run(info, namespace, "first")
    assert first["phase"] == "Succeeded" and "FIRST RUN" in first.get("result", ""), first
    _delete_job(info, namespace)
    second_uid, second = _run(info, namespace, "second")
    assert second_uid != first_uid
    _assert_second_run(operator, namespace, second)
    events = chaining.events_for(info, namespace, NAME)
    assert any(
        e["involvedObject"].get("uid") == second_uid and e["type"] == "Warning" for e in events
    ), events


def _wait_namespace_gone(core: kubernetes.client.CoreV1Api, name: str) -> None:
    def gone() -> bool:
        try:
            core.read_namespace(name)
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return True
            raise
        return False

    operating.wait_until(gone, timeout=120, interval=0.5, what=f"namespace {name} to go")


def _create_namespace(core: kubernetes.client.CoreV1Api, name: str) -> None:
    labels = {"app.kubernetes.io/part-of": "agentchain-e2e"}
    meta = kubernetes.client.V1ObjectMeta(name=name, labels=labels)
    core.create_namespace(kubernetes.client.V1Namespace(metadata=meta))

    def ready() -> bool:
        accounts = core.list_namespaced_service_account(name).items
        return any(a.metadata and a.metadata.name == "default" for a in accounts)

    operating.wait_until(ready, timeout=30, what=f"default ServiceAccount in {name}")


def test_a_recreated_namespace_does_not_inherit_a_job_ending(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    kube_api: kubernetes.client.ApiClient,
    namespace: str,
) -> None:
    info = cluster_info
    core = kubernetes.client.CoreV1Api(kube_api)
    chaining.apply(info, namespace, *_agents())
    _, first = _run(info, namespace, "first")
    assert first["phase"] == "Succeeded", first
    core.delete_namespace(namespace)
    _wait_namespace_gone(core, namespace)
    _create_namespace(core, namespace)
    chaining.apply(info, namespace, *_agents())
    _, second = _run(info, namespace, "second")
    _assert_second_run(operator, namespace, second)
