"""Kubernetes Events with deterministic names.

An Event's name is derived from the object and a caller-chosen key, so an
operator that crashes after emitting and replays the transition gets
``AlreadyExists`` instead of a duplicate Event: "visibly, once".  The object is its
uid, not only its name: an object deleted and created again under the same name
(its Events may outlive it by an hour) gets Events of its own.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any, Literal

from agentchain.kube import apierrors
from agentchain.kube.clients import core_path, request

EventType = Literal["Normal", "Warning"]
COMPONENT = "agentchain-operator"


def event_name(obj_name: str, key: str, uid: str = "") -> str:
    """``<object name>.<digest of the key and the object's uid>``."""
    seed = f"{uid}\0{key}" if uid else key
    digest = hashlib.sha256(seed.encode()).hexdigest()[:16]
    return f"{obj_name[:200]}.{digest}"


async def emit(
    obj: dict[str, Any], type_: EventType, reason: str, message: str, *, key: str
) -> bool:
    """Emit once per (object, key); returns False when it had been emitted already."""
    meta = obj["metadata"]
    now = dt.datetime.now(dt.UTC)
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": event_name(meta["name"], key, str(meta.get("uid") or "")),
            "namespace": meta["namespace"],
        },
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
        },
        "type": type_,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now.isoformat(),
        "lastTimestamp": now.isoformat(),
        "count": 1,
    }
    try:
        await request("POST", core_path(meta["namespace"], "events"), body=body)
    except apierrors.AlreadyExists:
        return False
    except apierrors.Forbidden as exc:
        if "NamespaceTerminating" not in exc.causes:
            raise
        # The namespace is going away with its Events: nothing left to tell.
        return False
    return True
