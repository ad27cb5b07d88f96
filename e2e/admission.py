"""The chart's admission policies on the test cluster: apply them, wait until the API
server enforces them, create objects as someone, take them away again.

The policies are cluster-scoped; each test renders them under a release name of its own
and for an operator account of its own, so tests never see each other's.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import yaml

from e2e.controlplane.cluster import ClusterInfo

KINDS = frozenset({"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})
ENFORCE_TIMEOUT_SECONDS = 30.0
Obj = dict[str, Any]

_HOSTPATH_JOB: Obj = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "admission-probe"},
    "spec": {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": "c",
                        "image": "x",
                        "securityContext": {"allowPrivilegeEscalation": False},
                    }
                ],
                "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
            }
        }
    },
}


def create_as(info: ClusterInfo, namespace: str, user: str | None, body: Obj) -> str:
    """Create ``body`` in ``namespace`` as ``user`` (None: the admin) as a server-side dry
    run, so admission runs in full and nothing is made: '' when admitted, else the error."""
    body = copy.deepcopy(body)
    body["metadata"].pop("namespace", None)
    who = [f"--as={user}"] if user else []
    result = info.kubectl(
        "create", "--dry-run=server", "-o", "name", *who, "-n", namespace, "-f", "-",
        input=json.dumps(body), check=False,
    )  # fmt: skip
    return "" if result.returncode == 0 else result.stderr


def apply(info: ClusterInfo, policies: list[Obj], namespace: str, user: str) -> None:
    """Apply ``policies`` and wait until a hostPath Job from ``user`` is refused by them
    (the API server loads policies asynchronously)."""
    info.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(m) for m in policies))
    deadline = time.monotonic() + ENFORCE_TIMEOUT_SECONDS
    while "denied request" not in create_as(info, namespace, user, _HOSTPATH_JOB):
        assert time.monotonic() < deadline, "the admission policy was never enforced"
        time.sleep(0.5)


def delete(info: ClusterInfo, policies: list[Obj]) -> None:
    for m in policies:
        info.kubectl("delete", m["kind"], m["metadata"]["name"], "--ignore-not-found")
