"""The operator's own watches, against the real API server (issue 21).

Aspects covered:
- ``kube.watching.Watcher`` lists in pages of ``page_size`` with its label selector
  (unlabelled objects never arrive), hands each item over trimmed, then watches from
  the list's version: a later create and delete arrive as ADDED and DELETED;
- a watch answered ``410 Gone`` (by a proxy in front of the API server, for a few
  seconds, so the relist meets it too) lists again, backing off meanwhile, and an
  object deleted while no watch ran is handed over as DELETED by the relist;
- the operator logs one line per AgentJob transition (never twice the same);
- a restarted operator on a namespace of settled jobs (a finished three-agent chain)
  makes no request for any of them: every request it sends for AgentJobs, batch Jobs
  and pods is a LIST or a WATCH of the collection (counted by a proxy), and
  ``/readyz`` says when its backlog is done.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from agentchain.kube import clients
from agentchain.kube.watching import PAGE_SIZE, Collection, Watcher
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.faultproxy import Fault, FaultProxy

Obj = dict[str, Any]
LABEL = "watch-test"
WAIT = 30.0


@asynccontextmanager
async def kubeconfig(path: Path) -> AsyncIterator[None]:
    """``agentchain.kube`` talking through ``path`` for the test's duration."""
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(path)
    clients.reset()
    try:
        yield
    finally:
        await clients.close()
        clients.reset()
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous


