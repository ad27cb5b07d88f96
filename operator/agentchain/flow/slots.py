"""Concurrency-group admission in Redis: slot holders and a FIFO queue, one Lua step each.

Per (tenant, group): a sorted set of the chains holding a slot, a sorted set of the
chains waiting (both scored by the chain's *ticket*, when its job was received), and a
hash chain -> root AgentJob (plus ``#limit``).  Every decision is one script, so two
deliveries admitted at the same instant, by one process or two, can never both take
the last slot, and a crash between two steps cannot half-apply one.

* ``admit`` (the engine, when a root job would start): already a holder -> admitted
  (a replay after a crash); else by policy.  ``queue``: join the queue at the ticket's
  place, then hand free slots to the queue's head, so a job is admitted only when no
  earlier ticket waits.  ``refuse``: a free slot or nothing.  ``cancel-in-progress``:
  take a slot and displace the oldest holders beyond the limit (they are answered as
  victims, to be stopped) -- unless a holder with a newer ticket is already there: then
  this chain is the stale one.
* ``enqueue`` (the webhook, right after accepting a delivery): join the queue at once,
  so a job the dispatcher creates late still runs in its delivery's order.
* ``release`` (the chain completed): leave, and hand the freed slots to the queue's
  head; answered so the engine starts them.

Kubernetes holds the truth (the AgentJobs); this is an index of it that the engine's
slot repair (``flow/admitting.repair``) reconciles with the CRs.
"""

from __future__ import annotations

from redis.asyncio import Redis

from agentchain.store import keys

# Shared by the scripts: hand free slots to the queue's head; answers chain/job pairs.
_PROMOTE = """
local function job_of(c) return redis.call('HGET', KEYS[3], c) or '' end
local function promote(limit, skip)
  local out = {}
  local free = limit - redis.call('ZCARD', KEYS[1])
  if free <= 0 then return out end
  local heads = redis.call('ZRANGE', KEYS[2], 0, free - 1, 'WITHSCORES')
  for i = 1, #heads, 2 do
    redis.call('ZREM', KEYS[2], heads[i])
    redis.call('ZADD', KEYS[1], heads[i + 1], heads[i])
    if heads[i] ~= skip then
      out[#out + 1] = heads[i]
      out[#out + 1] = job_of(heads[i])
    end
  end
  return out
end
local function append(into, from)
  for _, v in ipairs(from) do into[#into + 1] = v end
  return into
end
"""

# KEYS: holders, queue, jobs, chain-group, groups; ARGV: chain, job, ticket, limit,
# policy, group, ttl, tenant-set member (KEYS[6] the tenants set).
_ADMIT = (
    _PROMOTE
    + """
local chain, job, policy = ARGV[1], ARGV[2], ARGV[5]
local ticket, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('HSET', KEYS[3], chain, job, '#limit', limit)
redis.call('SET', KEYS[4], ARGV[6], 'EX', tonumber(ARGV[7]))
redis.call('SADD', KEYS[5], ARGV[6])
redis.call('SADD', KEYS[6], ARGV[8])
local function decide()
  if redis.call('ZSCORE', KEYS[1], chain) then return {'admitted', '|'} end
  if policy == 'refuse' then
    if redis.call('ZCARD', KEYS[1]) >= limit then return {'refused'} end
    redis.call('ZADD', KEYS[1], ticket, chain)
    return {'admitted', '|'}
  end
  if policy == 'cancel-in-progress' then
    local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
    if redis.call('ZCARD', KEYS[1]) >= limit and newest[2] and tonumber(newest[2]) > ticket then
      return {'superseded', job_of(newest[1])}
    end
    redis.call('ZREM', KEYS[2], chain)
    redis.call('ZADD', KEYS[1], ticket, chain)
    local out = {'admitted'}
    while redis.call('ZCARD', KEYS[1]) > limit do
      local oldest = redis.call('ZPOPMIN', KEYS[1])
      out[#out + 1] = oldest[1]
      out[#out + 1] = job_of(oldest[1])
    end
    out[#out + 1] = '|'
    return out
  end
  if not redis.call('ZSCORE', KEYS[2], chain) then redis.call('ZADD', KEYS[2], ticket, chain) end
  local promoted = promote(limit, chain)
  if redis.call('ZSCORE', KEYS[1], chain) then return append({'admitted', '|'}, promoted) end
  local rank = redis.call('ZRANK', KEYS[2], chain) + 1
  return append({'queued', tostring(rank), '|'}, promoted)
end
local answer = decide()
for _, k in ipairs({KEYS[1], KEYS[2], KEYS[3], KEYS[5]}) do
  redis.call('EXPIRE', k, tonumber(ARGV[7]))
end
return answer
"""
)

