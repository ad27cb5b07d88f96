"""A watchdog that kills every pod process group once the local node is gone.

PR_SET_PDEATHSIG only reaches a container's first process: whatever that process forks
(a shell's background jobs, an agent's tools) would survive a node killed with SIGKILL,
which is exactly how test harnesses and impatient people stop things. So the node starts
this small process beside it and tells it, through a pipe, which process groups are
alive ("+PGID" / "-PGID" lines). The kernel closes the pipe however the node dies; on
end-of-file the guard SIGKILLs every group still listed and exits.

The guard runs in its own session, so a Ctrl-C aimed at the node's terminal group does
not kill it before it has done its job. This file is started as a script (not `-m`), so
the guard needs nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import IO


class Guard:
    """The node's end of the pipe."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        assert self._proc.stdin is not None
        self._pipe: IO[bytes] = self._proc.stdin

    def track(self, pgid: int) -> None:
        self._send(f"+{pgid}")

    def untrack(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    def close(self) -> None:
        """Normal shutdown: the guard kills what is left and exits."""
        with contextlib.suppress(OSError):
            self._pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)

    def _send(self, line: str) -> None:
        # A dead guard must not take pods down with it; it only protects against leaks.
        with contextlib.suppress(OSError, ValueError):
            self._pipe.write(f"{line}\n".encode())
            self._pipe.flush()


def apply(live: set[int], line: str) -> None:
    """Update the set of live process groups from one "+PGID" / "-PGID" line."""
    line = line.strip()
    if len(line) < 2 or line[0] not in "+-" or not line[1:].isdigit():
        return
    pgid = int(line[1:])
    if line[0] == "+":
        live.add(pgid)
    else:
        live.discard(pgid)


def main() -> None:
    # Signals meant for the node's terminal (Ctrl-C) must not stop the guard early.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    live: set[int] = set()
    for line in sys.stdin:
        apply(live, line)
    for pgid in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    main()
