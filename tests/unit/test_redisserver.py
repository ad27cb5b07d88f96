"""The tests' and the harness's Redis runs as production does (issue 14).

Aspects covered: no command without authentication; the operator's user (the URL the
e2e suite gives the operator) reaches only ``agentchain:`` keys and no server-wide
command; the admin user (what tests inspect with) reaches everything; the operator logs
in as the chart configures it (user in the URL, password from a file) and not without
the password.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from e2e.controlplane.redisserver import ADMIN_USER, OPERATOR_USER
from redis import Redis
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

from agentchain.core.runtime import Runtime
from agentchain.settings import Settings


def test_only_authenticated_users_get_in_and_the_operator_only_to_its_keys(
    redis_url: str,
) -> None:
    assert f"//{ADMIN_USER}:" in redis_url
    with Redis.from_url(redis_url) as admin:
        port = admin.connection_pool.connection_kwargs["port"]
        admin.set("someone-else:key", "1")
    with Redis(port=port) as anonymous, pytest.raises((AuthenticationError, ResponseError)):
        anonymous.get("agentchain:anything")
    with Redis.from_url(redis_url.replace(f"//{ADMIN_USER}:", f"//{OPERATOR_USER}:")) as operator:
        assert operator.set("agentchain:test:key", "1")
        for command in (("GET", "someone-else:key"), ("FLUSHALL",), ("CONFIG", "GET", "*")):
            with pytest.raises(NoPermissionError):
                operator.execute_command(*command)


async def test_the_operator_logs_in_with_the_charts_url_and_a_password_file(
    redis_url: str, tmp_path: Path
) -> None:
    # As the chart configures it: the user in the URL, the password in a mounted file.
    parts = urlsplit(redis_url)
    (tmp_path / "redis-password").write_text(f"{parts.password}\n")
    url = f"redis://{OPERATOR_USER}@{parts.hostname}:{parts.port}/0"
    settings = Settings(
        redis_url=url,
        redis_password_file=str(tmp_path / "redis-password"),
        operator_key=("k",),
    )
    rt = Runtime.create(settings)
    try:
        assert await rt.redis.ping()
        assert await rt.tokens.issue("t", "j", "uid", "c", 60)
    finally:
        await rt.redis.aclose()  # type: ignore[attr-defined,unused-ignore]
    without = Runtime.create(settings.model_copy(update={"redis_password": ""}))
    try:
        with pytest.raises(AuthenticationError):
            await without.redis.ping()
    finally:
        await without.redis.aclose()  # type: ignore[attr-defined,unused-ignore]
