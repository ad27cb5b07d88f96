"""What follow-up rounds on a chain's pull request keep in Redis, and the limit's comment.

* **Whose pull request** (:func:`record_pull`, :func:`pull_record`): when a chain's
  workspace opens (or finds) its pull request, or when a chain is started on a pull
  request (a ``pull_request`` delivery: then with its head branch, and whether that
  branch is a fork's; a comment or a review on it: with its head unknown, learnt from
  GitHub when its first round is due, :func:`learn_head`),
  ``github:pull-chain:<repo>#<n>`` records the namespace and chain,
  sealed under the operator key (``store/sealing.py``) so whoever can write Redis cannot
  point a pull request's failures at another chain, or a round's push at another branch.
  The first chain wins: a follow-up round, which pushes to the same branch and finds the
  same pull request, records nothing, and every later round continues the first chain.
* **Rounds** (:func:`claim_round`): each failing delivery on the pull request is one
  round for the agent, numbered by one Lua step keyed by its delivery id, so a
  redelivery (or a webhook killed after counting and before queueing) gets the number it
  had, never a new one.
* **The limit's comment** (:func:`say_limit`): the delivery whose round is the first past
  ``maxRounds`` says so once on the pull request, in a background task off the webhook's
  path; the comment carries a marker and is looked for before it is created.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.github.appruntime import side_of
from agentchain.github.githuberrors import GitHubError
from agentchain.github.rules import followups
from agentchain.github.rules.githubscope import Scope
from agentchain.store import keys, sealing, signing
from agentchain.store.signing import OperatorKeys

log = logging.getLogger(__name__)
PULL_CHAIN_PREFIX = keys.GITHUB_PULL_CHAIN_PREFIX
ROUNDS_PREFIX = keys.GITHUB_PULL_ROUNDS_PREFIX
PULL_CHAIN_PURPOSE = signing.PULL_CHAIN_PURPOSE
MAX_TASKS = 20
# KEYS[1] the rounds hash of one pull request and agent; ARGV[1] the delivery id,
# ARGV[2] the TTL. The delivery's round: the one it was given, else the next.
_CLAIM_ROUND = """
local had = redis.call('HGET', KEYS[1], ARGV[1])
if had then return tonumber(had) end
local n = redis.call('HLEN', KEYS[1]) + 1
redis.call('HSET', KEYS[1], ARGV[1], n)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
return n
"""
_tasks: set[asyncio.Task[None]] = set()


def _pull_key(repository: str, number: int) -> str:
    return f"{PULL_CHAIN_PREFIX}{repository.casefold()}#{number}"


@dataclass(frozen=True)
class PullChain:
    """The chain a pull request's rounds continue, and how they reach its branch."""

    namespace: str
    chain: str
    head: str = ""
    """The pull request's head branch when the chain was started on it ("" when the chain
    opened it: a round then continues the chain's workspace and its branch)."""
    fork: bool = False
    """The chain was started on a pull request whose head is not in its repository: no
    round can push there."""
    unknown: bool = False
    """The chain was started on the pull request by a comment or a review: where its head
    is has not been read from GitHub yet."""


def _sealed(
    operator_keys: OperatorKeys, repository: str, number: int, fields: dict[str, object]
) -> str:
    subject = [repository.casefold(), str(number)]
    payload = json.dumps(fields, sort_keys=True)
    return sealing.seal(operator_keys, PULL_CHAIN_PURPOSE, subject, payload)


async def record_pull(
    redis: Redis,
    operator_keys: OperatorKeys,
    repository: str,
    number: int,
    namespace: str,
    chain_id: str,
    *,
    head: str = "",
    fork: bool = False,
    unknown: bool = False,
) -> bool:
    """Record that chain ``namespace/chain_id`` opened pull request ``number``, or was
    started on it (``head``: its head branch; ``fork``: that branch is another
    repository's; ``unknown``: the delivery did not say where the head is); the first
    chain to record it keeps it.  True when this call recorded it."""
    fields: dict[str, object] = {"namespace": namespace, "chain": chain_id}
    if unknown:
        fields["head_unknown"] = True
    elif head or fork:
        fields.update(head=head, fork=fork)
    sealed = _sealed(operator_keys, repository, number, fields)
    key = _pull_key(repository, number)
    made = await redis.set(key, sealed, nx=True, ex=keys.CHAIN_TTL_SECONDS)
    return bool(made)


