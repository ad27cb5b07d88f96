"""The operator key: one secret from which job tokens and queue signatures derive.

The key comes from a Secret the chart generates (``AGENTCHAIN_OPERATOR_KEY_FILE``) and
never reaches Redis, so nothing Redis holds can be turned into a token or a queued job:
job tokens are ``HMAC(key, job identity)`` with only their digest stored
(``tokens.py``), and every queued webhook job carries an HMAC the dispatcher checks
(``deliveries.py``). Each use gets its own sub-key (``HMAC(key, purpose)``), so a value
made for one purpose never verifies for another.

Several keys may be configured, one per line, for rotation: the first signs and
derives, every one of them verifies (and revokes).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

TOKEN_PURPOSE = b"agentchain/job-token/v1"
QUEUE_PURPOSE = b"agentchain/webhook-queue/v1"
JOB_SEAL_PURPOSE = b"agentchain/agentjob-seal/v1"
SESSION_RECORD_PURPOSE = b"agentchain/dashboard-session-record/v1"
WORKSPACE_PURPOSE = b"agentchain/chain-workspace/v1"
GITHUB_SCOPE_PURPOSE = b"agentchain/github-job-scope/v1"
PULL_CHAIN_PURPOSE = b"agentchain/pull-chain/v1"
JOB_REVIEW_PURPOSE = b"agentchain/job-review/v1"


class OperatorKeys:
    """The configured keys; :meth:`subkeys` gives the per-purpose keys, current first."""

    def __init__(self, secrets: Sequence[str | bytes]) -> None:
        raw = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in secrets]
        if not raw or not all(raw):
            raise ValueError("at least one non-empty operator key is required")
        self._keys: tuple[bytes, ...] = tuple(raw)
        # Derived once per purpose: a webhook delivery seals with two of them.
        self._derived: dict[bytes, tuple[bytes, ...]] = {}

    def subkeys(self, purpose: bytes) -> tuple[bytes, ...]:
        derived = self._derived.get(purpose)
        if derived is None:
            derived = tuple(hmac.new(key, purpose, hashlib.sha256).digest() for key in self._keys)
            self._derived[purpose] = derived
        return derived


def mac(key: bytes, *parts: bytes) -> str:
    """Hex HMAC-SHA256 over ``parts``, length-prefixed so no two tuples collide."""
    signer = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        signer.update(len(part).to_bytes(8, "big"))
        signer.update(part)
    return signer.hexdigest()


def verify(keys: Sequence[bytes], expected_hex: str, *parts: bytes) -> bool:
    """Whether any key's :func:`mac` over ``parts`` is ``expected_hex`` (constant time)."""
    ok = False
    for key in keys:  # Every key, even after a match: timing says nothing about which.
        ok |= hmac.compare_digest(mac(key, *parts), expected_hex)
    return ok
