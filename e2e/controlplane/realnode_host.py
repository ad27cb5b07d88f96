"""What the real node changes on the machine, captured before and put back after.

The kubelet, kube-proxy, containerd and the CNI plugins were written for a machine they
own: the kubelet writes kernel sysctls and iptables chains, kube-proxy adds its chains,
the bridge plugin turns on IPv4 forwarding, containerd mounts network namespaces under
``/var/run/netns`` and overlay filesystems, the kubelet builds cgroups and a few fixed
directories. Here the machine is shared with other sessions, so ``HostState`` records
what those components may touch, and ``restore()`` removes exactly what appeared since
(and only what carries the node's names or lives under its paths) and writes back the
sysctls that changed. The e2e test compares a snapshot taken before with one taken after.
The policy engine (``realnode_policy``, kube-router) adds ipsets, so they are recorded too.

In a lane (``realnode_lanes``: network and mount namespaces of its own) most of that is
the lane's, and a snapshot's *scope* says which part it holds: ``node`` (a node in the
machine's own namespaces: everything), ``lane`` (a node in a lane: what is per
namespace, and the cgroups under the lane's own root), ``machine`` (what every lane
shares: ``kernel.*``/``vm.*`` sysctls and the cgroup tree, but the running lanes' own
roots) and ``namespaces`` (what is per namespace, for a machine session in the machine's
own namespaces).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from e2e.controlplane import realnode_config as config

# Kernel settings the kubelet (setupKernelTunables), kube-proxy and the bridge plugin
# may write; paths under /proc/sys.
SYSCTLS = (
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/forwarding",
    "net/ipv4/conf/all/route_localnet",
    "net/ipv6/conf/all/forwarding",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
)
# Directories at fixed paths that the components create whatever they are told.
FIXED_PATHS = (
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/var/run/netns",
    "/run/netns",
    "/run/containerd",
    "/var/log/containers",
    "/var/log/pods",
    "/opt/containerd",
    "/usr/libexec/kubernetes",
    "/etc/cni",
)
# iptables chains the kubelet, kube-proxy and the CNI plugins create.
OWN_CHAIN = re.compile(r"^(KUBE-|CNI-)")
CGROUP_MOUNT = Path("/sys/fs/cgroup")
# Set by lane-ns.sh: the lane's name (realnode_lanes), and the network namespace it left.
LANE_ENV = "AGENTCHAIN_REALNODE_LANE"
LANE_FROM_ENV = "AGENTCHAIN_REALNODE_LANE_FROM"
SCOPES = ("node", "lane", "machine", "namespaces")
_MNT_DETACH = 2
_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _run(*argv: str) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    return result.stdout


def _iptables_rules(tool: str) -> str:
    # Counters change with traffic and the header lines carry a timestamp.
    lines = [
        re.sub(r"\[\d+:\d+\]", "[0:0]", line)
        for line in _run(f"{tool}-save").splitlines()
        if line and not line.startswith("#")
    ]
    return "\n".join(lines)


def _nft_tables() -> frozenset[str]:
    # "table ip filter" -> "ip filter"
    return frozenset(
        line.removeprefix("table ").strip()
        for line in _run("nft", "list", "tables").splitlines()
        if line.startswith("table ")
    )


def _ipsets() -> frozenset[str]:
    # `ipset list -n` prints one set name per line (nothing without the ipset tool).
    return frozenset(line.strip() for line in _run("ipset", "list", "-n").splitlines() if line)


def lane() -> str | None:
    """This lane's name when the process runs in a lane's namespaces (``lane-ns.sh``), else
    None: the variables alone are not enough, this process's network namespace must be
    another one than the one the lane was entered from."""
    name, left = os.environ.get(LANE_ENV), os.environ.get(LANE_FROM_ENV)
    if not name or not left:
        return None
    try:
        own = os.readlink("/proc/self/ns/net")
    except OSError:
        return None
    return name if own != left else None


def _cgroup_dirs() -> frozenset[str]:
    found: set[str] = set()
    if not CGROUP_MOUNT.is_dir():
        return frozenset()
    for hierarchy in CGROUP_MOUNT.iterdir():
        for dirpath, _dirs, _files in os.walk(hierarchy):
            found.add(dirpath)
    return frozenset(found)


def in_cgroup_root(directory: str, root: str) -> bool:
    """Whether ``directory`` is cgroup ``root`` (a name right under a hierarchy) or below
    it; a name only starting with it (another lane's root) is not."""
    return f"/{root}/" in f"{directory}/"


def _node_cgroups(root: str) -> frozenset[str]:
    return frozenset(d for d in _cgroup_dirs() if in_cgroup_root(d, root))


def _lanes_cgroup(directory: str) -> tuple[bool, bool]:
    """Whether ``directory`` is under a lane's cgroup root, and whether that lane still
    runs. A lane is named by its pid (``lane-ns.sh``)."""
    prefix = f"{config.CGROUP_ROOT}-"
    for part in directory.split("/"):
        if part.startswith(prefix):
            name = part.removeprefix(prefix)
            return True, name.isdigit() and Path("/proc", name).exists()
    return False, False


def _ended_lanes_cgroup(directory: str) -> bool:
    """Whether ``directory`` is under the cgroup root of a lane that has ended: one still
    running keeps its cgroups whatever a session thinks, and a node outside lanes
    (``agentchain-realnode``) cleans its own."""
    lanes, running = _lanes_cgroup(directory)
    return lanes and not running


def _machine_cgroups() -> frozenset[str]:
    """The cgroups real nodes make (under ``agentchain-realnode`` and the lanes' roots: a
    kubelet's ``cgroupRoot``, where containerd puts the pods'), without the running lanes'
    own: their pods come and go while a snapshot waits to be compared, and each lane
    compares its own root itself. A lane that ended and left cgroups behind shows in the
    comparison. The rest of the tree is other programs' (a job runner's cgroups came and
    went during a run and failed its comparison)."""
    return frozenset(
        d for d in _cgroup_dirs()
        if _made_by_a_node(d) and not _lanes_cgroup(d)[1]
    )  # fmt: skip


def _made_by_a_node(directory: str) -> bool:
    return any(
        part == config.CGROUP_ROOT or part.startswith(f"{config.CGROUP_ROOT}-")
        for part in directory.split("/")
    )


def _links() -> frozenset[str]:
    # "4: eth0: <FLAGS> ..." -> the name and flags, without the index (which only grows).
    found = set()
    for line in _run("ip", "-o", "link").splitlines():
        _index, _sep, rest = line.partition(": ")
        found.add(rest.split("\\")[0].strip())
    return frozenset(found)


def _mounts() -> frozenset[str]:
    return frozenset((_read(Path("/proc/self/mountinfo")) or "").splitlines())


@dataclass(frozen=True)
class HostState:
    """One snapshot of everything the node may change on the machine."""

    sysctls: dict[str, str | None]
    iptables: str
    ip6tables: str
    nft_tables: frozenset[str]
    mounts: frozenset[str]
    links: frozenset[str]
    cgroups: frozenset[str]
    paths: dict[str, bool] = field(default_factory=dict)
    ipsets: frozenset[str] = frozenset()

    @classmethod
    def capture(cls, scope: str | None = None) -> HostState:
        """A snapshot of ``scope`` (see the module docstring); by default ``lane`` in a
        lane and ``node`` outside one. Aspects outside the scope are left empty."""
        scope = scope or ("lane" if lane() else "node")
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, not {scope!r}")
        per_namespace = scope != "machine"
        shared = scope in ("node", "machine")
        sysctls = [n for n in SYSCTLS if (per_namespace if n.startswith("net/") else shared)]
        if shared:
            cgroups = _machine_cgroups()
        elif scope == "lane":
            cgroups = _node_cgroups(config.cgroup_root(lane()))
        else:
            cgroups = frozenset()
        return cls(
            sysctls={name: _read(Path("/proc/sys") / name) for name in sysctls},
            iptables=_iptables_rules("iptables") if per_namespace else "",
            ip6tables=_iptables_rules("ip6tables") if per_namespace else "",
            nft_tables=_nft_tables() if per_namespace else frozenset(),
            mounts=_mounts() if per_namespace else frozenset(),
            links=_links() if per_namespace else frozenset(),
            cgroups=cgroups,
            paths={path: os.path.lexists(path) for path in FIXED_PATHS} if per_namespace else {},
            ipsets=_ipsets() if per_namespace else frozenset(),
        )

    def to_json(self) -> str:
        return json.dumps({
            k: sorted(v) if isinstance(v, frozenset) else v for k, v in asdict(self).items()
        })  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> HostState:
        data = json.loads(text)
        return cls(
            sysctls=dict(data["sysctls"]),
            iptables=str(data["iptables"]),
            ip6tables=str(data["ip6tables"]),
            nft_tables=frozenset(data["nft_tables"]),
            mounts=frozenset(data["mounts"]),
            links=frozenset(data["links"]),
            cgroups=frozenset(data["cgroups"]),
            paths=dict(data["paths"]),
            ipsets=frozenset(data["ipsets"]),
        )

    def differences(self, after: HostState) -> dict[str, object]:
        """What differs in ``after``, by aspect (empty when the machine is as it was)."""
        diff: dict[str, object] = {}
        changed = {k: (v, after.sysctls.get(k)) for k, v in self.sysctls.items()}
        changed = {k: pair for k, pair in changed.items() if pair[0] != pair[1]}
        if changed:
            diff["sysctls"] = changed
        for name in ("iptables", "ip6tables"):
            if getattr(self, name) != getattr(after, name):
                diff[name] = {"before": getattr(self, name), "after": getattr(after, name)}
        for name in ("nft_tables", "mounts", "links", "cgroups", "ipsets"):
            mine, theirs = getattr(self, name), getattr(after, name)
            if mine != theirs:
                diff[name] = {"gone": sorted(mine - theirs), "new": sorted(theirs - mine)}
        paths = {k: (v, after.paths.get(k)) for k, v in self.paths.items()}
        paths = {k: pair for k, pair in paths.items() if pair[0] != pair[1]}
        if paths:
            diff["paths"] = paths
        return diff


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _mount_point(line: str) -> str:
    # mountinfo field 5 is the mount point, with spaces etc. octal-escaped.
    raw = line.split(" ")[4]
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), raw)


