"""The process-wide runtime: settings, the Redis-backed stores and every memo.

Created once at operator start-up and handed to every engine call, instead of
module globals, so tests can run several runtimes against different Redis DBs:
the watch-fed indexes (agents, unsettled AgentJobs, batch Jobs, pods), the per-object
locks and this process's last status write to each AgentJob all live here and
nowhere else.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from agentchain.core import statuswriting
from agentchain.core.catalog import AgentCatalog
from agentchain.core.feeds import JobFeed
from agentchain.core.locking import Locks
from agentchain.core.podowners import BatchJobs, Pods
from agentchain.core.unsettled import Unsettled
from agentchain.kube import clients
from agentchain.memory.anchors import AnchorStore
from agentchain.memory.contexts import ContextStore
from agentchain.settings import Settings
from agentchain.store import connecting
from agentchain.store.chainrecords import ChainStore
from agentchain.store.deliveries import DeliveryLog
from agentchain.store.outputs import OutputStore
from agentchain.store.signing import OperatorKeys
from agentchain.store.tokens import TokenStore
from agentchain.traces.recording import Traces

MISSING_KEY_MESSAGE = (
    "no operator key configured (AGENTCHAIN_OPERATOR_KEY_FILE or AGENTCHAIN_OPERATOR_KEY): "
    "job tokens and queued webhook jobs are signed with it. Create one, e.g. "
    "`openssl rand -hex 32 > operator.key` and AGENTCHAIN_OPERATOR_KEY_FILE=operator.key; "
    "the Helm chart generates it"
)


class MissingOperatorKeyError(RuntimeError):
    """The operator must not run without its key (fail closed)."""


@dataclass
class Runtime:
    settings: Settings
    redis: aioredis.Redis
    operator_keys: OperatorKeys
    outputs: OutputStore
    tokens: TokenStore
    chains: ChainStore
    anchors: AnchorStore
    contexts: ContextStore
    deliveries: DeliveryLog
    traces: Traces
    """Spans recorded for export (``traces/``); does nothing unless ``OTEL_*`` says where."""
    agents: AgentCatalog = field(default_factory=AgentCatalog)
    writes: statuswriting.Writes = field(default_factory=statuswriting.Writes)
    """Every AgentJob status write, and the version our last one to each produced."""
    unsettled: Unsettled = field(init=False)
    jobs: BatchJobs = field(default_factory=BatchJobs)
    """Batch Jobs as the watch shows them: which pods are the operator's own."""
    locks: Locks = field(default_factory=Locks)
    workspace_locks: Locks = field(default_factory=Locks)
    """Per namespace (name ""): counting its workspace volumes and creating one take
    turns (``workspaces/attaching``), so the namespace's cap holds exactly."""
    pods: Pods = field(default_factory=Pods)
    """Pods as the watch shows them, per AgentJob: an attempt's state without a read."""
    feed: JobFeed = field(default_factory=JobFeed)  # AgentJob changes for live dashboard pages.
    admitted: dict[str, set[str]] = field(default_factory=dict)
    """Jobs a freed concurrency slot let in, per namespace, started once no lock is held
    (``flow/admitting``)."""
    last_repair: float = 0.0
    """When ``admitting.repair`` last ran (monotonic seconds)."""
    retry_timers: dict[tuple[str, str, int], asyncio.TimerHandle] = field(default_factory=dict)
    """(namespace, name, attempt) of retries waiting out their backoff (``flow/retrying``)."""
    background: set[asyncio.Task[None]] = field(default_factory=set)
    """Tasks nobody awaits, referenced until they end (the event loop keeps only weak ones)."""
    github: object | None = None
    """The GitHub side (``github/appruntime.GitHubSide``), built on first use: typed there,
    since it is built over this runtime and this module is below it."""

    def __post_init__(self) -> None:
        self.unsettled = Unsettled(self.writes)

    @classmethod
    def create(cls, settings: Settings) -> Runtime:
        """The operator's runtime; refuses settings without an operator key."""
        if not settings.operator_key:
            raise MissingOperatorKeyError(MISSING_KEY_MESSAGE)
        # Plain, TLS or Sentinel (store/connecting.py); a password in the URL wins.
        client = connecting.connect(settings.redis_url, settings.redis_password or None)
        return cls.from_client(settings, client)

    @classmethod
    def from_client(cls, settings: Settings, client: aioredis.Redis) -> Runtime:
        """Every store on one Redis client (tests pass their own).

        Without a configured operator key, a random one for this runtime only: tokens and
        queued jobs then do not survive it, which suits tests and nothing else.
        """
        operator_keys = OperatorKeys(settings.operator_key or (secrets.token_bytes(32),))
        return cls(
            settings=settings,
            redis=client,
            operator_keys=operator_keys,
            outputs=OutputStore(client),
            tokens=TokenStore(client, operator_keys),
            chains=ChainStore(client),
            anchors=AnchorStore(client),
            contexts=ContextStore(
                client,
                max_entries=settings.store_quota_entries,
                max_bytes=settings.store_quota_bytes,
            ),
            deliveries=DeliveryLog(
                client,
                operator_keys,
                min_replicas=settings.webhook_min_replicas,
                replica_timeout_ms=settings.webhook_replica_timeout_ms,
            ),
            traces=Traces(client),
        )

    async def close(self) -> None:
        await self.redis.aclose()
        await clients.close()  # This loop's API connections.
