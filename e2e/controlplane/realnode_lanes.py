"""Real nodes in lanes: each in network and mount namespaces of its own, many at once.

A lane is a process tree that ``lane-ns.sh`` started in fresh network and mount
namespaces (a pytest-xdist worker, the ``-m realnode`` lane, any command). Its real node's
bridge, iptables and nftables rules, ipsets, links, ``net.*`` sysctls and the fixed paths
the kubelet and containerd use are the lane's own, so lanes cannot collide there and what
they leave vanishes with them. Two things stay the machine's, shared by every lane:

* the cgroup tree: each lane's kubelet gets a ``cgroupRoot`` of its own
  (``agentchain-realnode-<lane>``, ``realnode_config.cgroup_root``), which its teardown
  removes, so two kubelets never touch each other's cgroups;
* the kernel's ``kernel.*`` and ``vm.*`` sysctls, which every kubelet writes (the same
  values).

Those are held by a *machine session*: the first session on the machine snapshots them
(into the cache directory), the last one out restores them and compares; a session in
the machine's own namespaces (the xdist controller, ``lanes.sh``) also compares the
machine's network, mounts and fixed paths, which no lane may touch. Sessions hold the
real-node lock shared; a real node outside any lane (the machine's own network, fixed
paths and the one cgroup root ``agentchain-realnode``) holds it exclusively, as before
lanes existed, and so waits for the lanes or is refused with a message.

``python -m e2e.controlplane.realnode_lanes prebuild [--realnode]`` builds the images a
lane imports (a lane has no network to reach PyPI or the Go module proxy);
``python -m e2e.controlplane.realnode_lanes hold -- <command>`` runs a command inside a
machine session and fails when the machine differs afterwards.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from e2e.controlplane import realnode_config as config
from e2e.controlplane import realnode_host as host
from e2e.controlplane import realnode_images as images

WRAPPER = Path(__file__).with_name("lane-ns.sh")
LANE_ENV = host.LANE_ENV
# How long a run waits for another real node on the machine to finish before it is
# refused; 0 (the default) refuses at once. `make test` waits (e2e/lanes.sh).
WAIT_ENV = "AGENTCHAIN_REALNODE_WAIT"
POLL_SECONDS = 0.2


class LaneError(RuntimeError):
    """The lock cannot be had, or the machine differs after the last real node."""


def lane() -> str | None:
    """This lane's name in a lane's namespaces (``lane-ns.sh``), else None."""
    return host.lane()


def cgroup_root() -> str:
    """The kubelet's ``cgroupRoot`` (without the leading slash) for a node started here."""
    return config.cgroup_root(lane())


def lock_path(name: str = "realnode.lock") -> Path:
    path = images.cache_dir().parent / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def say(message: str) -> None:
    print(f"[agentchain] {message}", file=sys.stderr, flush=True)


