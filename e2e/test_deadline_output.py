"""A job ended by its deadline keeps what it printed, end to end.

The batch Job's ``activeDeadlineSeconds`` (the AiAgent's ``timeoutSeconds``) ends the
attempt: the Job controller kills the pod and deletes it, so the output is read while
the pod is still there.

Aspects covered:
- an agent that prints a line and then outlives its deadline ends ``Failed`` with
  ``DeadlineExceeded``; its result and its ``/output`` hold the line it printed (the
  output is not ``OutputLost``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
PRINTED = "PARTIAL WORK before the deadline"


def _output(op: operating.OperatorProcess, namespace: str, name: str) -> tuple[int, Obj]:
    request = urllib.request.Request(
        f"{op.url}/api/jobs/{namespace}/{name}/output",
        headers={"Authorization": f"Bearer {op.admin_token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status), json.load(resp)
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code), json.load(error)


def test_a_job_ended_by_its_deadline_keeps_what_it_printed(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    slow = chaining.ai_agent("slow", ["sh", "-c", f"echo '{PRINTED}'; sleep 120"], timeoutSeconds=4)
    chaining.apply(info, namespace, slow, chaining.root_job("late", "slow"))
    status = chaining.wait_phase(info, namespace, "late")
    assert (status["phase"], status["reason"]) == ("Failed", "DeadlineExceeded"), status
    assert PRINTED in status.get("result", ""), status
    code, body = _output(operator, namespace, "late")
    assert code == 200, body
    assert PRINTED in body["output"], body
