"""One replica of the operator (``agentchain run``): the web side always, the engine only
while it leads.

Several replicas run behind one Service.  Each serves the webhook, the job API and the
dashboard and drains the webhook's queue, because all of these are stateless over Redis
and the API server (a queued job's AgentJob name is deterministic, so two replicas
creating it make one object).  The **engine** (kopf with every handler, the resync,
everything else that moves chains forward) runs in exactly one replica at a time: the
holder of a ``coordination.k8s.io`` Lease (``kube/electing.py``).  The order is:

1. the Runtime (Redis) and both listeners start, so a follower is ready to serve at once;
2. the elector campaigns until this replica holds the Lease, on a thread and event loop
   of its own (:class:`ElectionThread`), so that renewals never wait behind the engine;
3. kopf starts, in a task whose context carries the elector's fence
   (``clients.WRITE_FENCE``): every write the engine sends is checked against the renew
   deadline first, and the tasks kopf spawns inherit that context;
4. the Lease is renewed every retry period.  If a renewal misses the renew deadline the
   process **exits at once** (status 1, no cleanup that could write), as
   controller-runtime does: the Deployment restarts it, as a follower.

On SIGTERM (a rolling update, a drain) a leader stops kopf first (kopf's own signal
handling, or a cancellation before kopf has taken over the signals), then releases the
Lease so a follower takes over within one retry period.  Then every replica **drains**:
for ``shutdown_drain_seconds`` the webhook and the job API keep serving while
``/readyz`` answers 503 (``role: stopping``), because a Service stops routing to a
terminating pod only once the endpoint change has reached every proxy; a delivery sent
in that window is still answered, not refused (GitHub does not redeliver on its own).
A second signal cuts the drain short.  Then the listeners close, letting requests in
flight finish.  kopf peering was not used: with equal priorities (every replica of one
Deployment) kopf freezes every operator, it pauses watches without stopping handlers in
flight or fencing their writes, and a dead peer is noticed only when its keepalive
record expires (a minute by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import signal
import socket
import sys
import threading
import weakref
from collections.abc import Callable, Collection, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import kopf

from agentchain import metrics
from agentchain.cancelling import stop_tasks
from agentchain.core.runtime import Runtime
from agentchain.kube import clients
from agentchain.kube.electing import Elector
from agentchain.kube.rules import leadership
from agentchain.kube.rules.leadership import Timing
from agentchain.settings import Settings
from agentchain.web.dashboard import following

log = logging.getLogger(__name__)
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
FALLBACK_NAMESPACE = "default"
LOST_EXIT_CODE = 1
STOP_SECONDS = 5.0
T = TypeVar("T")


def lease_namespace(config: Settings) -> str:
    """The Lease's namespace: configured, else the pod's own, else ``default``."""
    if config.leader_election_namespace:
        return config.leader_election_namespace
    with contextlib.suppress(OSError):
        found = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        if found:
            return found
    return FALLBACK_NAMESPACE


def identity(config: Settings) -> str:
    """This replica's holder identity: configured, else ``<hostname>_<pid>``."""
    return config.leader_election_identity or f"{socket.gethostname()}_{os.getpid()}"


def timing_problems(config: Settings) -> list[str]:
    """What is wrong with the configured election timing (checked before anything starts)."""
    return leadership.timing_problems(
        config.leader_election_lease_seconds,
        config.leader_election_renew_deadline_seconds,
        config.leader_election_retry_seconds,
    )


def elector_for(config: Settings) -> Elector | None:
    if not config.leader_election:
        return None
    timing = Timing(
        config.leader_election_lease_seconds,
        config.leader_election_renew_deadline_seconds,
        config.leader_election_retry_seconds,
    )
    return Elector(lease_namespace(config), config.leader_election_name, identity(config), timing)


def exit_now() -> None:
    """Leadership is lost: stop acting this instant, without any cleanup that could write."""
    logging.shutdown()  # Flush the log first: the last line says why the process ended.
    sys.stdout.flush()
    os._exit(LOST_EXIT_CODE)


