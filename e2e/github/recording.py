"""What the stand-in saw: every exchange, and the violations that must fail a test."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from e2e.github import model

# Request headers a test may want to assert on; Authorization is kept only as its kind.
HEADERS_OF_INTEREST = (
    "Accept",
    "User-Agent",
    "X-GitHub-Api-Version",
    "Content-Type",
    "If-None-Match",
)


@dataclass
class Violation:
    """A request the real API would refuse (or a route it does not have), or a stand-in bug.

    kind: "request" (parameters/body off the description), "unknown-route",
    "unimplemented" (GitHub has it, the stand-in does not), "response" (the stand-in
    answered with a body the description does not allow: a stand-in bug).
    """

    kind: str
    method: str
    path: str
    operation_id: str | None
    problems: list[str]

    def __str__(self) -> str:
        return f"{self.kind}: {self.method} {self.path} ({self.operation_id}): " + "; ".join(
            self.problems
        )


@dataclass
class Exchange:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    identity: str
    operation_id: str | None = None
    api_version: str = "2022-11-28"
    status: int = 0
    response: Any = None
    response_headers: dict[str, str] = field(default_factory=dict)
    fault: str | None = None
    violations: list[Violation] = field(default_factory=list)
    at: datetime = field(default_factory=model.now)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["at"] = model.iso(self.at)
        return data


class Recording:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exchanges: list[Exchange] = []

    def add(self, exchange: Exchange) -> None:
        with self._lock:
            self._exchanges.append(exchange)

    def exchanges(
        self,
        operation_id: str | None = None,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
    ) -> list[Exchange]:
        with self._lock:
            found = list(self._exchanges)
        return [
            e
            for e in found
            if operation_id in (None, e.operation_id)
            and (method is None or method.upper() == e.method)
            and path in (None, e.path)
            and status in (None, e.status)
        ]

    @property
    def violations(self) -> list[Violation]:
        return [v for e in self.exchanges() for v in e.violations]

    def take_violations(self) -> list[Violation]:
        with self._lock:
            found = [v for e in self._exchanges for v in e.violations]
            for exchange in self._exchanges:
                exchange.violations = []
        return found

    def clear(self) -> None:
        with self._lock:
            self._exchanges.clear()
