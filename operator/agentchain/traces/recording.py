"""What the rest of the operator calls: record a span, give a pod its trace context.

Off unless the ``OTEL_*`` variables name an endpoint (``exporting.configured``): then
:meth:`Traces.record` does nothing, a pod gets no trace variables and no exporter is
built (:meth:`Traces.start_exporting`), so a cluster that does not trace pays nothing.
Tracing never fails what it observes: a span that cannot be recorded is logged and
dropped.
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from agentchain.traces import exporting
from agentchain.traces.outbox import Outbox
from agentchain.traces.rules import spans
from agentchain.traces.rules.spans import Span

log = logging.getLogger(__name__)


class Traces:
    def __init__(self, redis: aioredis.Redis, *, enabled: bool | None = None) -> None:
        self.enabled = exporting.configured() if enabled is None else enabled
        self.outbox = Outbox(redis)
        self._agent_endpoint = exporting.agent_endpoint() if self.enabled else ""

    async def record(self, span: Span) -> None:
        """Record ``span`` once (a replay records nothing more)."""
        if not self.enabled:
            return
        try:
            await self.outbox.record(span)
        except RedisError as exc:
            log.warning("span %s not recorded: %s", span.name, exc)

    def start_exporting(self) -> asyncio.Task[None] | None:
        """The leader's exporter, draining the outbox; None, and nothing built, when off."""
        if not self.enabled:
            return None
        return asyncio.create_task(exporting.keep_exporting(self.outbox), name="traces")

    def exemplar(self, chain_id: str | None) -> dict[str, str] | None:
        """The exemplar a metric sample about chain ``chain_id`` carries: its trace id
        when tracing is on (a sample then links to the trace), else none."""
        if not self.enabled or not chain_id:
            return None
        return spans.exemplar(chain_id)

    def agent_env(self, chain_id: str, namespace: str, job: str) -> dict[str, str]:
        """The trace variables of ``job``'s pod (none when tracing is off)."""
        if not self.enabled:
            return {}
        return spans.agent_env(chain_id, namespace, job, self._agent_endpoint)
