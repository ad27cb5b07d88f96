"""Sampling profiles of the running operator with py-spy, and a text summary of them.

A bench given ``--profile FILE`` attaches py-spy (``pip install py-spy``, the ``bench``
extra) to the operator's process for its measured phase and writes py-spy's raw
format (collapsed stacks, one ``frame;frame;... count`` line each) to FILE, then
prints :func:`summary`: where the samples fall by package and by function. Idle
threads are not sampled, so the shares are shares of the operator's CPU time.

    python bench/profiling.py FILE [--top 25]     # summarise a saved profile again
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^():]*)(?::\d+)?\)$")
RATE = 100  # samples per second


class Profiler:
    """``with Profiler(pid, out):`` samples ``pid`` into ``out`` while the block runs."""

    def __init__(self, pid: int, out: Path | None) -> None:
        self.pid, self.out = pid, out
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Profiler:
        if self.out is None:
            return self
        exe = shutil.which("py-spy")
        if exe is None:
            raise RuntimeError("--profile needs py-spy: pip install py-spy")
        argv = [exe, "record", "--pid", str(self.pid), "--rate", str(RATE), "--format", "raw",
                "--nonblocking", "-o", str(self.out)]  # fmt: skip
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT.
        _, err = self.process.communicate(timeout=60)
        if self.out is not None and not self.out.exists():
            raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace')}")


def _frames(line: str) -> tuple[list[tuple[str, str]], int]:
    stack, _, count = line.rpartition(" ")
    frames = []
    for raw in stack.split(";"):
        match = FRAME.match(raw)
        frames.append((match["func"], match["file"]) if match else (raw, ""))
    return frames, int(count)


def _package(file: str) -> str:
    if not file or file.startswith("<"):
        return "python (interpreter, stdlib)"
    parts = Path(file).parts
    if parts[0] in ("agentchain", "kopf", "aiohttp", "kubernetes", "urllib3", "yarl", "redis"):
        return "/".join(parts[:2]) if parts[0] == "agentchain" and len(parts) > 2 else parts[0]
    return parts[0] if len(parts) > 1 else "python (interpreter, stdlib)"


def summary(path: Path, top: int = 20) -> str:
    """Samples by the package and the function of the innermost frame (self), and by
    every function on the stack (inclusive)."""
    own: collections.Counter[str] = collections.Counter()
    leaf: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        frames, count = _frames(line)
        total += count
        own[_package(frames[-1][1])] += count
        leaf[f"{frames[-1][0]} ({frames[-1][1]})"] += count
        for name in {f"{func} ({file})" for func, file in frames if file}:
            inclusive[name] += count
    if not total:
        return f"{path}: no samples"
    out = [
        f"{path}: {total} samples at {RATE}/s ({total / RATE:.1f} s of CPU)",
        "self, by package:",
    ]
    out += [f"  {n / total:6.1%}  {name}" for name, n in own.most_common(top)]
    out.append("self, by function:")
    out += [f"  {n / total:6.1%}  {name}" for name, n in leaf.most_common(top)]
    # The event loop's and kopf's outer frames are on nearly every stack; leave them out.
    inner = [(name, n) for name, n in inclusive.most_common() if n < 0.9 * total]
    out.append("inclusive, by function (those on under 90% of the samples):")
    out += [f"  {n / total:6.1%}  {name}" for name, n in inner[:top]]
    ours = [(name, n) for name, n in inner if "(agentchain/" in name]
    out.append("inclusive, agentchain's functions:")
    out += [f"  {n / total:6.1%}  {name}" for name, n in ours[:top]]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    print(summary(args.file, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
