"""Records that grant something, sealed with the operator key, on a real redis-server.

Whoever can write Redis (here: the raw client, as a pod that got the password would)
must not be able to make the operator act on a record it did not write.  Aspects
covered, for dashboard sessions, chain workspaces and GitHub job scopes alike:

* a genuine record opens for its own subject, under a rotated key list too;
* a record written straight into Redis (forged, without the operator key) is absent;
* a genuine record copied under another subject's key (another session id, another
  chain, another namespace, another incarnation of the job) is absent;
* a record altered in place is absent, and so is one written before records were sealed;
* a refused record is logged once as a warning, not on every read;
* a chain whose recorded workspace is forged gets its own on its next claim;
* a job token is proven by derivation: a token record written straight into Redis
  resolves to nothing, and the uid it carries is the job's.
"""

from __future__ import annotations

import hashlib
import json
import logging

import pytest
from redis.asyncio import Redis

from agentchain.github.githubrecords import JobTokens
from agentchain.store import keys, sealing, signing
from agentchain.store.sessionrecords import RECORD_FIELD, SessionStore
from agentchain.store.signing import OperatorKeys
from agentchain.store.tokens import TokenScope, TokenStore, token_digest
from agentchain.workspaces.workspacerecords import WorkspaceStore

pytestmark = pytest.mark.redis

KEYS = OperatorKeys(["operator-key"])
ROTATED = OperatorKeys(["new-key", "operator-key"])
SPEC = {"chain_id": "c1", "repository": "https://github.com/o/r.git", "github": "o/r"}
SCOPE = {"installation": 7, "repository": "o/r", "permissions": {"contents": "write"}}


def _session_key(session_id: str) -> str:
    return keys.dashboard_session(hashlib.sha256(session_id.encode()).hexdigest())


# -- dashboard sessions ------------------------------------------------------------------
async def test_a_session_opens_for_its_own_id_under_a_rotated_key(redis: Redis) -> None:
    session_id, session = await SessionStore(redis, KEYS).create("digest")
    assert await SessionStore(redis, KEYS).get(session_id) == session
    assert await SessionStore(redis, ROTATED).get(session_id) == session


async def test_a_session_written_straight_into_redis_is_no_session(redis: Redis) -> None:
    forged = json.dumps({"token_digest": "d", "csrf": "c", "created_at": 1.0}, sort_keys=True)
    made_up = sealing.seal(OperatorKeys(["guessed"]), signing.SESSION_RECORD_PURPOSE, ["s"], forged)
    await redis.hset(_session_key("s"), RECORD_FIELD, made_up)  # type: ignore[misc]
    assert await SessionStore(redis, KEYS).get("s") is None
    # The layout sessions had before they were sealed is no session either.
    old = {"token_digest": "d", "csrf": "c", "created_at": "1.0"}
    await redis.hset(_session_key("old"), mapping=old)  # type: ignore[misc]
    assert await SessionStore(redis, KEYS).get("old") is None


async def test_a_session_copied_under_another_id_is_no_session(redis: Redis) -> None:
    store = SessionStore(redis, KEYS)
    session_id, _ = await store.create("admin-digest")
    genuine = await redis.hget(_session_key(session_id), RECORD_FIELD)  # type: ignore[misc]
    await redis.hset(_session_key("attackers-own-id"), RECORD_FIELD, genuine)  # type: ignore[misc]
    assert await store.get("attackers-own-id") is None


async def test_an_altered_session_is_no_session(redis: Redis) -> None:
    store = SessionStore(redis, KEYS)
    session_id, session = await store.create("digest")
    genuine = bytes(await redis.hget(_session_key(session_id), RECORD_FIELD))  # type: ignore[misc]
    altered = genuine.replace(session.token_digest.encode(), b"other-digest")
    await redis.hset(_session_key(session_id), RECORD_FIELD, altered)  # type: ignore[misc,arg-type]
    assert await store.get(session_id) is None