def flock(file: IO[str], *, shared: bool, wait: float | None, refusal: str) -> None:
    """Lock ``file`` (shared or exclusive), waiting up to ``wait`` seconds (default:
    ``$AGENTCHAIN_REALNODE_WAIT``, else 0); raise LaneError with ``refusal`` after."""
    if wait is None:
        wait = float(os.environ.get(WAIT_ENV) or 0)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    deadline = time.monotonic() + wait
    waiting = False
    while True:
        try:
            fcntl.flock(file, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LaneError(
                    f"{refusal} (waited {wait:.0f} s; {WAIT_ENV} sets how long)"
                ) from None
            if not waiting:
                say(f"another real node runs on this machine; waiting up to {wait:.0f} s")
                waiting = True
            # Often: a lock syscall costs nothing, and a waiter that looks rarely loses
            # the lock to each newcomer on a busy machine.
            time.sleep(min(POLL_SECONDS, max(0.01, deadline - time.monotonic())))


def _try_exclusive(path: Path) -> IO[str] | None:
    file = path.open("a")
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.close()
        return None
    return file


@dataclass
class MachineSession:
    """One process's share of the machine; ``differences`` is set on the way out by the
    session that restored the machine (the last one), and by a session in the machine's
    own namespaces for what lanes must never touch."""

    differences: dict[str, object] = field(default_factory=dict)
    last: bool = False


_active: MachineSession | None = None


def session_active() -> bool:
    return _active is not None


SNAPSHOT = "realnode-machine.json"
MUTEX = "realnode-machine.lock"
MEMBERS = "realnode-lanes.lock"


@contextlib.contextmanager
def machine_session(wait: float | None = None) -> Iterator[MachineSession]:
    """Join the machine's lanes (nested calls in one process join once): snapshot the
    global state if first, restore and compare it if last (see the module docstring)."""
    global _active
    if _active is not None:
        yield _active
        return
    refusal = (
        "a real node outside a lane's namespaces runs on this machine (lock "
        f"{lock_path()}); it uses the machine's own network, fixed paths and cgroup root, "
        "so it runs alone"
    )
    session = MachineSession()
    with contextlib.ExitStack() as stack:
        node_lock = stack.enter_context(lock_path().open("a"))
        flock(node_lock, shared=True, wait=wait, refusal=refusal)
        # Once no node outside a lane runs: one that ran until now is not the machine.
        local = host.HostState.capture("namespaces") if lane() is None else None
        with lock_path(MUTEX).open("a") as mutex:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            first = _try_exclusive(lock_path(MEMBERS))
            if first is not None:
                _snapshot_path().write_text(host.HostState.capture("machine").to_json())
                first.close()
            member = stack.enter_context(lock_path(MEMBERS).open("a"))
            fcntl.flock(member, fcntl.LOCK_SH)
        _active = session
        try:
            yield session
        finally:
            _active = None
            with lock_path(MUTEX).open("a") as mutex:
                fcntl.flock(mutex, fcntl.LOCK_EX)
                member.close()
                last = _try_exclusive(lock_path(MEMBERS))
                if last is not None:
                    session.last = True
                    session.differences.update(_restore_machine())
                    last.close()
            if local is not None:
                session.differences.update(local.differences(host.HostState.capture("namespaces")))


def _snapshot_path() -> Path:
    return lock_path(SNAPSHOT)


def _restore_machine() -> dict[str, object]:
    """Put back the global state the first session saved; return what still differs."""
    path = _snapshot_path()
    try:
        before = host.HostState.from_json(path.read_text())
    except (OSError, ValueError) as error:
        return {"snapshot": f"no machine snapshot to compare with: {error}"}
    host.restore_machine(before)
    path.unlink(missing_ok=True)
    return before.differences(host.HostState.capture("machine"))


def prebuild(*, realnode_lane: bool) -> None:
    """Build (or find cached) every image a lane imports, while the network is there:
    the node's pause and test images and the e2e agent image; with ``realnode_lane`` also
    what the ``-m realnode`` modules import (operator, Redis and reference agent images)."""
    # Imported here: the image builders pull in buildah's helpers, which only this needs.
    from e2e.controlplane import agent_images, operator_image, realnode, realnode_redis

    version = realnode.kubernetes_version()
    images.pause_image(version)
    images.test_image()
    agent_images.build_e2e()
    if realnode_lane:
        # The realnode modules' own builds in a lane (a code change's rebuild) install
        # from the wheelhouse alone; it must be resolved recently enough not to need the
        # index, which a lane cannot reach.
        operator_image._wheelhouse(
            agent_images.ROOT, operator_image.cache_root() / "buildah" / "wheels"
        )
        operator_image.build(agent_images.ROOT)
        operator_image.build(agent_images.ROOT, archives=agent_images.archive_dir())
        realnode_redis.redis_image()
        for runtime in agent_images.RUNTIMES:
            agent_images.build(runtime)


def main(argv: list[str]) -> int:
    if argv[1:2] == ["prebuild"]:
        prebuild(realnode_lane="--realnode" in argv[2:])
        return 0
    if argv[1:3] == ["hold", "--"] and argv[3:]:
        with machine_session() as session:
            code = subprocess.run(argv[3:], check=False).returncode
        if session.differences:
            say(f"the machine differs after the lanes: {json.dumps(session.differences)}")
            return code or 1
        restorer = "this session" if session.last else "the last session out"
        say(f"the machine is as it was before the lanes (restored by {restorer})")
        return code
    print(f"usage: {argv[0]} prebuild [--realnode] | hold -- <command>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
