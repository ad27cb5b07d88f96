"""What Redis holds for a running job, and what deleting the job does (issue 14).

Aspects covered, on the real control plane with the session's operator process (which
logs in to the harness's Redis as its ACL user, with a password):
* a running job's token works at the API, and no key name or value in Redis holds it:
  only its sha256 (the token derives from the operator key and the job's uid);
* deleting the AgentJob while it runs revokes its token at once: the API answers 401;
* an AgentJob queued straight into Redis (as a pod that reached Redis would) is dropped
  by the operator's dispatcher and counted ``forged``, never created.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import redis

from agentchain.hop.rules.jobspec import TOKEN_SECRET_KEY
from agentchain.store import keys
from agentchain.store.tokens import token_digest
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
TIMEOUT = 90.0


def _token(info: ClusterInfo, namespace: str, job: str) -> str | None:
    """The token in the Secret the operator made for ``job`` (owned by it), if any yet."""
    uid = operating.get_json(info, "agentjob", job, "-n", namespace)["metadata"]["uid"]
    for secret in operating.get_json(info, "secrets", "-n", namespace)["items"]:
        owners = secret["metadata"].get("ownerReferences") or []
        data = secret.get("data") or {}
        if any(o["uid"] == uid for o in owners) and TOKEN_SECRET_KEY in data:
            return base64.b64decode(data[TOKEN_SECRET_KEY]).decode()
    return None


def _status(op: operating.OperatorProcess, path: str, token: str) -> int:
    request = urllib.request.Request(
        f"{op.url}{path}", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _everything(client: redis.Redis) -> list[bytes]:
    """Every key name and value of the product in Redis, as bytes."""
    found: list[bytes] = []
    for name in client.scan_iter(match=keys.ROOT_PREFIX + "*", count=1000):
        found.append(name)
        kind = client.type(name)
        if kind == b"string":
            value = client.get(name)
            found.append(value if isinstance(value, bytes) else b"")
        elif kind == b"hash":
            for field, value in client.hgetall(name).items():  # type: ignore[union-attr]
                found += [field, value]
        elif kind == b"zset":
            found += list(client.zrange(name, 0, -1))  # type: ignore[arg-type]
        elif kind == b"set":
            found += list(client.smembers(name))  # type: ignore[arg-type]
        elif kind == b"list":
            found += list(client.lrange(name, 0, -1))  # type: ignore[arg-type]
    return found


def _running_job(info: ClusterInfo, namespace: str) -> str:
    """Start a job that runs a minute; its token once the operator issued it."""
    sleeper = chaining.agent("sleeper", "--no-context", "--sleep", "60")
    chaining.apply(info, namespace, sleeper, chaining.root_job("sleepy", "sleeper"))
    operating.wait_until(
        lambda: _token(info, namespace, "sleepy"), timeout=TIMEOUT, what="the job's token"
    )
    token = _token(info, namespace, "sleepy")
    assert token is not None
    return token


def test_redis_holds_no_job_token(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    token = _running_job(cluster_info, namespace)
    assert _status(operator, f"/api/jobs/{namespace}/sleepy", token) == 200
    with redis.Redis.from_url(cluster_info.redis_url) as client:
        stored = _everything(client)
        assert client.exists(keys.job_token(token_digest(token))) == 1
    assert not [b for b in stored if token.encode() in b]


def test_deleting_a_running_job_revokes_its_token(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    token = _running_job(cluster_info, namespace)
    path = f"/api/jobs/{namespace}/sleepy"
    assert _status(operator, path, token) == 200
    cluster_info.kubectl("delete", "agentjob", "sleepy", "-n", namespace, "--wait=false")
    operating.wait_until(
        lambda: _status(operator, path, token) == 401,
        timeout=TIMEOUT,
        what="the deleted job's token to be refused",
    )


def _forged_count(op: operating.OperatorProcess) -> float:
    with urllib.request.urlopen(f"{op.internal_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    prefix = 'agentchain_webhook_jobs_total{result="forged"} '
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else 0.0


def test_a_job_queued_straight_into_redis_is_never_created(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    chaining.apply(cluster_info, namespace, chaining.agent("worker"))
    job = chaining.root_job("forged", "worker")
    job["metadata"]["namespace"] = namespace
    before = _forged_count(operator)
    with redis.Redis.from_url(cluster_info.redis_url) as client:
        client.hset(keys.webhook_queue_body(namespace), "forged", json.dumps(job))
        client.zadd(keys.webhook_queue(namespace), {"forged": 0})
        client.sadd(keys.WEBHOOK_QUEUE_NAMESPACES, namespace)
        operating.wait_until(
            lambda: client.zcard(keys.webhook_queue(namespace)) == 0,
            timeout=TIMEOUT,
            what="the dispatcher to take the forged entry",
        )
    assert _forged_count(operator) == before + 1
    items = operating.get_json(cluster_info, "agentjobs", "-n", namespace)["items"]
    assert items == []
