"""The Kubernetes API's refusals as typed exceptions, and when a call is worth retrying.

Every error answer of the API server carries a ``Status`` object (``reason``, ``code``,
``message``, ``details``); :func:`from_status` turns it into one class of the hierarchy
below, chosen by the ``reason`` first and the HTTP code second (a proxy in front of the
API server may answer with no Status at all).  Callers catch what they mean
(``except NotFound``) instead of comparing codes, and nothing above ``agentchain.kube``
sees an HTTP library's exception: a connection that failed for good is
:class:`Unreachable`.

The retry decision and its schedule are pure functions here, tested on their own; the
one request function in ``clients`` applies them.  Like kopf's own client: 429 and
500/502/503/504 and broken connections are retried with capped exponential backoff and
jitter, honouring ``Retry-After`` (or the Status' ``details.retryAfterSeconds``), within
a bounded number of attempts and a bounded total time.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


class KubeError(Exception):
    """Anything the Kubernetes API boundary raises."""


class Unreachable(KubeError):
    """No answer: the connection failed or timed out, retries included."""


class Fenced(KubeError):
    """Not sent: a write of the engine after this replica's leadership ran out."""


class ApiError(KubeError):
    """The API server answered with an error ``Status``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str = "",
        details: Obj | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}" if message else f"{code} {reason}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details: Obj = details or {}
        self.retry_after = retry_after

    @property
    def causes(self) -> frozenset[str]:
        """The ``reason`` of each of ``details.causes`` (e.g. ``NamespaceTerminating``)."""
        causes = self.details.get("causes")
        if not isinstance(causes, list):
            return frozenset()
        return frozenset(str(c.get("reason")) for c in causes if isinstance(c, dict))


class BadRequest(ApiError):
    """400: e.g. a log asked for of a container that has not started."""


class Unauthorized(ApiError):
    """401: the credentials are not (or no longer) valid."""


class Forbidden(ApiError):
    """403: RBAC refused, or the namespace is being deleted."""


class NotFound(ApiError):
    """404."""


class Conflict(ApiError):
    """409: a stale resourceVersion or a failed precondition (e.g. another uid)."""


class AlreadyExists(Conflict):
    """409 ``AlreadyExists``: a create whose name is taken (by design: done already)."""


class Gone(ApiError):
    """410: a watch's or list's resourceVersion has expired."""


class Invalid(ApiError):
    """422: the object failed validation."""


class TooManyRequests(ApiError):
    """429: API priority and fairness pushed back; ``retry_after`` says when to come back."""


class ServerError(ApiError):
    """5xx: the API server (or what stands in front of it) failed."""


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Gone": Gone,
    "Expired": Gone,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
}
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_class(code: int, reason: str) -> type[ApiError]:
    if reason in _BY_REASON and (reason != "AlreadyExists" or code == 409):
        return _BY_REASON[reason]
    if code >= 500:
        return ServerError
    return _BY_CODE.get(code, ApiError)


def from_status(
    code: int, body: bytes | str | Obj, headers: Mapping[str, str] | None = None
) -> ApiError:
    """The exception for an error answer: its code, its body (a Status, or anything
    else a proxy may answer) and its headers (``Retry-After``)."""
    status = _status(body)
    reason = str(status.get("reason") or "") or f"HTTP{code}"
    details = status.get("details") if isinstance(status.get("details"), dict) else {}
    retry_after = parse_retry_after((headers or {}).get("Retry-After"))
    if retry_after is None and details:
        retry_after = parse_retry_after(str(details.get("retryAfterSeconds") or ""))
    cls = error_class(code, reason)
    message = str(status.get("message") or "")[:1024]
    return cls(code, reason, message, details, retry_after=retry_after)


def _status(body: bytes | str | Obj) -> Obj:
    if isinstance(body, dict):
        return body
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) and parsed.get("kind") == "Status" else {}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header; only the delay form (what the API server
    sends), not an HTTP date.  Nonsense is ignored: the backoff applies instead."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if seconds != seconds or seconds < 0 or seconds == float("inf"):
        return None
    return seconds


RETRIED_CODES = frozenset({429, 500, 502, 503, 504})
# Every verb the operator uses is safe to repeat: GET and LIST read; PATCH is a merge
# patch (the same patch twice is the same object); DELETE of a gone object is NotFound,
# which every caller takes as done; POST only ever creates objects under deterministic
# names, and every create call site takes AlreadyExists as "done already" (a create whose
# answer was lost is then found on the retry).  A new verb or a create with a generated
# name must be added here deliberately.
RETRY_SAFE_METHODS = frozenset({"GET", "PATCH", "DELETE", "POST"})


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one call tries: bounded attempts and total time, capped backoff."""

    attempts: int = 6
    first_delay: float = 0.1  # A transient 500 mid-hop is retried well within a second.
    max_delay: float = 5.0
    # Retry-After asks for at most this; a longer wait is the caller's (or the resync's).
    max_retry_after: float = 10.0
    budget: float = 30.0

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """The wait after failed attempt number ``attempt`` (1-based): exponential,
        capped, with jitter in [50%, 100%] so replicas do not retry in lockstep."""
        delay = min(self.max_delay, self.first_delay * 2.0 ** (attempt - 1))
        return delay * (rng or random).uniform(0.5, 1.0)

    def delay(
        self,
        method: str,
        failure: BaseException,
        attempt: int,
        elapsed: float,
        rng: random.Random | None = None,
    ) -> float | None:
        """Seconds to wait before trying again, or None: give up and raise ``failure``."""
        if method not in RETRY_SAFE_METHODS or attempt >= self.attempts:
            return None
        if isinstance(failure, ApiError):
            if failure.code not in RETRIED_CODES:
                return None
            if failure.retry_after is not None:
                if failure.retry_after > self.max_retry_after:
                    return None
                wait = failure.retry_after
            else:
                wait = self.backoff(attempt, rng)
        elif isinstance(failure, Unreachable):
            wait = self.backoff(attempt, rng)
        else:
            return None
        return wait if elapsed + wait <= self.budget else None


DEFAULT_POLICY = RetryPolicy()
