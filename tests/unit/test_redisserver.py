"""The tests' and the harness's Redis runs as production does (issue 14).

Aspects covered: no command without authentication; the operator's user (the URL the
e2e suite gives the operator) reaches only ``agentchain:`` keys and no server-wide
command; the admin user (what tests inspect with) reaches everything.
"""

from __future__ import annotations

import pytest
from e2e.controlplane.redisserver import ADMIN_USER, OPERATOR_USER
from redis import Redis
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError


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