class ElectionThread:
    """A thread with its own event loop, where the elector runs.

    Lease renewals must not wait behind the engine: on the engine's loop they would
    queue for its API connections and for every handler ahead of them, and a busy leader
    (a thousand AgentJobs arriving at once) would miss its own renew deadline.  Here they
    have a loop and an HTTP session to themselves (``clients`` keeps one per loop), and
    Python's thread switching gives them their turn even while the engine's loop is busy.
    Losing leadership exits the process from this thread, whatever the engine is doing.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on this thread's loop; cancelling the caller cancels it there."""
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(clients.close(), self.loop).result(STOP_SECONDS)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(STOP_SECONDS)


class Replica:
    """One ``agentchain run``: see the module docstring for the order of things."""

    def __init__(
        self,
        config: Settings,
        *,
        liveness: str | None = None,
        on_lost: Callable[[], None] = exit_now,
    ) -> None:
        self.config = config
        self.liveness = liveness
        self.on_lost = on_lost
        self.elector = elector_for(config)
        self.stopping = asyncio.Event()
        self.leading = False
        self.draining = False

    def role(self) -> str:
        if self.draining:
            return "stopping"  # /readyz answers 503: a Service routes elsewhere.
        return "leader" if self.leading else "follower"

    async def run(self) -> int:
        """Serve until stopped; the exit status of the process."""
        ForeignTasks.install(asyncio.get_running_loop())
        runtime = Runtime.create(self.config)
        try:
            listeners = await serve(runtime, self.role)
            try:
                self._catch_signals(self.stopping)
                status = await self._lead(runtime)
                if status == 0:  # A clean stop; a lost Lease or a failed engine exits now.
                    await self._drain()
                return status
            finally:
                metrics.LEADER.set(0)
                await listeners.cleanup()
        finally:
            await runtime.close()

    def _catch_signals(self, event: asyncio.Event) -> None:
        # kopf installs its own handlers once it runs (and then stops itself on them).
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, event.set)

    async def _drain(self) -> None:
        """Serve on, unready, while the Service forgets this pod (see the module doc)."""
        seconds = self.config.shutdown_drain_seconds
        if seconds <= 0:
            return
        self.draining = True
        hurry = asyncio.Event()
        self._catch_signals(hurry)  # Ours again: kopf's left with kopf.
        log.info("Draining: serving %.0f s more with /readyz unready, then stopping", seconds)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(hurry.wait(), seconds)

    async def _lead(self, runtime: Runtime) -> int:
        if self.elector is None:
            return await self._lead_as(runtime, None, None)
        lane = ElectionThread()
        # Open dashboard pages update on a follower too (kopf's handler feeds the leader's).
        feeding = asyncio.create_task(following.feed(runtime, self.config.namespaces))
        try:
            campaign = _until(lane.call(self.elector.campaign()), self.stopping)
            won = await campaign
            feeding.cancel()
            if not won:
                return 0  # Stopped while following.
            # Lost leadership exits from inside the renewal step, on the election thread.
            holding = asyncio.create_task(
                lane.call(self.elector.hold(self.on_lost)), name="lease renewal"
            )
            return await self._lead_as(runtime, holding, lane)
        finally:
            await stop_tasks([feeding])
            lane.stop()

    async def _lead_as(
        self,
        runtime: Runtime,
        holding: asyncio.Task[None] | None,
        lane: ElectionThread | None,
    ) -> int:
        self.leading = True
        metrics.LEADER.set(1)
        metrics.LEADER_TRANSITIONS.inc()
        engine = asyncio.create_task(self._engine(runtime), name="engine")
        stop = asyncio.create_task(self.stopping.wait(), name="stop signal")
        tasks = {engine, stop} | ({holding} if holding else set())
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if holding is not None and holding in done:
            engine.cancel()  # on_lost has exited the process already, except in tests.
        elif stop in done:
            engine.cancel()  # A signal before kopf took signals over: kopf stops on cancel.
        stop.cancel()
        status = await _status_of(engine)
        if stop in done:
            status = 0  # Cancelled on purpose: a clean stop.
        self.leading = False
        if holding is not None and lane is not None and not holding.done():
            holding.cancel()
            assert self.elector is not None
            await lane.call(self.elector.release())  # Only now: the engine has stopped.
        return status

    async def _engine(self, runtime: Runtime) -> None:
        """kopf, in this task's context: its writes and its tasks' are fenced."""
        ENGINE.set(True)
        if self.elector is not None:
            clients.WRITE_FENCE.set(self.elector.fence)
        namespaces = list(self.config.namespaces)
        # kopf.operator() is spawn_tasks + run_tasks; called apart so that kopf's stop
        # leaves the web's tasks alone (see ForeignTasks).
        ignored = ForeignTasks(asyncio.all_tasks())
        tasks = await kopf.spawn_tasks(
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            liveness_endpoint=self.liveness,
            # No stop_flag: kopf would leave its waiter for it pending when it stops on a
            # signal, then wait five seconds for that "hung" task before releasing.
            # The startup handler (handlers/lifecycle.py) takes both from the memo.
            memo=kopf.Memo(settings=self.config, runtime=runtime),
        )
        await kopf.run_tasks(tasks, ignored=ignored)


