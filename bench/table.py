"""One table for every benchmark figure: figure, baseline, ratio, target, verdict.

Each bench script calls :func:`emit` for each figure it measured. The row is printed
at once (so a script run alone shows it) and, when ``AGENTCHAIN_BENCH_TABLE`` names a
file, appended to it as one JSON line. ``make bench`` points that variable at one file,
runs the scripts, then prints the collected table:

    python bench/table.py FILE            # the table, with machine and date
    python bench/table.py --reset FILE    # empty FILE before a run

A target compares one of three things, named by ``Row.compare``: the ratio
``figure / baseline`` (a figure measured beside its floor in the same run), the
``excess`` ``figure - baseline`` (requests per hop: at most the floor's plus four), or
the ``figure`` itself (memory in MiB). A row without a target is information (``-``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

TABLE_ENV = "AGENTCHAIN_BENCH_TABLE"

Compare = Literal["ratio", "excess", "figure"]
Better = Literal["lower", "higher"]


@dataclass(frozen=True)
class Row:
    name: str
    figure: float
    unit: str = ""
    baseline: float | None = None
    target: float | None = None
    compare: Compare = "ratio"
    better: Better = "lower"
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.figure / self.baseline

    def compared(self) -> float | None:
        """The value the target is about, or None when there is nothing to compare."""
        if self.compare == "figure":
            return self.figure
        if self.baseline is None:
            return None
        return self.ratio if self.compare == "ratio" else self.figure - self.baseline

    @property
    def verdict(self) -> str:
        value = self.compared()
        if self.target is None or value is None:
            return "-"
        met = value <= self.target if self.better == "lower" else value >= self.target
        return "PASS" if met else "MISS"

    def target_text(self) -> str:
        if self.target is None:
            return "-"
        sign = "<=" if self.better == "lower" else ">="
        if self.compare == "ratio":
            return f"ratio {sign} {self.target:g}"
        if self.compare == "excess":
            return f"{sign} baseline + {self.target:g}"
        return f"{sign} {self.target:g} {self.unit}".rstrip()


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}".rstrip()


def cells(row: Row) -> list[str]:
    ratio = row.ratio
    return [
        row.name,
        _num(row.figure, row.unit),
        _num(row.baseline, row.unit),
        "-" if ratio is None else f"{ratio:.2f}",
        row.target_text(),
        row.verdict,
    ]


HEADER = ["figure", "value", "baseline", "ratio", "target", "verdict"]


def render(rows: list[Row]) -> str:
    table = [HEADER, *(cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"  {r.name}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + (["notes:", *notes] if notes else []))


def emit(row: Row) -> None:
    """Print the row now; append it to the run's table file when one is named."""
    print(f"[bench] {'  '.join(cells(row))}" + (f"  ({row.note})" if row.note else ""))
    target = os.environ.get(TABLE_ENV)
    if target:
        with Path(target).open("a") as out:
            out.write(json.dumps(dataclasses.asdict(row)) + "\n")


def load(path: Path) -> list[Row]:
    if not path.exists():
        return []
    return [Row(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def machine() -> str:
    with Path("/proc/meminfo").open() as meminfo:
        total_kib = int(meminfo.readline().split()[1])
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{now}; nproc {os.cpu_count()}; memory {total_kib / 1024 / 1024:.1f} GiB"


# Every figure of issue 21's Performance section, and the real node's webhook delivery
# to agent container started, by the start of its row's name, with the command that
# measures it: a figure the run did not measure is shown as such,
# so the table always says what is still unknown.
EXPECTED: dict[str, str] = {
    "API requests per hop": "bench_hop_latency.py",
    "hop latency p50": "bench_hop_latency.py",
    "throughput, 100 chains": "bench_throughput.py",
    "time to drain, 100 chains": "bench_throughput.py",
    "controller CPU during the run": "bench_throughput.py",
    "restart peak RSS, 5,": "bench_scale.py --jobs 5000",
    "steady RSS after restart, 5,": "bench_scale.py --jobs 5000",
    "restart other requests per settled job, 5,": "bench_scale.py --jobs 5000",
    "CPU per resync period, 5,": "bench_scale.py --jobs 5000",
    "restart: start to /readyz, 5,": "bench_scale.py --jobs 5000",
    "restart peak RSS, 20,": "bench_scale.py --jobs 20000 (make bench BENCH_JOBS='5000 20000')",
    "steady RSS after restart, 20,": "bench_scale.py --jobs 20000",
    "restart other requests per settled job, 20,": "bench_scale.py --jobs 20000",
    "webhook delivery -> agent container started p50": "bench_hop_latency.py --start-runs 20",
    "webhook delivery -> agent container started p95": "bench_hop_latency.py --start-runs 20",
}


def missing(rows: list[Row]) -> list[str]:
    """Lines naming each expected figure no row of the run measured."""
    return [
        f"  {prefix}...: not measured in this run ({command})"
        for prefix, command in EXPECTED.items()
        if not any(r.name.startswith(prefix) for r in rows)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", type=Path)
    parser.add_argument("--reset", action="store_true", help="empty the file and exit")
    args = parser.parse_args(argv)
    if args.reset:
        args.file.parent.mkdir(parents=True, exist_ok=True)
        args.file.write_text("")
        return 0
    rows = load(args.file)
    print(f"\nbenchmarks ({machine()}), {len(rows)} figures")
    print(render(rows))
    unmeasured = missing(rows)
    if unmeasured:
        print("\n".join(["not measured:", *unmeasured]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
