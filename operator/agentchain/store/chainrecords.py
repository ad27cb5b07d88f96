"""Per-chain records (SPEC §2, §5): hops, completion, learnings claims.

Kubernetes objects hold a chain's live state (annotations on each AgentJob); this record
holds what must be decided *once* for a whole chain even when the operator restarts or
runs twice at the same moment, and what must outlive the AgentJobs for audit:

* hops — a bounded, ordered list of transitions. A hop is identified by (job, phase,
  decision), and a replayed transition (resync after a restart) is not recorded twice;
* completion — :meth:`ChainStore.mark_complete` answers True exactly once per chain, so
  the "chain complete" Event and metric are emitted once (``HSETNX`` is the arbiter);
* learnings claims — :meth:`ChainStore.learnings_claim` records, per (chain, agent),
  *which* AgentJob gets the learnings: the first claimant wins and keeps winning. The
  claim is written *before* the prompt is built, and because the winner's prompt can
  only land in its one batch Job (a deterministic name, created once), a restarted
  operator that rebuilds the prompt after a crash injects the learnings again for the
  same job — so they reach exactly one run, neither lost nor doubled (SPEC §5).

Each write is atomic (Lua or MULTI) and pushes the record's expiry forward.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from agentchain.store import keys

# A chain is at most 10 jobs deep by default; a few transitions each fit easily.
CHAIN_MAX_HOPS = 200

# KEYS = hops list, hop-ids set; ARGV = hop id, hop JSON, max hops, ttl seconds.
_RECORD_HOP = """
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[3]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
"""

# KEYS = meta hash; ARGV = outcome, last job, completed at, ttl seconds.
_MARK_COMPLETE = """
if redis.call('HSETNX', KEYS[1], 'complete', '1') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'outcome', ARGV[1], 'last_job', ARGV[2], 'completed_at', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""


@dataclass(frozen=True, slots=True)
class ChainRecord:
    """What the store knows about one chain; hops are dicts with camelCase keys."""

    chain_id: str
    hops: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = False
    outcome: str | None = None
    last_job: str | None = None
    completed_at: float | None = None


def _text(fields: dict[bytes, bytes], name: bytes) -> str | None:
    raw = fields.get(name)
    return None if raw is None else raw.decode("utf-8")


class ChainStore:
    """Chain records, one set of keys per (tenant, chain id)."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._record_hop = redis.register_script(_RECORD_HOP)
        self._mark_complete = redis.register_script(_MARK_COMPLETE)

    async def record_hop(
        self,
        tenant: str,
        chain_id: str,
        *,
        job_name: str,
        agent: str,
        phase: str,
        decision: str,
        detail: str,
    ) -> bool:
        """Append a hop; False when the same (job, phase, decision) was already recorded."""
        hop = {
            "jobName": job_name,
            "agent": agent,
            "phase": phase,
            "decision": decision,
            "detail": detail,
            "at": time.time(),
        }
        hop_id = json.dumps([job_name, phase, decision])
        added = await self._record_hop(
            keys=[keys.chain_hops(tenant, chain_id), keys.chain_hop_ids(tenant, chain_id)],
            args=[hop_id, json.dumps(hop), CHAIN_MAX_HOPS, keys.CHAIN_TTL_SECONDS],
        )
        return bool(added)

    async def get(self, tenant: str, chain_id: str) -> ChainRecord | None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lrange(keys.chain_hops(tenant, chain_id), 0, -1)
            pipe.hgetall(keys.chain_meta(tenant, chain_id))
            raw_hops, meta = await pipe.execute()
        if not raw_hops and not meta:
            return None
        completed_at = _text(meta, b"completed_at")
        return ChainRecord(
            chain_id=chain_id,
            hops=[json.loads(raw) for raw in raw_hops],
            complete=meta.get(b"complete") == b"1",
            outcome=_text(meta, b"outcome"),
            last_job=_text(meta, b"last_job"),
            completed_at=float(completed_at) if completed_at else None,
        )

    async def mark_complete(self, tenant: str, chain_id: str, outcome: str, last_job: str) -> bool:
        """True for exactly one caller per chain, however many race."""
        won = await self._mark_complete(
            keys=[keys.chain_meta(tenant, chain_id)],
            args=[outcome, last_job, repr(time.time()), keys.CHAIN_TTL_SECONDS],
        )
        return bool(won)

    async def learnings_claim(self, tenant: str, chain_id: str, agent: str, job: str) -> bool:
        """Whether ``job`` is the one run of ``agent`` in this chain that gets the learnings.

        True for the first claimant and, on every later call, for that same claimant
        only (a rebuild after a crash); False for any other job. Call it before
        building the prompt. ``job`` identifies one AgentJob (the engine passes
        ``name/uid``, so a deleted and recreated job of the same name is a new run).
        """
        key = keys.chain_learnings(tenant, chain_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, agent, job)
            pipe.hget(key, agent)
            pipe.expire(key, keys.CHAIN_TTL_SECONDS)
            _, claimant, _ = await pipe.execute()
        # Claims written before claimants were recorded hold a timestamp: never equal.
        return bool(claimant == job.encode("utf-8"))

    async def learnings_claimant(self, tenant: str, chain_id: str, agent: str) -> str | None:
        """The job that claimed ``agent``'s learnings in this chain, if any (for audit)."""
        raw = await self._redis.hget(keys.chain_learnings(tenant, chain_id), agent)  # type: ignore[misc]
        return None if raw is None else bytes(raw).decode("utf-8")
