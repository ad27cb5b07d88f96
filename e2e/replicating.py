"""Two operator replicas sharing one Lease, for the HA tests and ``e2e/chaos_ha.py``.

Both are ``python -m agentchain run`` processes under the operator's own ServiceAccount,
serving one namespace, with the same webhook secret and admin token (one Deployment)
and a name each: their identity in the Lease.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from e2e import operating
from e2e.controlplane.cluster import ClusterInfo

NAMES = ("ha-a", "ha-b")


@contextmanager
def replicas(
    info: ClusterInfo, namespace: str, extra_env: dict[str, str] | None = None
) -> Iterator[list[operating.OperatorProcess]]:
    """Two operators serving ``namespace``, one Lease; the first started leads."""
    kubeconfig = operating.operator_kubeconfig(info, info.workdir / f"ha-{namespace}.kubeconfig")
    env = {"AGENTCHAIN_NAMESPACES": namespace, **(extra_env or {})}
    first = operating.OperatorProcess(
        info, kubeconfig, extra_env=env, name=f"{NAMES[0]}-{namespace}", lease=f"ha-{namespace}"
    )
    # One Deployment: the same secrets, the same Lease, a name (identity) each.
    second = operating.OperatorProcess(
        info,
        kubeconfig,
        extra_env=env,
        name=f"{NAMES[1]}-{namespace}",
        lease=first.lease,
        webhook_secret=first.webhook_secret,
        admin_token=first.admin_token,
    )
    ops = [first, second]
    try:
        ops[0].start()
        ops[1].start(lead=False)
        yield ops
    finally:
        for op in ops:
            if op.process is not None:
                os.killpg(op.process.pid, signal.SIGCONT)  # A frozen one must hear SIGTERM.
            op.stop()


def leader(
    ops: list[operating.OperatorProcess], timeout: float = 90.0
) -> operating.OperatorProcess:
    found: list[operating.OperatorProcess] = []

    def one() -> bool:
        found[:] = [op for op in ops if op.process is not None and op.role() == "leader"]
        return len(found) == 1

    operating.wait_until(one, timeout=timeout, interval=0.1, what="exactly one leader")
    return found[0]
