"""The operator's seals on the AgentJobs it writes (``policy.provenance`` says why).

A seal is ``HMAC(sub-key, sealed parts)`` in an annotation, under the operator key's
own sub-key for this purpose (``signing.JOB_SEAL_PURPOSE``), so no token, queue
signature or other record verifies as a seal; the parts start with which seal they
are, so the position seal never verifies as the event seal. Both bind to the job's
namespace and name: a seal copied onto another AgentJob, or kept while the event or the
chain annotations are edited, does not verify.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentchain import models
from agentchain.core.rules import provenance
from agentchain.store import signing
from agentchain.store.signing import OperatorKeys

Obj = dict[str, Any]


def _names(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _annotations(obj: Obj) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _mac(keys: OperatorKeys, parts: tuple[bytes, ...]) -> str:
    return signing.mac(keys.subkeys(signing.JOB_SEAL_PURPOSE)[0], *parts)


def _verify(keys: OperatorKeys, found: object, parts: tuple[bytes, ...]) -> bool:
    if not isinstance(found, str) or not found:
        return False
    return signing.verify(keys.subkeys(signing.JOB_SEAL_PURPOSE), found, *parts)


def position_seal(
    keys: OperatorKeys, namespace: str, name: str, annotations: Mapping[str, str]
) -> str:
    """The position seal for a job with these chain annotations."""
    return _mac(keys, provenance.position_parts(namespace, name, annotations))


def seal(keys: OperatorKeys, body: Obj) -> Obj:
    """``body`` (an AgentJob the operator is about to create) under both seals."""
    namespace, name = _names(body)
    annotations = body["metadata"].setdefault("annotations", {})
    for key in (models.SEAL, models.EVENT_SEAL):
        annotations.pop(key, None)
    annotations[models.SEAL] = position_seal(keys, namespace, name, annotations)
    parts = provenance.event_parts(namespace, name, body.get("spec") or {})
    annotations[models.EVENT_SEAL] = _mac(keys, parts)
    return body


def placed(keys: OperatorKeys, obj: Obj) -> bool:
    """Whether the operator wrote ``obj``'s chain annotations (its position seal)."""
    namespace, name = _names(obj)
    annotations = _annotations(obj)
    parts = provenance.position_parts(namespace, name, annotations)
    return _verify(keys, annotations.get(models.SEAL), parts)


def vouched(keys: OperatorKeys, obj: Obj) -> bool:
    """Whether the operator vouches for ``obj``'s ``spec.event`` (its event seal)."""
    namespace, name = _names(obj)
    parts = provenance.event_parts(namespace, name, obj.get("spec") or {})
    return _verify(keys, _annotations(obj).get(models.EVENT_SEAL), parts)
