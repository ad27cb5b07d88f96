"""Reading and writing AgentJobs and AiAgents (the custom resources).

Creation is idempotent by design: names are derived deterministically, and an
``AlreadyExists`` answer returns the existing object, which is what makes a
replayed chain transition harmless after an operator restart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agentchain.kube import apierrors, watching
from agentchain.kube.clients import MERGE_PATCH, custom_path, request

AGENTJOBS = "agentjobs"
AIAGENTS = "aiagents"
Obj = dict[str, Any]


async def get(namespace: str, plural: str, name: str) -> Obj | None:
    try:
        obj: Obj = await request("GET", custom_path(namespace, plural, name))
    except apierrors.NotFound:
        return None
    return obj


async def list_objects(
    namespace: str | None,
    plural: str,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    limit: int | None = None,
    continue_token: str | None = None,
) -> tuple[list[Obj], str | None]:
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    if limit:
        params["limit"] = str(limit)
    if continue_token:
        params["continue"] = continue_token
    result: Obj = await request("GET", custom_path(namespace, plural), params=params)
    items: list[Obj] = result.get("items", [])
    return items, (result.get("metadata") or {}).get("continue") or None


async def create_only(
    namespace: str, plural: str, body: Obj, *, timeout: float | None = None
) -> Obj:
    """Create; AlreadyExists is the caller's to judge (raised as ``apierrors.AlreadyExists``)."""
    obj: Obj = await request("POST", custom_path(namespace, plural), body=body, timeout=timeout)
    return obj


async def create(namespace: str, plural: str, body: Obj) -> tuple[Obj, bool]:
    """Create, or return the existing object of that name: (object, created)."""
    name = body["metadata"]["name"]
    try:
        return await create_only(namespace, plural, body), True
    except apierrors.AlreadyExists:
        pass
    existing = await get(namespace, plural, name)
    if existing is None:  # Deleted between our two calls: treat as done, nothing to redo.
        return body, False
    return existing, False


async def _patch(namespace: str, plural: str, name: str, body: Obj, *sub: str) -> Obj | None:
    """Merge-patch; a vanished object is not an error."""
    url = custom_path(namespace, plural, name, *sub)
    try:
        obj: Obj = await request("PATCH", url, body=body, content_type=MERGE_PATCH)
    except apierrors.NotFound:
        return None
    return obj


async def patch_status(namespace: str, plural: str, name: str, status: Obj) -> Obj | None:
    """Merge-patch the status subresource; a vanished object is not an error."""
    return await _patch(namespace, plural, name, {"status": status}, "status")


async def patch_status_at(
    namespace: str, plural: str, name: str, version: str | None, status: Obj
) -> Obj | None:
    """Merge-patch the status subresource if the object is still at ``version``, else
    ``apierrors.Conflict``: for a list (conditions) that a merge patch replaces whole."""
    body = {"metadata": {"resourceVersion": version}, "status": status}
    return await _patch(namespace, plural, name, body, "status")


async def patch_metadata(
    namespace: str, plural: str, name: str, *, labels: Obj, annotations: Obj
) -> Obj | None:
    body = {"metadata": {"labels": labels, "annotations": annotations}}
    return await _patch(namespace, plural, name, body)


async def list_version(namespace: str, plural: str) -> str:
    """The collection's current resourceVersion (one object read at most): where to
    start a watch that sees every change from now on."""
    result: Obj = await request("GET", custom_path(namespace, plural), params={"limit": "1"})
    return str((result.get("metadata") or {}).get("resourceVersion") or "")


async def watch(
    namespace: str, plural: str, resource_version: str, timeout_seconds: int
) -> AsyncIterator[Obj]:
    """Watch events (``{"type", "object"}``) from ``resource_version`` on, bookmarks
    included, until the API server ends the stream (``timeout_seconds``).

    An expired version raises ``apierrors.Gone``, at once or as an ERROR event.
    """
    params = {
        "watch": "true",
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(timeout_seconds),
    }
    url = custom_path(namespace, plural)
    async for event in watching.stream(url, params, timeout_seconds + 30):
        yield event
