"""Which comment commands were applied, and answered on GitHub: one key each per comment.

``applying`` claims a comment's command with ``SET NX`` (``github:applied:<id>``) before it
acts, so a command acts at most once however its comment comes back: a replayed delivery,
a redelivery under a new delivery id, or another body carrying the same comment id.
``first`` claims a comment's answer with ``SET NX`` (``github:command:<id>``, kept as long
as GitHub may redeliver), so a redelivered comment is answered once, even by two
replicas at once.  GitHub would not add the same reaction twice anyway (a repeated POST
answers 200), but a reply would be written twice.
"""

from __future__ import annotations

from redis.asyncio import Redis

from agentchain.store import keys


async def first(redis: Redis, comment_id: int) -> bool:
    """Whether this is the first answer to ``comment_id`` (and it is claimed now)."""
    claimed = await redis.set(
        keys.github_command(comment_id), "1", nx=True, ex=keys.GITHUB_COMMAND_TTL_SECONDS
    )
    return bool(claimed)


async def applying(redis: Redis, comment_id: int) -> bool:
    """Whether ``comment_id``'s command acts now (claimed now; False: it already did)."""
    claimed = await redis.set(
        keys.github_command_applied(comment_id),
        "1",
        nx=True,
        ex=keys.GITHUB_COMMAND_APPLIED_TTL_SECONDS,
    )
    return bool(claimed)
