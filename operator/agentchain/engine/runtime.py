"""The process-wide runtime: settings and the Redis-backed stores.

Created once at operator start-up and handed to every engine call, instead of
module globals, so tests can run several runtimes against different Redis DBs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis.asyncio as aioredis

from agentchain.engine.arrivals import PodArrivals
from agentchain.engine.catalog import AgentCatalog
from agentchain.engine.ownership import BatchJobs
from agentchain.engine.unsettled import Unsettled
from agentchain.kube import clients
from agentchain.settings import Settings
from agentchain.store.anchors import AnchorStore
from agentchain.store.chains import ChainStore
from agentchain.store.contexts import ContextStore
from agentchain.store.deliveries import DeliveryLog
from agentchain.store.outputs import OutputStore
from agentchain.store.tokens import TokenStore


@dataclass
class Runtime:
    settings: Settings
    redis: aioredis.Redis
    outputs: OutputStore
    tokens: TokenStore
    chains: ChainStore
    anchors: AnchorStore
    contexts: ContextStore
    deliveries: DeliveryLog
    agents: AgentCatalog = field(default_factory=AgentCatalog)
    unsettled: Unsettled = field(default_factory=Unsettled)
    orphans: dict[tuple[str, str], float] = field(default_factory=dict)
    """Ownerless batch Jobs waiting for their AgentJob: (namespace, name) -> when to look."""
    pods: PodArrivals = field(default_factory=PodArrivals)
    jobs: BatchJobs = field(default_factory=BatchJobs)
    """Batch Jobs as the watch shows them: which pods are the operator's own."""

    @classmethod
    def create(cls, settings: Settings) -> Runtime:
        return cls.from_client(
            settings, aioredis.Redis.from_url(settings.redis_url, decode_responses=False)
        )

    @classmethod
    def from_client(cls, settings: Settings, client: aioredis.Redis) -> Runtime:
        """Every store on one Redis client (tests pass their own)."""
        return cls(
            settings=settings,
            redis=client,
            outputs=OutputStore(client),
            tokens=TokenStore(client),
            chains=ChainStore(client),
            anchors=AnchorStore(client),
            contexts=ContextStore(client),
            deliveries=DeliveryLog(client),
        )

    async def close(self) -> None:
        await self.redis.aclose()
        await clients.close()  # This loop's API connections.
