"""The write-back worker's scheduling (``agentchain.github.writeback``).

The chain's flush itself (list, render, GitHub) is replaced by a recorder here: what is
under test is when the worker flushes, not what a flush sends (the e2e suite runs the
real one against the GitHub stand-in). The runtime is real, on a real Redis.

Aspects covered:
* ``observe`` ignores jobs that came through no App installation, and any job when no
  App is configured; it marks the job's chain, and a terminal or deleted job's tokens
  for revocation (only while a token could still be alive);
* coalescing: many changes within the delay are one flush; a change during a flush is
  one more flush after it;
* a rate limit pauses every chain until its ``Retry-After``; a transient failure is
  retried after a back-off, or when it says it is over (another writer's claim ends);
  a permanent one is reported once and not retried.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.github import appruntime, posting, tokenminting, writeback
from agentchain.github.githuberrors import NOT_INSTALLED, RATE_LIMITED, UNAVAILABLE, GitHubError
from agentchain.settings import Settings

DELAY = 0.2


@functools.cache
def _pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture
async def rt(redis: Redis) -> AsyncIterator[Runtime]:
    settings = Settings(
        github_app_id=1,
        github_private_key=_pem(),
        github_writeback_delay_seconds=DELAY,
        operator_key=("k",),
    )
    runtime = Runtime.from_client(settings, redis)
    yield runtime
    await appruntime.close(runtime)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []
        self.failures: list[GitHubError] = []
        self.hold = asyncio.Event()
        self.hold.set()

    async def flush(
        self, side: Any, namespace: str, chain: str, run: Any = None
    ) -> tuple[str, None]:
        self.calls.append((chain, time.monotonic()))
        await self.hold.wait()
        if self.failures:
            raise self.failures.pop(0)
        return "written", None


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    monkeypatch.setattr(posting, "flush", rec.flush)

    async def no_chain(side: Any, namespace: str, chain: str) -> None:
        return None

    monkeypatch.setattr(posting, "list_chain", no_chain)
    return rec


def job(chain: str = "c1", phase: str = "Running", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": f"job-{chain}", "uid": "u"},
        "spec": {"event": {"installationId": 7, "number": 1}},
        "status": {"chainId": chain, "phase": phase, **status},
    }


async def _settle(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def test_jobs_without_an_installation_are_ignored(rt: Runtime, recorder: Recorder) -> None:
    plain = job()
    plain["spec"]["event"] = {"number": 1}
    writeback.observe(rt, "MODIFIED", plain)
    side = appruntime.side_of(rt)
    assert side is not None and side.worker is None


async def test_no_app_no_worker(redis: Redis, recorder: Recorder) -> None:
    bare = Runtime.from_client(Settings(operator_key=("k",)), redis)
    writeback.observe(bare, "MODIFIED", job())
    assert appruntime.side_of(bare) is None


async def test_changes_within_the_delay_are_one_flush(rt: Runtime, recorder: Recorder) -> None:
    for _ in range(10):
        writeback.observe(rt, "MODIFIED", job())
    await _settle(DELAY * 4)
    assert [c for c, _ in recorder.calls] == ["c1"]


async def test_a_change_during_a_flush_is_one_more(rt: Runtime, recorder: Recorder) -> None:
    recorder.hold.clear()
    writeback.observe(rt, "MODIFIED", job())
    await _settle(DELAY * 2)
    for _ in range(3):
        writeback.observe(rt, "MODIFIED", job())
    recorder.hold.set()
    await _settle(DELAY * 4)
    assert [c for c, _ in recorder.calls] == ["c1", "c1"]


async def test_a_rate_limit_pauses_every_chain(rt: Runtime, recorder: Recorder) -> None:
    recorder.failures = [GitHubError(RATE_LIMITED, "limited", retry_after=1.0)]
    writeback.observe(rt, "MODIFIED", job("c1"))
    await _settle(DELAY * 2)
    writeback.observe(rt, "MODIFIED", job("c2"))
    await _settle(1.5)
    first = recorder.calls[0][1]
    later = recorder.calls[1:]
    assert sorted(c for c, _ in later) == ["c1", "c2"]
    assert all(at - first >= 0.95 for _, at in later)


async def test_transient_failures_are_retried(rt: Runtime, recorder: Recorder) -> None:
    recorder.failures = [GitHubError(UNAVAILABLE, "502")]
    writeback.observe(rt, "MODIFIED", job())
    await _settle(DELAY + 2.5)  # The first back-off is 1-2 s.
    assert [c for c, _ in recorder.calls] == ["c1", "c1"]


async def test_a_transient_failure_that_says_when_is_retried_then(
    rt: Runtime, recorder: Recorder
) -> None:
    """Another writer's claim (which a crashed writer never releases) ends at a known
    time: the retry comes then, neither at the first back-off nor a doubling later."""
    recorder.failures = [GitHubError(UNAVAILABLE, "claimed", retry_after=3.0)]
    writeback.observe(rt, "MODIFIED", job())
    await _settle(DELAY + 2.5)
    assert [c for c, _ in recorder.calls] == ["c1"]
    await _settle(2.0)
    first, second = (at for _, at in recorder.calls)
    assert 3.0 <= second - first <= 4.1


async def test_permanent_failures_are_not_retried(rt: Runtime, recorder: Recorder) -> None:
    recorder.failures = [GitHubError(NOT_INSTALLED, "not installed")]
    writeback.observe(rt, "MODIFIED", job())
    await _settle(DELAY + 2.5)
    assert [c for c, _ in recorder.calls] == ["c1"]


async def test_ended_jobs_revoke_their_tokens(
    rt: Runtime, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    revoked: list[tuple[str, str | None]] = []

    async def revoke(side: Any, namespace: str, name: str, uid: str | None = None) -> None:
        revoked.append((name, uid))  # The uid: that incarnation's scope is dropped.

    monkeypatch.setattr(tokenminting, "revoke", revoke)
    writeback.observe(rt, "MODIFIED", job("a", "Succeeded"))
    long_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)).isoformat()
    writeback.observe(rt, "MODIFIED", job("b", "Failed", completionTime=long_ago))
    writeback.observe(rt, "DELETED", job("c", "Running"))
    writeback.observe(rt, "MODIFIED", job("d", "Running"))
    await _settle(0.1)
    assert revoked == [("job-a", "u"), ("job-c", "u")]