async def learn_head(
    redis: Redis, operator_keys: OperatorKeys, repository: str, number: int, found: PullChain
) -> None:
    """Record where the head of a pull request recorded with its head unknown is
    (``found``: the record as it now is), sealed like the first record, kept as long."""
    fields: dict[str, object] = {"namespace": found.namespace, "chain": found.chain}
    fields.update(head=found.head, fork=found.fork)
    sealed = _sealed(operator_keys, repository, number, fields)
    await redis.set(_pull_key(repository, number), sealed, xx=True, keepttl=True)


async def pull_chain(
    redis: Redis, operator_keys: OperatorKeys, repository: str, number: int
) -> tuple[str, str] | None:
    """The namespace and chain that opened pull request ``number``; None when no chain
    of the operator did (or the record does not open for this pull request)."""
    found = await pull_record(redis, operator_keys, repository, number)
    return (found.namespace, found.chain) if found is not None else None


async def pull_record(
    redis: Redis, operator_keys: OperatorKeys, repository: str, number: int
) -> PullChain | None:
    """The chain that opened pull request ``number`` or was started on it, as recorded;
    None when none did (or the record does not open for this pull request)."""
    key = _pull_key(repository, number)
    raw = await redis.get(key)
    if raw is None:
        return None
    subject = [repository.casefold(), str(number)]
    opened = sealing.open_sealed(operator_keys, PULL_CHAIN_PURPOSE, subject, bytes(raw))
    found = json.loads(opened) if opened is not None else None
    if not isinstance(found, dict) or not all(
        isinstance(found.get(k), str) for k in ("namespace", "chain")
    ):
        sealing.refused("pull request's chain", key, "its seal does not match this pull request")
        return None
    namespace, chain = str(found["namespace"]), str(found["chain"])
    if found.get("head_unknown") is True:
        return PullChain(namespace, chain, unknown=True)
    if "head" not in found and "fork" not in found:
        return PullChain(namespace, chain)  # Opened by the chain's workspace.
    head = found.get("head")
    # Sealed by the operator; still, anything but a plain false counts as a fork.
    fork = found.get("fork") is not False
    return PullChain(namespace, chain, head if isinstance(head, str) else "", fork)


async def claim_round(
    redis: Redis, repository: str, number: int, agent: str, delivery_id: str
) -> int:
    """The round (1-based) delivery ``delivery_id`` is for ``agent`` on the pull request."""
    key = f"{ROUNDS_PREFIX}{repository.casefold()}#{number}:{agent}"
    found = await redis.eval(  # type: ignore[misc]
        _CLAIM_ROUND, 1, key, delivery_id, str(keys.CHAIN_TTL_SECONDS)
    )
    return int(found)


def say_limit(
    rt: Runtime,
    installation_id: int,
    repository: str,
    number: int,
    agent: str,
    max_rounds: int,
    chain_id: str,
    fork: bool = False,
) -> None:
    """Say on the pull request, once, that ``agent``'s rounds are over, or (``fork``) that
    there are none, its branch being a fork's (in the background: the webhook's answer
    never waits for GitHub)."""
    side = side_of(rt)
    if side is None or len(_tasks) >= MAX_TASKS:
        return
    if fork:
        body = followups.fork_comment(agent, chain_id)
    else:
        body = followups.limit_comment(agent, max_rounds, chain_id)
    scope = Scope(installation_id, repository, {"pull_requests": "write", "issues": "write"})

    async def post() -> None:
        marker = body.split("\n", 1)[0]
        try:
            if await side.app.find_comment(scope, number, marker) is None:
                await side.app.create_comment(scope, number, body)
                log.info(
                    "Pull request %s#%d: %s's follow-up rounds are over", repository, number, agent
                )
        except GitHubError as exc:
            log.warning("pull request %s#%d: limit comment not posted: %s", repository, number, exc)

    task = asyncio.get_running_loop().create_task(post())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