class Recorder:
    """Every event a watcher hands over, and a way to wait for one."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Obj]] = []
        self._changed = asyncio.Event()

    def __call__(self, kind: str, obj: Obj) -> None:
        self.events.append((kind, obj))
        self._changed.set()

    def names(self, kind: str) -> list[str]:
        return sorted(o["metadata"]["name"] for k, o in self.events if k == kind)

    async def until(self, kind: str, name: str) -> None:
        async with asyncio.timeout(WAIT):
            while name not in self.names(kind):
                self._changed.clear()
                await self._changed.wait()


@asynccontextmanager
async def running(watcher: Watcher, path: Path) -> AsyncIterator[None]:
    """``watcher`` running on ``agentchain.kube`` pointed at the kubeconfig ``path``."""
    async with kubeconfig(path):
        task = asyncio.create_task(watcher.run())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _config_map(name: str, labelled: bool) -> str:
    labels = {LABEL: "yes"} if labelled else {}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}
    body["data"] = {"payload": "x" * 100}
    return json.dumps(body)


def _trim(obj: Obj) -> Obj:
    return {"metadata": {k: obj["metadata"][k] for k in ("name", "namespace", "uid")}}


async def test_lists_in_pages_with_its_selector_then_watches(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    for i in range(7):
        cluster_info.kubectl("create", "-n", namespace, "-f", "-", input=_config_map(f"w{i}", True))
    cluster_info.kubectl("create", "-n", namespace, "-f", "-", input=_config_map("other", False))
    recorder = Recorder()
    path = clients.core_path(namespace, "configmaps")
    watcher = Watcher(Collection(path, label_selector=LABEL, page_size=3), recorder, trim=_trim)
    async with running(watcher, cluster_info.kubeconfig):
        async with asyncio.timeout(WAIT):
            await watcher.listed.wait()
        assert recorder.names("ADDED") == [f"w{i}" for i in range(7)]
        assert (watcher.pages, watcher.lists) == (3, 1)
        assert all(set(obj) == {"metadata"} for _, obj in recorder.events)  # Trimmed.
        create = _config_map("late", True)
        await asyncio.to_thread(
            cluster_info.kubectl, "create", "-n", namespace, "-f", "-", input=create
        )
        await asyncio.to_thread(
            cluster_info.kubectl,
            "create",
            "-n",
            namespace,
            "-f",
            "-",
            input=_config_map("o2", False),
        )
        await asyncio.to_thread(cluster_info.kubectl, "delete", "-n", namespace, "configmap", "w3")
        await recorder.until("DELETED", "w3")
        await recorder.until("ADDED", "late")
    assert "other" not in recorder.names("ADDED") and "o2" not in recorder.names("ADDED")
    assert watcher.lists == 1


def _suspended_job(name: str) -> str:
    container = {"name": "c", "image": "busybox", "command": ["true"]}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {LABEL: "yes"}},
        "spec": {"suspend": True, "template": template},
    }
    return json.dumps(body)


async def test_relists_after_gone_and_hands_over_what_it_missed(
    installed: ClusterInfo, namespace: str
) -> None:
    for i in range(3):
        installed.kubectl("create", "-n", namespace, "-f", "-", input=_suspended_job(f"g{i}"))
    path = clients.batch_path(namespace)
    # GETs of the collection: two list pages, then the first watch, answered 410 for
    # 4 s: every relist in that window meets 410 too, and backs off.
    gone = Fault("GET", re.escape(path), 410, "Expired", nth=3, window=4.0)
    proxy = FaultProxy(installed, [gone])
    proxy.start()
    token = operating.operator_kubeconfig(installed, installed.workdir / "watch-token.kubeconfig")
    proxied = proxy.kubeconfig(token, installed.workdir / "watch-proxied.kubeconfig")
    recorder = Recorder()
    watcher = Watcher(
        Collection(path, label_selector=LABEL, page_size=2),
        recorder,
        trim=_trim,
        track_deletions=True,
    )
    try:
        async with running(watcher, proxied):
            async with asyncio.timeout(WAIT):
                await watcher.listed.wait()
            # Deleted while every request of the watcher is answered 410.
            await asyncio.to_thread(installed.kubectl, "delete", "-n", namespace, "job", "g1")
            await recorder.until("DELETED", "g1")
            assert watcher.lists >= 2
            assert gone.fired >= 2, "the relists in the window met the 410 too"
            assert gone.fired <= 6, "a relist answered 410 backs off, not a tight loop"
            await asyncio.to_thread(
                installed.kubectl, "create", "-n", namespace, "-f", "-", input=_suspended_job("g3")
            )
            await recorder.until("ADDED", "g3")  # Watching again.
    finally:
        proxy.stop()
    deleted = [o for k, o in recorder.events if k == "DELETED"]
    assert [o["metadata"]["name"] for o in deleted] == ["g1"]
    assert deleted[0]["metadata"]["uid"]


class CountingProxy(FaultProxy):
    """A proxy that records every request (method and path with query) it forwards."""

    def __init__(self, info: ClusterInfo) -> None:
        super().__init__(info, [])
        self.requests: list[tuple[str, str]] = []

    def _fault(self, request: web.Request) -> Fault | None:
        self.requests.append((request.method, request.path_qs))
        return None


def _readyz(op: operating.OperatorProcess) -> Obj:
    with urllib.request.urlopen(f"{op.internal_url}/readyz", timeout=2) as resp:
        answer: Obj = json.loads(resp.read())
    return answer


def _per_object(requests: list[tuple[str, str]], namespace: str) -> list[tuple[str, str]]:
    """Requests for AgentJobs, batch Jobs or pods of ``namespace`` that are not a LIST or
    WATCH of the whole collection."""
    collections = (
        f"/apis/labrats.work/v1alpha1/namespaces/{namespace}/agentjobs",
        f"/apis/batch/v1/namespaces/{namespace}/jobs",
        f"/api/v1/namespaces/{namespace}/pods",
    )
    found = []
    for method, path_qs in requests:
        path, _, query = path_qs.partition("?")
        if not path.startswith(collections):
            continue
        is_collection = path in collections and method == "GET"
        if not is_collection or "job-name" in query:
            found.append((method, path_qs))
    return found


@pytest.fixture
def counted(
    operator: operating.OperatorProcess, namespace: str
) -> Iterator[tuple[operating.OperatorProcess, CountingProxy]]:
    """An operator for ``namespace`` alone behind a counting proxy; the session's
    operator is stopped meanwhile (it would act on the namespace too)."""
    info = operator.info
    proxy = CountingProxy(info)
    proxy.start()
    config = proxy.kubeconfig(operator.kubeconfig, info.workdir / f"{namespace}.kubeconfig")
    operator.stop()
    env = {"AGENTCHAIN_NAMESPACES": namespace, "AGENTCHAIN_RESYNC_SECONDS": "3600"}
    counted_op = operating.OperatorProcess(info, config, extra_env=env, name="counted-operator")
    try:
        yield counted_op, proxy
    finally:
        counted_op.stop()
        proxy.stop()
        operator.start()


def test_restart_on_settled_jobs_makes_no_request_per_job(
    counted: tuple[operating.OperatorProcess, CountingProxy], namespace: str
) -> None:
    op, proxy = counted
    info = op.info
    op.start()
    chaining.apply(
        info,
        namespace,
        chaining.agent("wa", next_=chaining.step("wb")),
        chaining.agent("wb", next_=chaining.step("wc")),
        chaining.agent("wc"),
    )
    chaining.apply(info, namespace, chaining.root_job("w-1", "wa"))
    jobs = chaining.wait_chain(info, namespace, "w-1", 3, timeout=120)
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded"] * 3
    operating.wait_until(
        lambda: _readyz(op)["backlog"] == "done", timeout=WAIT, what="the first start's backlog"
    )
    transitions = re.findall(rf"AgentJob {namespace}/(\S+): (\S+ -> \S+)", op.log_text())
    assert len(transitions) == len(set(transitions)), transitions  # One line each.
    # A short container can go from Pending to its end between two looks of a real
    # kubelet, so the end may follow either phase.
    ends = {("w-1", "Running -> Succeeded"), ("w-1", "Pending -> Succeeded")}
    assert ends & set(transitions), transitions
    op.stop()
    proxy.requests.clear()
    op.start()
    operating.wait_until(
        lambda: _readyz(op)["backlog"] == "done", timeout=WAIT, what="the restart's backlog"
    )
    assert _per_object(proxy.requests, namespace) == []
    ns_requests = [r for r in proxy.requests if f"/namespaces/{namespace}/" in r[1]]
    pages = [r for r in ns_requests if f"limit={PAGE_SIZE}" in r[1] and "watch=" not in r[1]]
    assert len(pages) == 3, pages  # One page each: AgentJobs, batch Jobs, pods.
    lists = pages
    assert all("labelSelector" in q for _, q in lists if "/agentjobs" not in q)
    assert "0 unsettled AgentJobs" in op.log_text()