def kill_strays(workdir: Path) -> None:
    """SIGKILL what the node left running: processes in its cgroups (containers) and
    processes whose command line names the workdir (containerd's shims, which detach
    from containerd and so outlive it)."""
    pids = _pids_in(_node_cgroups(config.cgroup_root(lane())))
    marker = str(workdir).encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes():
                    pids.add(int(entry.name))
            except OSError:
                continue
    _kill(pids)


def _pids_in(cgroups: Iterable[str]) -> set[int]:
    pids: set[int] = set()
    for directory in cgroups:
        for text in (_read(Path(directory) / "cgroup.procs") or "").split():
            pids.add(int(text))
    return pids


def _kill(pids: set[int]) -> None:
    pids.discard(os.getpid())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _unmount_new(before: HostState, roots: Iterable[str]) -> None:
    roots = list(roots)
    for _attempt in range(5):
        new = [_mount_point(line) for line in _mounts() - before.mounts]
        ours = sorted({p for p in new if _under(p, roots)}, key=len, reverse=True)
        if not ours:
            return
        for point in ours:
            _LIBC.umount2(point.encode(), _MNT_DETACH)


def _remove_cgroups(before: HostState, ours: Callable[[str], bool]) -> None:
    # Deepest first: a cgroup directory can only be removed once its children are.
    for _attempt in range(20):
        new = [d for d in _cgroup_dirs() - before.cgroups if ours(d)]
        if not new:
            return
        for directory in sorted(new, key=len, reverse=True):
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        time.sleep(0.1)


