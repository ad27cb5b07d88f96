"""Errors raised by the Redis store, one hierarchy for the whole package.

Shaped after httpx's ``_exceptions.py``: callers (the job API) catch :class:`StoreError`
once and map subclasses to HTTP answers (size errors → 413, invalid input → 422, not
JSON → 422, over quota → 413, Redis full → 507, contention → 409/503). Size errors
carry ``size`` and ``limit`` as attributes so the API can put both numbers in its JSON
body without parsing the message, and the message itself names them so logs are
self-explanatory.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class for everything the store refuses or cannot do."""


class InvalidKeyError(StoreError):
    """A tenant, namespace or key is empty, too long, or otherwise unusable."""


class ValueTooLargeError(StoreError):
    """A value is larger than the store accepts."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes, over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class NotJSONError(StoreError):
    """A structured read found a value that is not valid JSON."""


class AnchorTooLargeError(ValueTooLargeError):
    """An anchor's compact JSON serialization is over its size budget."""


class InvalidAnchorError(StoreError):
    """An anchor has unknown fields or fields of the wrong type."""


class QuotaExceededError(StoreError):
    """A write would take a tenant past its store quota (entries or bytes)."""

    def __init__(self, tenant: str, what: str, used: int, limit: int) -> None:
        super().__init__(
            f"namespace {tenant!r} is at its store quota: {used} of {limit} {what} in use; "
            "delete entries or let them expire"
        )
        self.what = what
        self.used = used
        self.limit = limit


class StoreFullError(StoreError):
    """Redis is at its memory limit and refuses writes (it never evicts)."""


class ContentionError(StoreError):
    """An optimistic (WATCH/MULTI) update lost too many races in a row."""
