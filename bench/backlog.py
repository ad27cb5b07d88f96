"""A backlog of thousands of AgentJobs, as a real cluster would hold it, in minutes.

Running thousands of real pods through the real node would take hours on two cores
(each pod a sandbox and a container, each status a few writes), so the backlog is cloned
instead, with the admin kubeconfig, from objects the real operator made:

1. :func:`capture` runs one real three-agent chain to its end and starts one more
   AgentJob whose agent sleeps, and snapshots the AgentJobs, batch Jobs and pods (with
   the finished pods' logs) that the operator, the Job controller and the kubelet
   produced. The snapshot is whatever the engine of the day writes, so the backlog
   follows the engine without edits here.
2. :func:`clone` creates copies of the chain (finished) and of the sleeping job
   (running): each AgentJob, then its batch Job, then its pod, ownerReferences pointing
   at the new uids (the garbage collector runs and would delete dependents of a wrong
   uid), statuses written through the status subresource. Every name is renamed
   consistently, keeping its length, so the objects weigh what real ones weigh.

What keeps the clones still: the batch Jobs carry ``spec.managedBy`` of the bench, so
the Job controller leaves them (and their statuses) alone; the pods are bound to a
Node of their own (``bench-backlog``) that no kubelet runs. That Node is created Ready
with the bench's log server as its kubelet endpoint, so ``pods/log`` works for cloned
pods exactly as for real ones (it answers the captured log), and tainted ``NoSchedule``
so the scheduler never puts a real pod there. The real node's controller-manager runs
the node lifecycle controller, which would mark a Node without a heartbeat unreachable
after its grace period and then write every one of its pods' Ready condition (events
the restarted operator would receive, in the middle of the measurement):
:func:`heartbeat` renews the Node's Lease as a kubelet does. Neither the pod garbage
collector nor the taint eviction controller runs (e2e/controlplane/cluster.py
``CONTROLLERS``), so nothing deletes the clones.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import json
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
GROUP, VERSION = "labrats.work", "v1alpha1"
AGENTJOB_LABEL = f"{GROUP}/agentjob"
CHAIN_LABEL = f"{GROUP}/chain-id"
NODE = "bench-backlog"
MANAGED_BY = "bench.labrats.work/backlog"
CONCURRENCY = 64
DROP_META = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")
# The Job controller's own labels and selector are regenerated from the new uid.
JOB_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")


@dataclass
class Unit:
    """Objects cloned together: AgentJobs with their batch Jobs and pods."""

    agentjobs: list[Obj]
    jobs: list[Obj]
    pods: list[Obj]
    names: list[str] = field(default_factory=list)


class Api:
    """Just enough REST over aiohttp with the admin certificate: fast bulk writes."""

    def __init__(self, info: ClusterInfo) -> None:
        pki = info.workdir / "pki"
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        self.server = info.server
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=CONCURRENCY)
        )

    async def call(self, method: str, path: str, body: Obj | None = None) -> Obj:
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        async with self.session.request(
            method, self.server + path, json=body, headers=headers
        ) as response:
            text = await response.text()
            if response.status >= 300:
                raise RuntimeError(f"{method} {path}: {response.status} {text[:300]}")
            result: Obj = json.loads(text) if text else {}
            return result

    async def close(self) -> None:
        await self.session.close()


def _path(kind: str, namespace: str, name: str = "") -> str:
    base = {
        "agentjobs": f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/agentjobs",
        "jobs": f"/apis/batch/v1/namespaces/{namespace}/jobs",
        "pods": f"/api/v1/namespaces/{namespace}/pods",
    }[kind]
    return f"{base}/{name}" if name else base


async def capture(
    info: ClusterInfo, namespace: str, roots: tuple[str, str]
) -> tuple[Unit, Unit, dict[str, str]]:
    """(the finished chain, the running job, pod name -> log) named by their ``roots``."""
    api = Api(info)
    try:
        listed = {
            kind: (await api.call("GET", _path(kind, namespace)))["items"]
            for kind in ("agentjobs", "jobs", "pods")
        }
        logs = {
            pod["metadata"]["name"]: await _log(api, namespace, pod["metadata"]["name"])
            for pod in listed["pods"]
            if pod["status"].get("phase") == "Succeeded"
        }
    finally:
        await api.close()
    return _unit(listed, roots[0]), _unit(listed, roots[1]), logs


async def _log(api: Api, namespace: str, pod: str) -> str:
    async with api.session.get(f"{api.server}{_path('pods', namespace, pod)}/log") as response:
        return await response.text()


def _unit(listed: dict[str, list[Obj]], root: str) -> Unit:
    """The objects of the chain whose root AgentJob is named ``root``: the AgentJobs
    sharing its chain id, their batch Jobs and pods."""
    chain = _chain_id(next(a for a in listed["agentjobs"] if a["metadata"]["name"] == root))
    agentjobs = [a for a in listed["agentjobs"] if _chain_id(a) == chain]
    owners = {a["metadata"]["name"] for a in agentjobs}
    jobs = [j for j in listed["jobs"] if _labels(j).get(AGENTJOB_LABEL) in owners]
    pods = [p for p in listed["pods"] if _labels(p).get(AGENTJOB_LABEL) in owners]
    names = [o["metadata"]["name"] for o in (*agentjobs, *jobs, *pods)] + [chain]
    return Unit(agentjobs, jobs, pods, sorted(set(names), key=len, reverse=True))


def _labels(obj: Obj) -> dict[str, str]:
    labels: dict[str, str] = obj["metadata"].get("labels") or {}
    return labels


def _chain_id(agentjob: Obj) -> str:
    return _labels(agentjob)[CHAIN_LABEL]


def renamer(unit: Unit, tag: str) -> Callable[[Obj], Obj]:
    """Rename every template name in an object: its last len(tag) characters become
    ``tag`` (lengths kept, names stay DNS labels); one pass over the JSON text."""
    mapping = {name: name[: -len(tag)] + tag for name in unit.names}
    pattern = re.compile("|".join(re.escape(n) for n in unit.names))

    def rename(obj: Obj) -> Obj:
        text = pattern.sub(lambda m: mapping[m.group(0)], json.dumps(obj))
        result: Obj = json.loads(text)
        return result

    return rename


def _fresh(obj: Obj, owner: Obj | None) -> tuple[Obj, Obj]:
    """(the body to create, the status to write after) of one renamed object."""
    body = copy.deepcopy(obj)
    status = body.pop("status", {})
    meta = body["metadata"]
    for key in DROP_META:
        meta.pop(key, None)
    if owner is not None:
        for ref in meta.get("ownerReferences") or []:
            ref["uid"] = owner["metadata"]["uid"]
    return body, status


def _job_body(body: Obj) -> Obj:
    labels = (body["metadata"].get("labels") or {}), body["spec"]["template"]["metadata"]["labels"]
    for each in labels:
        for key in JOB_UID_LABELS:
            each.pop(key, None)
    body["spec"].pop("selector", None)
    body["spec"]["managedBy"] = MANAGED_BY
    return body


async def _create(api: Api, kind: str, obj: Obj, owner: Obj | None) -> Obj:
    body, status = _fresh(obj, owner)
    namespace = body["metadata"]["namespace"]
    if kind == "jobs":
        body = _job_body(body)
    if kind == "pods":
        body["spec"]["nodeName"] = NODE
        for ref in body["metadata"].get("ownerReferences") or []:
            body["metadata"]["labels"]["controller-uid"] = ref["uid"]
            body["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = ref["uid"]
    created = await api.call("POST", _path(kind, namespace), body)
    if status:
        path = _path(kind, namespace, created["metadata"]["name"]) + "/status"
        await api.call("PATCH", path, {"status": status})
    return created


async def _clone_unit(api: Api, unit: Unit, tag: str) -> None:
    rename = renamer(unit, tag)
    by_name: dict[str, Obj] = {}
    for agentjob in unit.agentjobs:
        created = await _create(api, "agentjobs", rename(agentjob), None)
        by_name[created["metadata"]["name"]] = created
    for job in unit.jobs:
        renamed = rename(job)
        owner = by_name[renamed["metadata"]["labels"][AGENTJOB_LABEL]]
        by_name["job:" + renamed["metadata"]["name"]] = await _create(api, "jobs", renamed, owner)
    for pod in unit.pods:
        renamed = rename(pod)
        owner = by_name["job:" + renamed["metadata"]["labels"]["job-name"]]
        await _create(api, "pods", renamed, owner)


async def clone(
    info: ClusterInfo, units: list[tuple[Unit, int]], progress: Callable[[int], None]
) -> None:
    """``count`` copies of each unit, CONCURRENCY clones at a time."""
    api = Api(info)
    gate = asyncio.Semaphore(CONCURRENCY)
    done = 0

    async def one(unit: Unit, index: int, prefix: str) -> None:
        nonlocal done
        async with gate:
            await _clone_unit(api, unit, f"{prefix}{index:06d}")
        done += 1
        if done % 500 == 0:
            progress(done)

    work: list[Awaitable[None]] = []
    for n, (unit, count) in enumerate(units):
        work += [one(unit, i, "fr"[n % 2]) for i in range(count)]
    try:
        await asyncio.gather(*work)
    finally:
        await api.close()


async def fake_node(info: ClusterInfo, port: int) -> None:
    """The Node cloned pods are bound to: Ready, its kubelet at the bench's log server,
    no new pods scheduled to it."""
    api = Api(info)
    taint = {"key": MANAGED_BY, "effect": "NoSchedule"}
    try:
        await api.call(
            "POST", "/api/v1/nodes", {"metadata": {"name": NODE}, "spec": {"taints": [taint]}}
        )
        status = {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Bench"}],
        }
        await api.call("PATCH", f"/api/v1/nodes/{NODE}/status", {"status": status})
    finally:
        await api.close()


LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
LEASE_SECONDS = 40
RENEW_SECONDS = 10.0


def _micro_time() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def heartbeat(info: ClusterInfo) -> None:
    """Renew the fake Node's Lease every ``RENEW_SECONDS``, as a kubelet does, until
    cancelled: the node lifecycle controller then keeps the Node healthy."""
    api = Api(info)
    try:
        spec = {
            "holderIdentity": NODE,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": _micro_time(),
        }
        await api.call("POST", LEASES, {"metadata": {"name": NODE}, "spec": spec})
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            renewal = {"spec": {"renewTime": _micro_time()}}
            # A renewal that fails (the API server busy, or gone at the end of the run) is
            # tried again at the next period, as a kubelet's is.
            with contextlib.suppress(aiohttp.ClientError, OSError, RuntimeError):
                await api.call("PATCH", f"{LEASES}/{NODE}", renewal)
    finally:
        await api.close()


async def remove(info: ClusterInfo, namespace: str, deadline: float = 900.0) -> None:
    """Delete the cloned pods at once (no grace period): no kubelet would ever confirm
    their graceful deletion. One request, done by the API server; its answer (every
    deleted pod) is read and dropped. At 20,000 pods the request outlives the API
    server's own timeout (a 504 after 60 s) while the deletion goes on: the request is
    made again until none is left."""
    api = Api(info)
    pods = f"{api.server}{_path('pods', namespace)}"
    selector = f"fieldSelector=spec.nodeName%3D{NODE}"
    started = time.monotonic()
    try:
        while True:
            async with api.session.delete(f"{pods}?{selector}&gracePeriodSeconds=0") as done:
                async for _ in done.content.iter_chunked(1 << 20):
                    pass
                if done.status < 300:
                    return
                if done.status < 500 or time.monotonic() - started > deadline:
                    raise RuntimeError(f"deleting the cloned pods: {done.status}")
            async with api.session.get(f"{pods}?{selector}&limit=1") as left:
                if left.status < 300 and not (await left.json())["items"]:
                    return
    finally:
        await api.close()


async def log_server(info: ClusterInfo, logs: dict[str, str]) -> tuple[web.AppRunner, int]:
    """A kubelet's ``/containerLogs`` for cloned pods: every pod prints a captured log."""
    text = next(iter(logs.values()), "")

    async def container_logs(request: web.Request) -> web.Response:
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", container_logs)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    pki = info.workdir / "pki"
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki / "node.crt", pki / "node.key")
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port: int = runner.addresses[0][1]
    return runner, port


def dump(path: Path, units: list[Unit]) -> None:
    """The templates, for a look at what is cloned (``--keep``)."""
    path.write_text(json.dumps([u.__dict__ for u in units], indent=1))
