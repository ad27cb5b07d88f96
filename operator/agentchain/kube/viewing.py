"""Read-only views for the dashboard: an object's Events, a running pod's log, followed.

Separate from the engine's reads (``workloads.py``) because these run per viewer and
must never hold up the engine: Events are one bounded list, and a followed log is
one long-lived ``pods/log?follow=true`` stream that ends when the container does,
when the viewer leaves, or after :data:`FOLLOW_MAX_SECONDS` (the page reconnects).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from agentchain.kube import apierrors
from agentchain.kube.clients import core_path, open_response, request

Obj = dict[str, Any]
EVENTS_LIMIT = 100
# The page's log stream starts again after this long; the API server cuts idle streams.
FOLLOW_MAX_SECONDS = 600.0
# Lines of a followed log sent before the live ones: what the agent did lately, not megabytes.
FOLLOW_TAIL_LINES = 2000


async def events_for(namespace: str, kind: str, name: str) -> list[Obj]:
    """Events about ``kind``/``name``, oldest first (at most :data:`EVENTS_LIMIT`)."""
    params = {
        "fieldSelector": f"involvedObject.kind={kind},involvedObject.name={name}",
        "limit": str(EVENTS_LIMIT),
    }
    answer = await request("GET", core_path(namespace, "events"), params=params)
    items: list[Obj] = list((answer or {}).get("items") or [])
    items.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return items


async def follow_log(namespace: str, pod: str, container: str) -> AsyncIterator[bytes]:
    """The container's log as it is written; nothing when the pod or container is gone."""
    url = core_path(namespace, "pods", pod, "log")
    params = {"container": container, "follow": "true", "tailLines": str(FOLLOW_TAIL_LINES)}
    try:
        async with open_response("GET", url, params=params, timeout=FOLLOW_MAX_SECONDS) as resp:
            async for chunk in resp.content.iter_any():
                yield chunk
    except (apierrors.NotFound, apierrors.BadRequest):  # 400: the container has not started.
        return
    except (aiohttp.ClientError, TimeoutError):
        return  # The stream broke or ran its time: the page reconnects.
