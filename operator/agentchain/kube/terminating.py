"""Terminating a stopped job's batch Job: its pod gets its grace period, then it is gone.

Deleting the Job with background propagation removes it at once (so the Job controller
starts no other pod for it) and lets the garbage collector delete its pod the ordinary
way: SIGTERM, the pod's ``terminationGracePeriodSeconds`` for the agent to wrap up,
then SIGKILL.
"""

from __future__ import annotations

from agentchain.kube import apierrors
from agentchain.kube.clients import batch_path, request


async def delete_job(namespace: str, name: str) -> None:
    """Delete the batch Job and, gracefully, its pod; a Job already gone is done."""
    try:
        await request(
            "DELETE", batch_path(namespace, name), body={"propagationPolicy": "Background"}
        )
    except apierrors.NotFound:
        pass
