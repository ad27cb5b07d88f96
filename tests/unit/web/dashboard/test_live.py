"""Live dashboard pages: the feed from the AgentJob watch and the job event stream (issue 19).

Aspects covered:
* ``JobFeed``: every subscriber gets every change, publishing never waits, a subscriber
  that falls behind is marked overflowed (and gets nothing more), leaving unsubscribes;
* ``/ui/api/events`` (served, real Redis for the session): a published change reaches
  the stream as a ``job`` event with the list's view; changes outside the page's
  filters or outside the operator's namespaces are not sent; a viewer that fell behind
  gets ``reload``; the stream ends when the listener shuts down;
* frames are one ``data:`` line of JSON whatever the text holds (newlines, ``</script>``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from agentchain import models
from agentchain.core import feeds
from agentchain.core.feeds import JobFeed
from agentchain.core.runtime import Runtime
from agentchain.settings import Settings
from agentchain.web.app import build_internal_app
from agentchain.web.dashboard import live
from agentchain.web.jobapi import reads
from tests.unit.web.conftest import Client, serving
from tests.unit.web.dashboard.test_logins import log_in

Obj = dict[str, Any]


def job(name: str, namespace: str = "team-a", chain: str = "c1", phase: str = "Running") -> Obj:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {models.CHAIN_ID: chain},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"agentRole": "ai-dev", "prompt": "line one\n</script><script>x</script>"},
        "status": {"phase": phase},
    }


class TestFeed:
    def test_every_subscriber_gets_every_change_until_it_leaves(self) -> None:
        feed = JobFeed()
        with feed.subscribe() as one, feed.subscribe() as two:
            feed.publish("MODIFIED", job("a"))
            feed.publish("DELETED", job("b"))
            assert feed.subscribers == 2
            for sub in (one, two):
                first, second = sub.queue.get_nowait(), sub.queue.get_nowait()
                assert (first.name, first.deleted) == ("a", False)
                assert (second.name, second.deleted, second.namespace) == ("b", True, "team-a")
        assert feed.subscribers == 0
        feed.publish("ADDED", job("c"))  # Nobody listening: nothing happens.

    def test_a_subscriber_that_falls_behind_is_marked_and_gets_nothing_more(self) -> None:
        feed = JobFeed()
        with feed.subscribe() as slow:
            for n in range(feeds.QUEUE_SIZE + 5):
                feed.publish("MODIFIED", job(f"j{n}"))
            assert slow.overflowed and slow.queue.qsize() == feeds.QUEUE_SIZE


def test_a_frame_is_one_line_of_json_whatever_the_text() -> None:
    frame = live.frame("log", "a\nb\r\n</script>\u2028")
    lines = frame.decode().split("\n")
    assert lines[0] == "event: log" and lines[1].startswith("data: ") and lines[2:] == ["", ""]
    assert json.loads(lines[1].removeprefix("data: ")) == "a\nb\r\n</script>\u2028"


@pytest.fixture
async def ui(redis: Redis, with_settings: Callable[..., Settings]) -> AsyncIterator[Client]:
    rt = Runtime.from_client(with_settings(namespaces=("team-a", "team-b")), redis)
    async with serving(build_internal_app(rt)) as c:
        await log_in(c)
        yield c


async def events(client: Client, path: str, count: int) -> list[tuple[str, Any]]:
    """The first ``count`` events of the stream at ``path`` (heartbeats skipped)."""
    out: list[tuple[str, Any]] = []
    async with client.get(path) as stream:
        assert stream.status == 200 and stream.content_type == "text/event-stream"
        name = ""
        async for raw in stream.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                out.append((name, json.loads(line.removeprefix("data: "))))
                if len(out) == count:
                    return out
    return out


async def publish_when_subscribed(rt: Runtime, *changes: tuple[str, Obj]) -> None:
    while rt.feed.subscribers == 0:
        await asyncio.sleep(0.01)
    for kind, obj in changes:
        rt.feed.publish(kind, obj)


def runtime_of(client: Client) -> Runtime:
    assert client.app is not None
    return client.app[reads.RUNTIME_KEY]


async def test_changes_reach_the_stream_filtered_to_the_page_and_the_namespaces(
    ui: Client,
) -> None:
    rt = runtime_of(ui)
    publishing = asyncio.create_task(
        publish_when_subscribed(
            rt,
            ("MODIFIED", job("other-ns", namespace="team-z")),  # Not a served namespace.
            ("MODIFIED", job("other-chain", chain="c2")),  # Not the page's chain.
            ("MODIFIED", job("mine")),
            ("DELETED", job("mine", phase="Succeeded")),
        )
    )
    got = await asyncio.wait_for(events(ui, "/ui/api/events?chain=c1", 2), 10)
    await publishing
    assert [(kind, data["id"], data["deleted"]) for kind, data in got] == [
        ("job", "mine", False),
        ("job", "mine", True),
    ]
    assert got[0][1]["state"] == "running" and got[0][1]["namespace"] == "team-a"
    assert "prompt" not in got[0][1]  # The list's view, not the whole object.


async def test_a_viewer_that_fell_behind_is_told_to_reload(ui: Client) -> None:
    rt = runtime_of(ui)
    flood = [("MODIFIED", job(f"j{n}", namespace="team-z")) for n in range(feeds.QUEUE_SIZE + 1)]
    publishing = asyncio.create_task(publish_when_subscribed(rt, *flood))
    got = await asyncio.wait_for(events(ui, "/ui/api/events", 1), 10)
    await publishing
    assert got == [("reload", {})]


async def test_streams_end_when_the_listener_shuts_down(
    redis: Redis, with_settings: Callable[..., Settings]
) -> None:
    rt = Runtime.from_client(with_settings(), redis)
    client = serving(build_internal_app(rt))
    await client.start_server()
    await log_in(client)
    response = await client.get("/ui/api/events")
    assert response.status == 200
    await asyncio.wait_for(client.close(), 10)  # Not held for the shutdown timeout.
    assert rt.feed.subscribers == 0
