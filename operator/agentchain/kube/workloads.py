"""Batch Jobs, their pods, logs and the per-job token Secrets; agents' egress policies.

A stopped job's batch Job is deleted with background propagation (:func:`delete_job`):
that removes it at once, so the Job controller starts no other pod for it, and lets the
garbage collector delete its pod the ordinary way: SIGTERM, the pod's
``terminationGracePeriodSeconds`` for the agent to wrap up, then SIGKILL.

Output capture reads ``pods/log`` through the API server (so it works the same
on the test suite's real node, kind or any cluster) and keeps only a bounded tail while
streaming, so a chatty agent cannot blow up the operator's memory.
"""

from __future__ import annotations

import base64
from typing import Any

from agentchain.kube import apierrors
from agentchain.kube.clients import batch_path, core_path, open_response, path, request

Obj = dict[str, Any]


async def create_job(namespace: str, body: Obj) -> tuple[Obj | None, bool]:
    try:
        job: Obj = await request("POST", batch_path(namespace), body=body)
        return job, True
    except apierrors.AlreadyExists:
        pass  # Ours already: the name is the AgentJob's, deterministic.
    return await get_job(namespace, body["metadata"]["name"]), False


async def delete_job(namespace: str, name: str) -> None:
    """Delete the batch Job and, gracefully, its pod; a Job already gone is done."""
    try:
        await request(
            "DELETE", batch_path(namespace, name), body={"propagationPolicy": "Background"}
        )
    except apierrors.NotFound:
        pass


async def get_job(namespace: str, name: str) -> Obj | None:
    try:
        job: Obj = await request("GET", batch_path(namespace, name))
    except apierrors.NotFound:
        return None
    return job


async def list_pods(namespace: str, label_selector: str) -> list[Obj]:
    params = {"labelSelector": label_selector}
    pods = await request("GET", core_path(namespace, "pods"), params=params)
    return list(pods.get("items") or [])


async def read_log_tail(
    namespace: str, pod: str, container: str, max_bytes: int
) -> tuple[bytes, int] | None:
    """The last ``max_bytes`` of a container's log and its full size; None if gone."""

    url = core_path(namespace, "pods", pod, "log")
    tail = bytearray()
    total = 0
    try:
        async with open_response("GET", url, params={"container": container}) as resp:
            async for chunk in resp.content.iter_chunked(64 * 1024):
                total += len(chunk)
                tail += chunk
                if len(tail) > 2 * max_bytes:
                    del tail[: len(tail) - max_bytes]
    except (apierrors.NotFound, apierrors.BadRequest):  # 400: the container has not started.
        return None
    return bytes(tail[-max_bytes:]), total


async def ensure_secret(namespace: str, name: str, data: dict[str, str], owner: Obj) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }
    try:
        await request("POST", core_path(namespace, "secrets"), body=body)
    except apierrors.AlreadyExists:
        pass


async def read_config_map(namespace: str, name: str) -> dict[str, str] | None:
    try:
        cm = await request("GET", core_path(namespace, "configmaps", name))
    except apierrors.NotFound:
        return None
    return dict(cm.get("data") or {})


# --- workspace volumes ------------------------------------------------------------


async def ensure_claim(namespace: str, body: Obj) -> bool:
    """Create the PersistentVolumeClaim ``body``; False when it existed (same name: done)."""
    try:
        await request("POST", core_path(namespace, "persistentvolumeclaims"), body=body)
    except apierrors.AlreadyExists:
        return False
    return True


async def claim_names(namespace: str, label_selector: str) -> list[str]:
    """The names of the namespace's claims carrying ``label_selector``."""
    params = {"labelSelector": label_selector}
    found = await request("GET", core_path(namespace, "persistentvolumeclaims"), params=params)
    return [str(item["metadata"]["name"]) for item in found.get("items") or []]


async def delete_claim(namespace: str, name: str) -> None:
    try:
        await request("DELETE", core_path(namespace, "persistentvolumeclaims", name))
    except apierrors.NotFound:
        pass


# --- agent egress policies ----------------------------------------------------------
APPLY_PATCH = "application/apply-patch+yaml"
FIELD_MANAGER = "agentchain"


def _network_policy_path(namespace: str, *rest: str) -> str:
    group = ("apis", "networking.k8s.io", "v1")
    return path(*group, "namespaces", namespace, "networkpolicies", *rest)


async def apply_network_policy(body: Obj) -> None:
    """Server-side apply ``body``: created or brought to it in one idempotent request (a
    policy already as wanted is not written again)."""
    meta = body["metadata"]
    params = {"fieldManager": FIELD_MANAGER, "force": "true"}
    url = _network_policy_path(meta["namespace"], meta["name"])
    await request("PATCH", url, params=params, body=body, content_type=APPLY_PATCH)


async def delete_network_policy(namespace: str, name: str) -> None:
    try:
        await request("DELETE", _network_policy_path(namespace, name))
    except apierrors.NotFound:
        pass