def own_chains(
    saved: str, before: str
) -> tuple[list[tuple[str, list[str]]], list[tuple[str, str]]]:
    """From ``<tool>-save`` output: (rules in other chains that jump to new KUBE-*/CNI-*
    chains, those new chains), each with its table."""
    table = ""
    jumps: list[tuple[str, list[str]]] = []
    chains: list[tuple[str, str]] = []
    for line in saved.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":"):
            chain = line[1:].split()[0]
            if OWN_CHAIN.match(chain) and f":{chain} " not in before:
                chains.append((table, chain))
        elif line.startswith("-A "):
            # Quoted, as iptables-save writes a comment with spaces (kube-proxy's and
            # kube-router's rules carry such comments): one word for `iptables -D`.
            words = _words(line)
            target = words[words.index("-j") + 1] if "-j" in words else ""
            if OWN_CHAIN.match(target) and line not in before and not OWN_CHAIN.match(words[1]):
                jumps.append((table, words[1:]))
    return jumps, chains


def _words(rule: str) -> list[str]:
    try:
        return shlex.split(rule)
    except ValueError:
        return rule.split()


def _remove_own_chains(tool: str, before: str) -> None:
    """Delete KUBE-*/CNI-* chains that were not there before, and the rules that jump to
    them from other chains, table by table."""
    if shutil.which(tool) is None:
        return
    jumps, chains = own_chains(_run(f"{tool}-save"), before)
    for table, rule in jumps:
        subprocess.run([tool, "-t", table, "-D", *rule], capture_output=True, check=False)
    for table, chain in chains:
        subprocess.run([tool, "-t", table, "-F", chain], capture_output=True, check=False)
    for table, chain in chains:
        subprocess.run([tool, "-t", table, "-X", chain], capture_output=True, check=False)


