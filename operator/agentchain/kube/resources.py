"""Reading and writing AgentJobs and AiAgents (the custom resources).

Creation is idempotent by design: names are derived deterministically, and an
``AlreadyExists`` answer returns the existing object, which is what makes a
replayed chain transition harmless after an operator restart.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from agentchain.kube.clients import GROUP, VERSION, already_exists, call, custom, not_found

AGENTJOBS = "agentjobs"
AIAGENTS = "aiagents"
Obj = dict[str, Any]


async def get(namespace: str, plural: str, name: str) -> Obj | None:
    try:
        obj: Obj = await call(
            custom().get_namespaced_custom_object, GROUP, VERSION, namespace, plural, name
        )
    except ApiException as exc:
        if not_found(exc):
            return None
        raise
    return obj


async def list_objects(
    namespace: str | None,
    plural: str,
    *,
    label_selector: str | None = None,
    limit: int | None = None,
    continue_token: str | None = None,
) -> tuple[list[Obj], str | None]:
    kwargs: dict[str, Any] = {}
    if label_selector:
        kwargs["label_selector"] = label_selector
    if limit:
        kwargs["limit"] = limit
    if continue_token:
        kwargs["_continue"] = continue_token
    result: Obj
    if namespace:
        api = custom().list_namespaced_custom_object
        result = await call(api, GROUP, VERSION, namespace, plural, **kwargs)
    else:
        result = await call(custom().list_cluster_custom_object, GROUP, VERSION, plural, **kwargs)
    items: list[Obj] = result.get("items", [])
    return items, (result.get("metadata") or {}).get("continue") or None


async def create(namespace: str, plural: str, body: Obj) -> tuple[Obj, bool]:
    """Create, or return the existing object of that name: (object, created)."""
    name = body["metadata"]["name"]
    try:
        obj: Obj = await call(
            custom().create_namespaced_custom_object, GROUP, VERSION, namespace, plural, body
        )
        return obj, True
    except ApiException as exc:
        if not already_exists(exc):
            raise
    existing = await get(namespace, plural, name)
    if existing is None:  # Deleted between our two calls: treat as done, nothing to redo.
        return body, False
    return existing, False


async def patch_status(namespace: str, plural: str, name: str, status: Obj) -> Obj | None:
    """Merge-patch the status subresource; a vanished object is not an error."""
    try:
        obj: Obj = await call(
            custom().patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            {"status": status},
        )
    except ApiException as exc:
        if not_found(exc):
            return None
        raise
    return obj


async def patch_metadata(
    namespace: str, plural: str, name: str, *, labels: Obj, annotations: Obj
) -> Obj | None:
    body = {"metadata": {"labels": labels, "annotations": annotations}}
    try:
        obj: Obj = await call(
            custom().patch_namespaced_custom_object, GROUP, VERSION, namespace, plural, name, body
        )
    except ApiException as exc:
        if not_found(exc):
            return None
        raise
    return obj
