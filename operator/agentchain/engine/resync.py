"""The periodic resync: catch up on whatever happened while the operator was away.

Watches can miss events (operator down, watch expired); this looks at one
AgentJob's recorded state and redoes the next idempotent step.
"""

from __future__ import annotations

from typing import Any

from agentchain.engine import finishing, progressing, records, starting
from agentchain.engine.runtime import Runtime
from agentchain.kube import workloads
from agentchain.policy.outcomes import is_settled, is_terminal


def needs_resync(status: Any, **_: Any) -> bool:
    """kopf ``when=`` filter: settled jobs cost nothing on every tick."""
    try:
        parsed = records.parse({"status": dict(status or {}), "spec": {"agentRole": "x"}})
    except ValueError:
        return True
    return not is_settled(parsed.status)


async def resync(rt: Runtime, obj: dict[str, Any]) -> None:
    job = records.parse(obj)
    if is_terminal(job.status):
        await progressing.progress(rt, obj)
        return
    if not job.status.job_name:
        await starting.start(rt, obj)
        return
    batch = await workloads.get_job(obj["metadata"]["namespace"], job.status.job_name)
    if batch is None:
        msg = f"Batch Job {job.status.job_name} disappeared before the operator saw it end."
        await finishing.finish(rt, *records.name_of(obj), pod_name=None, exit_code=None, lost=msg)
        return
    await finishing.on_job(rt, batch)
    for pod in await workloads.list_pods(
        obj["metadata"]["namespace"], f"job-name={job.status.job_name}"
    ):
        await finishing.on_pod(rt, pod)