def _destroy_new_ipsets(before: HostState) -> None:
    # After the chains: a set that a rule still references cannot be destroyed.
    for name in sorted(_ipsets() - before.ipsets):
        subprocess.run(["ipset", "destroy", name], capture_output=True, check=False)


def _remove_new_nft_tables(before: HostState) -> None:
    # iptables-nft creates a table on first use; one that did not exist before was made
    # by the node's components (the machine runs nothing else that uses netfilter).
    for table in sorted(_nft_tables() - before.nft_tables):
        family, _sep, name = table.partition(" ")
        subprocess.run(["nft", "delete", "table", family, name], capture_output=True, check=False)


def _delete_links(before: HostState) -> None:
    for link in sorted(_links() - before.links):
        name = link.split(":")[0].split("@")[0]
        if name == config.BRIDGE or f"master {config.BRIDGE} " in link:
            subprocess.run(["ip", "link", "delete", name], capture_output=True, check=False)


def _restore_sysctls(before: HostState) -> None:
    # Only those in the snapshot's scope: a lane's node leaves the kernel's to the last
    # machine session, since other lanes' kubelets may still run.
    # ip_forward first: writing it resets every interface's forwarding flag as well.
    for name in sorted(before.sysctls, key=lambda n: n != "net/ipv4/ip_forward"):
        value = before.sysctls[name]
        path = Path("/proc/sys") / name
        if value is not None and _read(path) != value:
            with contextlib.suppress(OSError):
                path.write_text(value)


def restore(before: HostState, workdir: Path) -> None:
    """Put back what the node changed since ``before``; every step is best-effort so one
    failure does not leave the rest undone (the e2e test then reports what differs)."""
    kill_strays(workdir)
    roots = [str(workdir), *FIXED_PATHS]
    _unmount_new(before, roots)
    root = config.cgroup_root(lane())
    _remove_cgroups(before, lambda directory: in_cgroup_root(directory, root))
    _delete_links(before)
    _remove_own_chains("iptables", before.iptables)
    _remove_own_chains("ip6tables", before.ip6tables)
    _destroy_new_ipsets(before)
    _remove_new_nft_tables(before)
    for path, existed in before.paths.items():
        if not existed and os.path.lexists(path):
            _unmount_new(before, [path])
            shutil.rmtree(path, ignore_errors=True)
    _restore_sysctls(before)


def restore_machine(before: HostState) -> None:
    """Put back what lanes share (a ``machine`` snapshot): kill what is left in ended
    lanes' cgroups, remove those that are new, write back the kernel's sysctls."""
    new = _cgroup_dirs() - before.cgroups
    _kill(_pids_in(d for d in new if _ended_lanes_cgroup(d)))
    _remove_cgroups(before, _ended_lanes_cgroup)
    _restore_sysctls(before)
