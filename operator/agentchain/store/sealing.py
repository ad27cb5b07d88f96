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
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence

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