async def test_a_refused_record_is_logged_once(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    await redis.hset(_session_key("once"), RECORD_FIELD, "0" * 64 + "{}")  # type: ignore[misc]
    store = SessionStore(redis, KEYS)
    with caplog.at_level(logging.WARNING, logger=sealing.__name__):
        for _ in range(3):
            assert await store.get("once") is None
    assert len([r for r in caplog.records if "dashboard session" in r.getMessage()]) == 1


# -- chain workspaces --------------------------------------------------------------------
async def test_a_workspace_opens_for_its_own_chain(redis: Redis) -> None:
    assert await WorkspaceStore(redis, KEYS).claim("ns", "c1", SPEC) == SPEC
    assert await WorkspaceStore(redis, ROTATED).spec("ns", "c1") == SPEC


async def test_a_workspace_written_straight_into_redis_is_absent(redis: Redis) -> None:
    evil = {**SPEC, "repository": "https://evil.example/o/r.git", "branch": "main"}
    key = keys.chain_workspace("ns", "c1")
    await redis.hset(key, "spec", json.dumps(evil))  # type: ignore[misc]
    store = WorkspaceStore(redis, KEYS)
    assert await store.spec("ns", "c1") is None
    # The chain's next claim replaces it with its own.
    assert await store.claim("ns", "c1", SPEC) == SPEC
    assert await store.spec("ns", "c1") == SPEC


@pytest.mark.parametrize(("tenant", "chain"), [("ns", "c2"), ("other-ns", "c1")])
async def test_a_workspace_copied_to_another_chain_is_absent(
    redis: Redis, tenant: str, chain: str
) -> None:
    store = WorkspaceStore(redis, KEYS)
    await store.claim("ns", "c1", SPEC)
    genuine = await redis.hget(keys.chain_workspace("ns", "c1"), "spec")  # type: ignore[misc]
    await redis.hset(keys.chain_workspace(tenant, chain), "spec", genuine)  # type: ignore[misc]
    assert await store.spec(tenant, chain) is None
    own = {**SPEC, "chain_id": chain}
    assert await store.claim(tenant, chain, own) == own


# -- GitHub job scopes -------------------------------------------------------------------
async def test_a_scope_opens_for_its_own_incarnation_only(redis: Redis) -> None:
    tokens = JobTokens(redis, KEYS)
    assert await tokens.scope("ns", "j", "uid-1") is None
    await tokens.set_scope("ns", "j", "uid-1", SCOPE)
    assert await tokens.scope("ns", "j", "uid-1") == {**SCOPE, "uid": "uid-1"}
    assert await JobTokens(redis, ROTATED).scope("ns", "j", "uid-1") is not None
    # The same name created again (a new uid) does not get the old one's scope.
    assert await tokens.scope("ns", "j", "uid-2") is None


async def test_a_scope_written_straight_into_redis_is_absent(redis: Redis) -> None:
    forged = json.dumps({**SCOPE, "repository": "other-org/private", "uid": "u"})
    await redis.set(keys.github_job_scope("ns", "j"), forged)
    assert await JobTokens(redis, KEYS).scope("ns", "j", "u") is None


@pytest.mark.parametrize(("namespace", "job"), [("ns", "other-job"), ("other-ns", "j")])
async def test_a_scope_copied_to_another_job_is_absent(
    redis: Redis, namespace: str, job: str
) -> None:
    tokens = JobTokens(redis, KEYS)
    await tokens.set_scope("ns", "j", "u", SCOPE)
    genuine = await redis.get(keys.github_job_scope("ns", "j"))
    await redis.set(keys.github_job_scope(namespace, job), genuine or b"")
    assert await tokens.scope(namespace, job, "u") is None


async def test_dropping_a_scope_spares_another_incarnations(redis: Redis) -> None:
    tokens = JobTokens(redis, KEYS)
    await tokens.set_scope("ns", "j", "new-uid", SCOPE)
    await tokens.drop_scope("ns", "j", "old-uid")  # The old one's end, seen late.
    assert await tokens.scope("ns", "j", "new-uid") is not None
    await tokens.drop_scope("ns", "j", "new-uid")
    assert await redis.exists(keys.github_job_scope("ns", "j")) == 0


# -- job tokens --------------------------------------------------------------------------
async def test_a_token_record_written_straight_into_redis_resolves_to_nothing(
    redis: Redis,
) -> None:
    tokens = TokenStore(redis, KEYS)
    genuine = await tokens.issue("ns", "j", "uid-1", "chain", 3600)
    assert await tokens.resolve(genuine) == TokenScope("ns", "j", "chain", "uid-1")
    # A token of the writer's choosing, recorded as the victim job's incarnation.
    fields = {"tenant": "ns", "job": "j", "chain": "chain", "uid": "uid-1"}
    await redis.hset(keys.job_token(token_digest("my-own-token")), mapping=fields)  # type: ignore[misc]
    assert await tokens.resolve("my-own-token") is None
    # So is a record without a uid (the layout from before uids were recorded).
    legacy = {"tenant": "ns", "job": "j", "chain": "chain"}
    await redis.hset(keys.job_token(token_digest("legacy-token")), mapping=legacy)  # type: ignore[misc]
    assert await tokens.resolve("legacy-token") is None
