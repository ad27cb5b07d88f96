"""The e2e harness's port picker (``e2e/controlplane/processes.py``): ports outside the
kernel's ephemeral range and the NodePort range, never the same one twice in a process,
and disjoint slices for the workers of ``make test``."""

from __future__ import annotations

import random
import socket

import pytest
from e2e.controlplane import processes


def test_ports_are_bindable_distinct_and_below_the_ephemeral_and_nodeport_ranges() -> None:
    ports = [processes.free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert all(processes.PORT_LOW <= p < 30000 for p in ports), ports
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", processes.free_port()))


@pytest.mark.parametrize(("worker", "other"), [("gw0", "gw1"), ("gw1", "gw2"), ("gw3", "gw0")])
def test_two_workers_draw_from_disjoint_slices(
    worker: str, other: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    mine = {processes.free_port() for _ in range(50)}
    monkeypatch.setenv("PYTEST_XDIST_WORKER", other)
    theirs = {processes.free_port() for _ in range(50)}
    assert max(mine) < min(theirs) or max(theirs) < min(mine)


def test_a_taken_port_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", processes.free_port()))
        taken.listen()
        held = taken.getsockname()[1]
        processes._handed_out.discard(held)
        # A port known free and not handed out (held + 1 may be either, after the others).
        spare = processes.free_port()
        processes._handed_out.discard(spare)
        picks = iter([held, held, spare])
        monkeypatch.setattr(random, "randrange", lambda low, high: next(picks))
        assert processes.free_port() == spare
