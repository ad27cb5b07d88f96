"""Operator memory under 50 concurrent stalled 25 MB webhook uploads (issue 14).

What is measured: the resident memory (RSS) of a process serving the operator's
real web app — ``agentchain.web.app.serve``, both listeners, the production runner,
default settings (25 MiB cap, 64 MiB in-flight budget, 10 s read deadline) — while
50 clients each declare a 25 MB body, send all of it but the last byte as fast as
the server takes it, and then stall.  None of them can sign its body (the signature
is only checked once the body is whole), so this is what any stranger on the
internet can do.  The baseline is the same process's RSS idle, after a few ordinary
deliveries, in the same run.  RSS is sampled every 20 ms from ``/proc``; the figure
is the peak.

The bound: bodies read before authentication never add up to more than the budget
(``webhook_inflight_bytes``, 64 MiB: two 25 MB bodies), every other upload is
refused at once with 503; an admitted body that stalls is cut at the deadline
(408).  So the target is peak ≤ idle + budget + 32 MiB (per-connection buffers,
allocator slack), well under the chart's 512 Mi limit.  Before the fix, 20 such
connections held 547 MiB.

Run: ``python bench/bench_webhook_memory.py`` (starts its own redis-server; no
Kubernetes needed: nothing unauthenticated reaches it).  ``--check`` turns a miss
into exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UPLOADS = 50
DECLARED = 25_000_000
CHUNK = 1024 * 1024
SAMPLE_SECONDS = 0.02
OVERHEAD_MIB = 32
MIB = 1024 * 1024
PING = b'{"zen": "Design for failure.", "hook_id": 1}'
SECRET = "bench secret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss(pid: int) -> int:
    """Resident bytes of ``pid`` now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


# --------------------------------------------------------------------------- the server


async def serve(redis_url: str, port: int, internal_port: int) -> None:
    from agentchain.core.runtime import Runtime
    from agentchain.settings import Settings
    from agentchain.web import app

    settings = Settings(
        redis_url=redis_url,
        listen_host="127.0.0.1",
        listen_port=port,
        internal_port=internal_port,
        webhook_secrets=(SECRET,),
        operator_key=(secrets.token_hex(32),),  # Required since issue 14; any will do here.
    )
    rt = Runtime.create(settings)
    listeners = await app.serve(rt)
    print("ready", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await listeners.cleanup()
        await rt.close()


# --------------------------------------------------------------------------- the uploads


def head(declared: int, signature_of: bytes) -> bytes:
    from agentchain.web.hooks.signatures import sign

    lines = [
        "POST /webhooks/github HTTP/1.1",
        "Host: 127.0.0.1",
        "X-GitHub-Event: ping",
        f"X-GitHub-Delivery: {uuid.uuid4()}",
        "X-GitHub-Hook-ID: 1",
        f"X-Hub-Signature-256: {sign(signature_of, SECRET)}",
        "Content-Type: application/json",
        f"Content-Length: {declared}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def status_of(reader: asyncio.StreamReader) -> int:
    line = await reader.readuntil(b"\r\n")
    return int(line.split()[1])


async def upload(port: int, give_up: float) -> str:
    """One stalled upload: all but the last byte, then nothing; the answer's status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = asyncio.ensure_future(status_of(reader))
    chunk = b"x" * CHUNK
    sent = 0
    try:
        writer.write(head(DECLARED, b"not this body"))
        while sent < DECLARED - 1 and not answer.done():
            piece = chunk[: min(CHUNK, DECLARED - 1 - sent)]
            writer.write(piece)
            await writer.drain()
            sent += len(piece)
        return str(await asyncio.wait_for(answer, give_up))
    except (ConnectionError, asyncio.IncompleteReadError):
        return str(answer.result()) if answer.done() and not answer.exception() else "closed"
    except TimeoutError:
        return "no answer"
    finally:
        answer.cancel()
        writer.close()


async def ping(port: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head(len(PING), PING) + PING)
        await writer.drain()
        return await status_of(reader)
    finally:
        writer.close()


async def sample(pid: int, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], rss(pid))
        await asyncio.sleep(SAMPLE_SECONDS)


async def attack(pid: int, port: int, give_up: float) -> tuple[int, int, Counter[str], float]:
    for _ in range(5):  # Warm: imports done, the first deliveries' allocations made.
        assert await ping(port) == 200
    await asyncio.sleep(0.5)
    idle = rss(pid)
    peak, stop = [idle], asyncio.Event()
    sampler = asyncio.create_task(sample(pid, peak, stop))
    started = time.monotonic()
    statuses = Counter(await asyncio.gather(*(upload(port, give_up) for _ in range(UPLOADS))))
    elapsed = time.monotonic() - started
    stop.set()
    await sampler
    assert await ping(port) == 200, "the webhook did not recover"
    return idle, peak[0], statuses, elapsed


# --------------------------------------------------------------------------- the report


def report(idle: int, peak: int, statuses: Counter[str], elapsed: float, budget: int) -> bool:
    target = idle + budget + OVERHEAD_MIB * MIB
    answers = ", ".join(f"{count} x {status}" for status, count in sorted(statuses.items()))
    print(f"{UPLOADS} concurrent uploads declaring {DECLARED:,} bytes, stalled one byte short:")
    print(f"  answers: {answers}  (all within {elapsed:.1f} s)")
    print(f"  operator RSS peak  {peak / MIB:7.1f} MiB")
    print(f"  operator RSS idle  {idle / MIB:7.1f} MiB  (baseline, same process, same run)")
    print(f"peak / idle ratio: {peak / idle:.2f}")
    bound = f"idle + budget {budget / MIB:.0f} MiB + {OVERHEAD_MIB} MiB"
    print(f"target: peak <= {target / MIB:.0f} MiB ({bound}; chart limit 512 MiB)")
    ok = peak <= target and peak < 512 * MIB
    print(f"verdict: {'PASS' if ok else 'FAIL'} (growth {(peak - idle) / MIB:.1f} MiB)")
    from bench.table import Row, emit  # Importable once main() put the repository on the path.

    emit(
        Row(
            f"webhook RSS peak, {UPLOADS} stalled 25 MB uploads",
            peak / MIB,
            "MiB",
            baseline=idle / MIB,
            target=(target - idle) / MIB,
            compare="excess",
            note="baseline: the same process idle; target: in-flight budget + 32 MiB",
        )
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when over the target")
    parser.add_argument("--serve", nargs=3, metavar=("REDIS_URL", "PORT", "INTERNAL"))
    args = parser.parse_args(argv)
    if args.serve:
        redis_url, port, internal = args.serve
        asyncio.run(serve(redis_url, int(port), int(internal)))
        return 0
    # Run as a script from anywhere: the RedisServer helper lives in the repository's e2e/.
    sys.path.insert(0, str(REPO))
    from e2e.controlplane.redisserver import RedisServer

    from agentchain.settings import Settings

    defaults = Settings()
    budget = max(defaults.webhook_inflight_bytes, defaults.webhook_max_bytes)
    with tempfile.TemporaryDirectory() as workdir, RedisServer(Path(workdir)) as redis:
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", redis.url, str(port), str(free_port())],
            stdout=subprocess.PIPE,
            stderr=(Path(workdir) / "server.log").open("wb"),
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(REPO / "operator"), os.environ.get("PYTHONPATH")])
                ),
            },
        )
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
            give_up = defaults.webhook_read_timeout_seconds + 10
            idle, peak, statuses, elapsed = asyncio.run(attack(server.pid, port, give_up))
        finally:
            server.terminate()
            server.wait(timeout=10)
    ok = report(idle, peak, statuses, elapsed, budget)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
