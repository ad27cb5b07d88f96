"""The demo agent ends on SIGTERM, also as process 1 of its own PID namespace, which is
what it is in a container: there Linux ignores a signal the process has no handler for,
and a stop would wait out the pod's whole grace period."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SLEEPING = [sys.executable, "-m", "agentchain.demo_agent", "--sleep", "60"]
STARTED = 1.5
"""Seconds after which Python has started and installed its handlers."""


def test_a_sigterm_ends_it_with_143() -> None:
    with subprocess.Popen(SLEEPING, stdout=subprocess.DEVNULL) as proc:
        time.sleep(STARTED)
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=10) == 143
        finally:
            proc.kill()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="a PID namespace needs root"
)
def test_a_sigterm_from_outside_ends_it_as_process_1() -> None:
    # unshare --fork waits for the agent, which is process 1 of the new namespace as in a
    # container, and exits with its code; --kill-child ends it if the test gives up.
    argv = ["unshare", "--pid", "--fork", "--kill-child", *SLEEPING]
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL) as proc:
        try:
            time.sleep(STARTED)
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            (agent,) = children
            os.kill(int(agent), signal.SIGTERM)  # As the kubelet's runtime sends it.
            assert proc.wait(timeout=10) == 143
        finally:
            proc.kill()