# True in the engine's task and every task created from it (contexts are inherited).
ENGINE: contextvars.ContextVar[bool] = contextvars.ContextVar("agentchain_engine", default=False)


class ForeignTasks(Collection["asyncio.Task[Any]"]):
    """The tasks kopf must leave alone when it stops: those that existed before it
    started, and every task created since outside the engine (the web server's request
    handlers, the webhook dispatcher's workers).

    When its root tasks end, kopf waits up to five seconds for, then cancels, every
    task of the loop it does not know to exclude, assuming the loop is its own; here
    it is shared with the web side, which must keep serving until the process stops.
    A task factory (:meth:`install`) records each task created outside the engine's
    context, so the exclusion is a live view.
    """

    def __init__(self, existing: Collection[asyncio.Task[Any]]) -> None:
        self._existing = set(existing)
        self._created: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        _FOREIGN.append(self._created)

    def __contains__(self, task: object) -> bool:
        return task in self._existing or task in self._created

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(self._existing | set(self._created))

    def __len__(self) -> int:
        return len(self._existing) + len(self._created)

    @staticmethod
    def install(loop: asyncio.AbstractEventLoop) -> None:
        loop.set_task_factory(_task_factory)


_FOREIGN: list[weakref.WeakSet[asyncio.Task[Any]]] = []


def _task_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
    task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
    if not ENGINE.get():  # Runs in the creator's context: is the creator the engine?
        for created in _FOREIGN:
            created.add(task)
    return task


async def _until(work: Any, stopping: asyncio.Event) -> bool:
    """Run ``work`` unless ``stopping`` is set first; whether it finished."""
    task = asyncio.ensure_future(work)
    stop = asyncio.create_task(stopping.wait())
    done, _ = await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    await stop_tasks(pending for pending in (task, stop) if pending not in done)
    return task in done


async def _status_of(engine: asyncio.Task[None]) -> int:
    try:
        await engine
    except asyncio.CancelledError:
        return LOST_EXIT_CODE
    except Exception:
        log.exception("the engine (kopf) failed")
        return LOST_EXIT_CODE
    return 0


async def serve(runtime: Runtime, role: Callable[[], str]) -> Any:
    """Both listeners; without a webhook secret, everything but the webhook."""
    from agentchain.web import app

    try:
        return await app.serve(runtime, role=role)
    except app.WebhookNotConfigured as exc:
        # Fail closed: without a secret the webhook is refused, the rest still serves.
        log.error("Webhook endpoint disabled: %s", exc)
        return await app.serve(runtime, webhook=False, role=role)


def main(config: Settings, *, liveness: str | None = None) -> int:
    return asyncio.run(Replica(config, liveness=liveness).run())
