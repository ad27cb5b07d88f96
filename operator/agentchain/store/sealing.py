"""Records that grant something, sealed with the operator key and bound to their subject.

A record the operator writes to Redis and later acts on (a dashboard session, a chain's
workspace, a job's GitHub scope) must not be trusted because of where it is stored:
whoever can write Redis could otherwise forge an admin session, point a chain's push at
another host or refresh a token for another repository.  So each such record carries an
HMAC under a sub-key of the operator key (``signing.py``; the key never reaches Redis),
the same mechanism that seals the webhook queue (``deliveries.py``):

* one purpose per record kind (``signing.*_PURPOSE``), so a seal made for one kind never
  opens another;
* the MAC covers the record's *subject* (what it is about: a session id, a namespace
  and chain id, a namespace, job name and uid) besides its payload, so a genuine record
  copied under another key does not open there;
* every configured key verifies (rotation), the first one seals.

A record that does not open is treated as absent, never as valid, and logged once as a
warning (:func:`refused`): records written before sealing existed are absent too.

AgentJobs are sealed the same way (``policy`` of that: ``core/rules/provenance``): what
the operator writes on an AgentJob and later trusts (its chain position, its
``spec.event``) carries an HMAC in an annotation, under its own sub-key
(``signing.JOB_SEAL_PURPOSE``), bound to the job's namespace and name
(:func:`seal_job`, :func:`placed`, :func:`vouched`). The parts start with which seal
they are, so the position seal never verifies as the event seal; a seal copied onto
another AgentJob, or kept while the event or the chain annotations are edited, does not
verify.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from agentchain import models
from agentchain.core.rules import provenance
from agentchain.store import signing
from agentchain.store.signing import OperatorKeys

log = logging.getLogger(__name__)
MAC_CHARS = 64  # Hex HMAC-SHA256 in front of the payload.
_WARNED_MAX = 4096  # Keys warned about, remembered so a bad record is logged once.
_warned: OrderedDict[str, None] = OrderedDict()


def _parts(subject: Sequence[str], payload: bytes) -> tuple[bytes, ...]:
    return (*(part.encode("utf-8", "surrogatepass") for part in subject), payload)


def mac_of(keys: OperatorKeys, purpose: bytes, subject: Sequence[str], payload: bytes) -> str:
    """The hex seal of ``payload`` about ``subject`` under the current key."""
    return signing.mac(keys.subkeys(purpose)[0], *_parts(subject, payload))


def verified(
    keys: OperatorKeys, purpose: bytes, subject: Sequence[str], payload: bytes, mac: str
) -> bool:
    """Whether ``mac`` is a seal of ``payload`` about ``subject`` under any key."""
    if len(mac) != MAC_CHARS:
        return False
    return signing.verify(keys.subkeys(purpose), mac, *_parts(subject, payload))


def seal(keys: OperatorKeys, purpose: bytes, subject: Sequence[str], payload: str) -> str:
    """``payload`` (JSON) as stored: its seal, then the payload itself."""
    return mac_of(keys, purpose, subject, payload.encode("utf-8")) + payload


def open_sealed(
    keys: OperatorKeys, purpose: bytes, subject: Sequence[str], stored: bytes
) -> bytes | None:
    """The payload of a value :func:`seal` made about ``subject``; None for any other."""
    head, payload = stored[:MAC_CHARS], stored[MAC_CHARS:]
    try:
        mac = head.decode("ascii")
    except UnicodeDecodeError:
        return None
    return payload if verified(keys, purpose, subject, payload, mac) else None


def refused(what: str, key: str, why: str) -> None:
    """Log, once per Redis key, that a record there was not used (forged, altered,
    copied from another subject, or written before records were sealed)."""
    if key in _warned:
        _warned.move_to_end(key)
        return
    _warned[key] = None
    if len(_warned) > _WARNED_MAX:
        _warned.popitem(last=False)
    log.warning("ignoring the %s at Redis key %s: %s; treated as absent", what, key, why)


# AgentJob seals --------------------------------------------------------------------

Obj = dict[str, Any]


def _names(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _annotations(obj: Obj) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _job_mac(keys: OperatorKeys, parts: tuple[bytes, ...]) -> str:
    return signing.mac(keys.subkeys(signing.JOB_SEAL_PURPOSE)[0], *parts)


def _job_verify(keys: OperatorKeys, found: object, parts: tuple[bytes, ...]) -> bool:
    if not isinstance(found, str) or not found:
        return False
    return signing.verify(keys.subkeys(signing.JOB_SEAL_PURPOSE), found, *parts)


def position_seal(
    keys: OperatorKeys, namespace: str, name: str, annotations: Mapping[str, str]
) -> str:
    """The position seal for a job with these chain annotations."""
    return _job_mac(keys, provenance.position_parts(namespace, name, annotations))


def seal_job(keys: OperatorKeys, body: Obj) -> Obj:
    """``body`` (an AgentJob the operator is about to create) under both seals."""
    namespace, name = _names(body)
    annotations = body["metadata"].setdefault("annotations", {})
    for key in (models.SEAL, models.EVENT_SEAL):
        annotations.pop(key, None)
    annotations[models.SEAL] = position_seal(keys, namespace, name, annotations)
    parts = provenance.event_parts(namespace, name, body.get("spec") or {})
    annotations[models.EVENT_SEAL] = _job_mac(keys, parts)
    return body


def placed(keys: OperatorKeys, obj: Obj) -> bool:
    """Whether the operator wrote ``obj``'s chain annotations (its position seal)."""
    namespace, name = _names(obj)
    annotations = _annotations(obj)
    parts = provenance.position_parts(namespace, name, annotations)
    return _job_verify(keys, annotations.get(models.SEAL), parts)


def vouched(keys: OperatorKeys, obj: Obj) -> bool:
    """Whether the operator vouches for ``obj``'s ``spec.event`` (its event seal)."""
    namespace, name = _names(obj)
    parts = provenance.event_parts(namespace, name, obj.get("spec") or {})
    return _job_verify(keys, _annotations(obj).get(models.EVENT_SEAL), parts)
