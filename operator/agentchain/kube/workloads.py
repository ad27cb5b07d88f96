"""Batch Jobs, their pods, logs and the per-job token Secrets.

Output capture reads ``pods/log`` through the API server (so it works the same
on the local node, kind or a real cluster) and keeps only a bounded tail while
streaming, so a chatty agent cannot blow up the operator's memory.
"""

from __future__ import annotations

import base64
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agentchain.kube.clients import (
    already_exists,
    batch,
    call,
    call_json,
    core,
    not_found,
)

Obj = dict[str, Any]


async def create_job(namespace: str, body: Obj) -> tuple[Obj | None, bool]:
    try:
        job: Obj = await call_json(batch().create_namespaced_job, namespace, body)
        return job, True
    except ApiException as exc:
        if not already_exists(exc):
            raise
    return await get_job(namespace, body["metadata"]["name"]), False


async def get_job(namespace: str, name: str) -> Obj | None:
    try:
        job: Obj = await call_json(batch().read_namespaced_job, name, namespace)
    except ApiException as exc:
        if not_found(exc):
            return None
        raise
    return job


async def set_owner(namespace: str, name: str, owner: Obj) -> Obj | None:
    """Make ``owner`` the batch Job's controller; None when the Job is gone."""
    patch = {"metadata": {"ownerReferences": [owner]}}
    try:
        job: Obj = await call_json(
            batch().patch_namespaced_job,
            name,
            namespace,
            patch,
            _content_type="application/merge-patch+json",
        )
    except ApiException as exc:
        if not_found(exc):
            return None
        raise
    return job


async def delete_job(namespace: str, name: str, uid: str | None = None) -> None:
    """Delete the batch Job and its pods (the one with ``uid``, when given)."""
    preconditions = client.V1Preconditions(uid=uid) if uid is not None else None
    body = client.V1DeleteOptions(propagation_policy="Background", preconditions=preconditions)
    try:
        await call_json(batch().delete_namespaced_job, name, namespace, body=body)
    except ApiException as exc:
        if not (not_found(exc) or already_exists(exc)):  # 409: another Job by now.
            raise


async def list_pods(namespace: str, label_selector: str) -> list[Obj]:
    pods = await call_json(core().list_namespaced_pod, namespace, label_selector=label_selector)
    return list(pods.get("items") or [])


async def read_log_tail(
    namespace: str, pod: str, container: str, max_bytes: int
) -> tuple[bytes, int] | None:
    """The last ``max_bytes`` of a container's log and its full size; None if gone."""

    def _read() -> tuple[bytes, int]:
        resp: Any = core().read_namespaced_pod_log(
            pod, namespace, container=container, _preload_content=False
        )
        tail = bytearray()
        total = 0
        try:
            for chunk in resp.stream(64 * 1024):
                total += len(chunk)
                tail += chunk
                if len(tail) > 2 * max_bytes:
                    del tail[: len(tail) - max_bytes]
        finally:
            resp.release_conn()
        return bytes(tail[-max_bytes:]), total

    try:
        result: tuple[bytes, int] = await call(_read)
    except ApiException as exc:
        if not_found(exc) or exc.status == 400:
            return None
        raise
    return result


async def ensure_secret(namespace: str, name: str, data: dict[str, str], owner: Obj) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }
    try:
        await call_json(core().create_namespaced_secret, namespace, body)
    except ApiException as exc:
        if not already_exists(exc):
            raise


async def read_config_map(namespace: str, name: str) -> dict[str, str] | None:
    try:
        cm = await call_json(core().read_namespaced_config_map, name, namespace)
    except ApiException as exc:
        if not_found(exc):
            return None
        raise
    return dict(cm.get("data") or {})
