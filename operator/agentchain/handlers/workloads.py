"""Pod and batch Job watchers: the moment an agent's container ends, finish its AgentJob."""

from __future__ import annotations

from typing import Any

import kopf

from agentchain.engine import finishing
from agentchain.models import AGENTJOB_LABEL


@kopf.on.event("v1", "pods", labels={AGENTJOB_LABEL: kopf.PRESENT})
async def pod_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await finishing.on_pod(memo.runtime, dict(body))


@kopf.on.event("batch", "v1", "jobs", labels={AGENTJOB_LABEL: kopf.PRESENT})
async def job_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await finishing.on_job(memo.runtime, dict(body))
