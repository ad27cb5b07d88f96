"""The credentials on the operator's API calls: reused briefly, refreshed after.

The official client's ``auth_settings`` runs the token refresh hook on every call,
which was measured at ~0.5 ms of CPU per request; the headers are therefore reused
for ``AUTH_REFRESH_SECONDS`` and then taken again, so a rotated token is picked up.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentchain.kube import clients


class _Configuration:
    """Stands in for the loaded ``kubernetes.client.Configuration``: its one method used."""

    def __init__(self) -> None:
        self.token = "first"
        self.calls = 0

    def auth_settings(self) -> dict[str, Any]:
        self.calls += 1
        return {
            "BearerToken": {
                "in": "header",
                "key": "authorization",
                "value": f"Bearer {self.token}",
            },
            "Unused": {"in": "query", "key": "x", "value": "y"},
        }


@pytest.fixture
def cfg(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Configuration]:
    fake = _Configuration()
    clients.reset()
    monkeypatch.setattr(clients, "configuration", functools.cache(lambda: fake))
    yield fake
    clients._auth.clear()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    return now


def test_headers_carry_the_bearer_token_and_the_content_type(cfg: _Configuration) -> None:
    headers = clients._headers(clients.MERGE_PATCH)
    assert headers == {
        "Accept": "application/json",
        "authorization": "Bearer first",
        "Content-Type": clients.MERGE_PATCH,
    }
    assert "Content-Type" not in clients._headers(None)


def test_credentials_are_reused_within_the_refresh_period(
    cfg: _Configuration, clock: list[float]
) -> None:
    for _ in range(50):
        clients._headers(None)
        clock[0] += clients.AUTH_REFRESH_SECONDS / 100
    assert cfg.calls == 1


def test_a_rotated_token_is_used_once_the_period_is_over(
    cfg: _Configuration, clock: list[float]
) -> None:
    assert clients._headers(None)["authorization"] == "Bearer first"
    cfg.token = "rotated"
    clock[0] += clients.AUTH_REFRESH_SECONDS - 0.01
    assert clients._headers(None)["authorization"] == "Bearer first"
    clock[0] += 0.01
    assert clients._headers(None)["authorization"] == "Bearer rotated"
    assert cfg.calls == 2


def test_reset_forgets_the_credentials(cfg: _Configuration, clock: list[float]) -> None:
    clients._headers(None)
    cfg.token = "other-cluster"
    clients.reset()
    assert clients._headers(None)["authorization"] == "Bearer other-cluster"