# KEYS: holders, queue, jobs, chain-group, groups, tenants; ARGV: chain, job, ticket, group,
# ttl, tenant.
_ENQUEUE = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[2], 'NX', tonumber(ARGV[3]), ARGV[1])
redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2])
redis.call('SET', KEYS[4], ARGV[4], 'EX', tonumber(ARGV[5]))
redis.call('SADD', KEYS[5], ARGV[4])
redis.call('SADD', KEYS[6], ARGV[6])
for _, k in ipairs({KEYS[2], KEYS[3], KEYS[5]}) do redis.call('EXPIRE', k, tonumber(ARGV[5])) end
return 1
"""

# KEYS: holders, queue, jobs, chain-group; ARGV: chain, ttl.
_RELEASE = (
    _PROMOTE
    + """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4])
local limit = tonumber(redis.call('HGET', KEYS[3], '#limit') or '1')
local promoted = promote(limit, '')
if #promoted > 0 then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2])) end
return promoted
"""
)

Pairs = list[tuple[str, str]]


def _text(values: list[bytes | str]) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def _pairs(flat: list[str]) -> Pairs:
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat) - 1, 2)]


class AdmissionStore:
    """Slots and queues of concurrency groups."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._admit = redis.register_script(_ADMIT)
        self._enqueue = redis.register_script(_ENQUEUE)
        self._release = redis.register_script(_RELEASE)

    @staticmethod
    def _group_keys(tenant: str, group: str) -> list[str]:
        return [keys.flow_holders(tenant, group), keys.flow_queue(tenant, group)]

    async def admit(
        self,
        tenant: str,
        group: str,
        *,
        chain: str,
        job: str,
        ticket: int,
        limit: int,
        policy: str,
    ) -> list[str]:
        """The raw answer (``flow.rules.concurrency.verdict`` reads it)."""
        answer = await self._admit(
            keys=[
                *self._group_keys(tenant, group),
                keys.flow_jobs(tenant, group),
                keys.flow_chain_group(tenant, chain),
                keys.flow_groups(tenant),
                keys.FLOW_TENANTS,
            ],
            args=[chain, job, ticket, limit, policy, group, keys.FLOW_TTL_SECONDS, tenant],
        )
        return _text(answer)

    async def enqueue(self, tenant: str, group: str, *, chain: str, job: str, ticket: int) -> None:
        """Join the group's queue now (the webhook), in the ticket's place."""
        await self._enqueue(
            keys=[
                *self._group_keys(tenant, group),
                keys.flow_jobs(tenant, group),
                keys.flow_chain_group(tenant, chain),
                keys.flow_groups(tenant),
                keys.FLOW_TENANTS,
            ],
            args=[chain, job, ticket, group, keys.FLOW_TTL_SECONDS, tenant],
        )

    async def group_of(self, tenant: str, chain: str) -> str | None:
        raw = await self._redis.get(keys.flow_chain_group(tenant, chain))
        return raw.decode() if isinstance(raw, bytes) else raw

    async def release(self, tenant: str, chain: str, group: str | None = None) -> Pairs:
        """The chain leaves its group; answers the (chain, root job) pairs admitted now."""
        group = group if group is not None else await self.group_of(tenant, chain)
        if group is None:
            return []
        answer = await self._release(
            keys=[
                *self._group_keys(tenant, group),
                keys.flow_jobs(tenant, group),
                keys.flow_chain_group(tenant, chain),
            ],
            args=[chain, keys.FLOW_TTL_SECONDS],
        )
        return _pairs(_text(answer))

    async def tenants(self) -> list[str]:
        return sorted(_text(list(await self._redis.smembers(keys.FLOW_TENANTS))))  # type: ignore[misc]

    async def groups(self, tenant: str) -> list[str]:
        return sorted(_text(list(await self._redis.smembers(keys.flow_groups(tenant)))))  # type: ignore[misc]

    async def holders(self, tenant: str, group: str) -> list[tuple[str, str, float]]:
        """(chain, root job, ticket) of the chains holding a slot."""
        found = await self._redis.zrange(keys.flow_holders(tenant, group), 0, -1, withscores=True)
        chains = [c.decode() if isinstance(c, bytes) else str(c) for c, _ in found]
        jobs = await self._redis.hmget(keys.flow_jobs(tenant, group), chains) if chains else []  # type: ignore[misc]
        return [
            (chain, (job or b"").decode(), float(score))
            for chain, job, (_, score) in zip(chains, jobs, found, strict=True)
        ]

    async def queued(self, tenant: str, group: str) -> list[str]:
        """The waiting chains, first first."""
        return _text(await self._redis.zrange(keys.flow_queue(tenant, group), 0, -1))
