"""Reading and writing one ``coordination.k8s.io/v1`` Lease (leader election).

A claim is a create (the Lease does not exist yet) or a replace (PUT) carrying the
``resourceVersion`` that was read: if anyone wrote the Lease in between, the API server
answers 409 and the claim failed, which is what makes two replicas unable to both
believe they hold it.  Neither call is retried here (PUT is not in
``apierrors.RETRY_SAFE_METHODS``); the elector tries again next period, from a fresh read.
"""

from __future__ import annotations

from typing import Any

from agentchain.kube import apierrors
from agentchain.kube.clients import path, request
from agentchain.kube.rules.leadership import Record

Obj = dict[str, Any]
API_VERSION = "coordination.k8s.io/v1"


def _url(namespace: str, *name: str) -> str:
    return path("apis", "coordination.k8s.io", "v1", "namespaces", namespace, "leases", *name)


async def read(namespace: str, name: str, *, timeout: float) -> Obj | None:
    """The Lease, or None when there is none yet."""
    try:
        obj: Obj = await request("GET", _url(namespace, name), timeout=timeout)
    except apierrors.NotFound:
        return None
    return obj


async def create(namespace: str, name: str, record: Record, *, timeout: float) -> Obj:
    """Create the Lease holding ``record``; ``apierrors.AlreadyExists`` if someone was first."""
    body = {
        "apiVersion": API_VERSION,
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": record.to_spec(),
    }
    obj: Obj = await request("POST", _url(namespace), body=body, timeout=timeout)
    return obj


async def replace(current: Obj, record: Record, *, timeout: float) -> Obj:
    """Write ``record`` over ``current``; ``apierrors.Conflict`` if it changed since read."""
    meta = current["metadata"]
    body = {
        "apiVersion": API_VERSION,
        "kind": "Lease",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "resourceVersion": meta["resourceVersion"],
        },
        "spec": record.to_spec(),
    }
    obj: Obj = await request(
        "PUT", _url(meta["namespace"], meta["name"]), body=body, timeout=timeout
    )
    return obj
