"""Answers a test orders in advance: the next N matching requests get an error instead.

Each kind is what GitHub sends in that situation, headers included, so a client's retry
and back-off logic is exercised by the real signals (``Retry-After``, ``X-RateLimit-*``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

DOCS = "https://docs.github.com/rest"
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
    "again. If you reach out to GitHub Support for help, please include the request ID "
    "0000:0000:0000000:0000000:00000000."
)
KINDS = ("forbidden", "not_found", "rate_limit", "secondary_rate_limit", "server_error")


@dataclass
class Fault:
    kind: str
    times: int
    method: str | None = None  # None: any method
    route: str | None = None  # an operationId, a path template, or a literal path; None: any
    retry_after: int = 1

    def matches(self, method: str, path: str, template: str, operation_id: str) -> bool:
        if self.method is not None and self.method.upper() != method:
            return False
        return self.route in (None, path, template, operation_id)

    def answer(self, limit: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        reset = str(int(time.time()) + self.retry_after)
        if self.kind == "forbidden":
            return 403, _error("Resource not accessible by integration", 403), {}
        if self.kind == "not_found":
            return 404, _error("Not Found", 404), {}
        if self.kind == "server_error":
            return 500, _error("Server Error", 500), {}
        headers = {
            "Retry-After": str(self.retry_after),
            "X-RateLimit-Reset": reset,
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Resource": "core",
        }
        if self.kind == "rate_limit":
            headers.update({"X-RateLimit-Remaining": "0", "X-RateLimit-Used": str(limit)})
            message = "API rate limit exceeded for installation."
            return 429, _error(message, 429), headers
        # Secondary limits keep the primary budget: remaining stays > 0.
        headers.update({"X-RateLimit-Remaining": str(limit - 1), "X-RateLimit-Used": "1"})
        return 403, _error(SECONDARY_MESSAGE, 403), headers


def _error(message: str, status: int) -> dict[str, Any]:
    return {"message": message, "documentation_url": DOCS, "status": str(status)}


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[Fault] = []

    def add(self, fault: Fault) -> None:
        if fault.kind not in KINDS:
            raise ValueError(f"unknown fault kind {fault.kind!r}; one of {KINDS}")
        if fault.times < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self._pending.append(fault)

    def take(self, method: str, path: str, template: str, operation_id: str) -> Fault | None:
        """The first pending fault matching the request, counted down once."""
        with self._lock:
            for fault in self._pending:
                if fault.matches(method, path, template, operation_id):
                    fault.times -= 1
                    if fault.times == 0:
                        self._pending.remove(fault)
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()

    @property
    def pending(self) -> list[Fault]:
        with self._lock:
            return list(self._pending)
