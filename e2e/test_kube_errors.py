"""The operator's Kubernetes error boundary, against the real API server behind a proxy.

Aspects covered, with the operator under its ServiceAccount and every one of its API
calls going through :class:`~e2e.faultproxy.FaultProxy`:
- the hop to the child meets a short outage of batch Job creates (429 with
  ``Retry-After: 2`` to every create for 1.5 s, so the several watch events of the
  parent's end all fail alike), a 500 to an AgentJob status patch and a 401 to a log
  read: the client waits out the Retry-After, retries the 500 at once and logs in again
  after the 401, and the chain completes within seconds, although the resync that
  used to rescue a failed hop is an hour away.

The session's operator watches every namespace, so it is stopped while the proxied
one (limited to the test's namespace) runs, as ``test_chain_limits`` does.
"""

from __future__ import annotations

import time

import pytest

from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.faultproxy import Fault, FaultProxy

# Without the client's retries a failed hop waits for the resync: never, in this test.
RESYNC_SECONDS = "3600"
CHAIN_SECONDS = 60.0


def _faults(namespace: str) -> list[Fault]:
    ns = f"/namespaces/{namespace}"
    return [
        # The first Job is the root's; the second is created by the hop to the child.
        Fault(
            "POST",
            f"/apis/batch/v1{ns}/jobs",
            429,
            "TooManyRequests",
            nth=2,
            headers={"Retry-After": "2"},
            window=1.5,
        ),
        Fault(
            "PATCH",
            f"/apis/labrats.work/v1alpha1{ns}/agentjobs/[^/]+/status",
            500,
            "InternalError",
            nth=2,
        ),
        Fault("GET", f"/api/v1{ns}/pods/[^/]+/log", 401, "Unauthorized"),
    ]


@pytest.mark.timeout(300)
def test_transient_api_failures_mid_hop_are_retried_at_once(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    faults = _faults(namespace)
    proxy = FaultProxy(info, faults)
    proxy.start()
    kubeconfig = proxy.kubeconfig(operator.kubeconfig, info.workdir / "proxied.kubeconfig")
    operator.stop()
    proxied = operating.OperatorProcess(
        info,
        kubeconfig,
        extra_env={"AGENTCHAIN_NAMESPACES": namespace, "AGENTCHAIN_RESYNC_SECONDS": RESYNC_SECONDS},
        name="proxied-operator",
    )
    try:
        proxied.start()
        chaining.apply(
            info,
            namespace,
            chaining.agent("ke-a", next_=chaining.step("ke-b")),
            chaining.agent("ke-b"),
        )
        started = time.monotonic()
        chaining.apply(info, namespace, chaining.root_job("ke-1", "ke-a"))
        jobs = chaining.wait_chain(info, namespace, "ke-1", 2, timeout=CHAIN_SECONDS)
        elapsed = time.monotonic() - started
        assert [j["status"]["phase"] for j in jobs] == ["Succeeded"] * 2
        assert faults[0].fired >= 1
        assert [(f.method, f.status, f.fired) for f in faults[1:]] == [
            ("PATCH", 500, 1),
            ("GET", 401, 1),
        ]
        log = proxied.log_text()
        assert log.count("retrying in") >= 2, log[-4000:]
        assert "logged in again" in log
        assert "Traceback" not in log
        print(f"chain of 2 through the faults in {elapsed:.1f} s")
    finally:
        proxied.stop()
        proxy.stop()
        operator.start()
