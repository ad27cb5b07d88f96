"""GitHub webhook signatures (``X-Hub-Signature-256``), checked in constant time.

Fail closed by construction: no secret, an empty secret, a missing header or any
prefix other than ``sha256=`` is a refusal, never a pass.  Up to two secrets are
tried so a secret can be rotated without dropping deliveries (GitHub signs with
one secret; the operator accepts old and new until the Secret is updated again).
Every candidate is compared, even after a match, so the time taken does not say
which secret matched.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

PREFIX = "sha256="
MAX_SECRETS = 2
_HEX_DIGEST_LENGTH = 64


def sign(body: bytes | bytearray, secret: str) -> str:
    """The header value GitHub sends for ``body`` signed with ``secret``."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return PREFIX + digest


def verify_signature(body: bytes | bytearray, header: str | None, secrets: Sequence[str]) -> bool:
    """Whether ``header`` is a valid ``sha256=`` HMAC of ``body`` under one of ``secrets``."""
    usable = [s for s in secrets[:MAX_SECRETS] if s]
    if not usable or len(usable) != len(secrets[:MAX_SECRETS]):
        # An empty secret would make anyone's HMAC-with-empty-key valid: refuse outright.
        return False
    if header is None or not header.startswith(PREFIX):
        return False
    presented = header[len(PREFIX) :].strip().lower()
    if len(presented) != _HEX_DIGEST_LENGTH or not presented.isascii():
        return False
    matched = False
    for secret in usable:
        expected = sign(body, secret)[len(PREFIX) :]
        matched |= hmac.compare_digest(expected.encode("ascii"), presented.encode("ascii"))
    return matched
