"""The one place a Redis client is made: plain, TLS, or through Sentinel, from one URL.

``AGENTCHAIN_REDIS_URL`` takes any of:

* ``redis://[user[:password]@]host[:port][/db]``: redis-py's own URL;
* ``rediss://…``: the same over TLS, verified against the system's CAs unless the URL
  says otherwise (``?ssl_ca_certs=/path/ca.pem``, ``ssl_certfile``/``ssl_keyfile`` for
  a client certificate, ``ssl_check_hostname=false``; ``ssl_cert_reqs=none`` turns
  verification off, which nothing does by default);
* ``redis+sentinel://[user[:password]@]host[:port][,host[:port]…]/service[/db]``: ask
  the Sentinels (port 26379 unless given) where the primary of ``service`` is, and ask
  again whenever a connection to it fails or it answers READONLY (it was demoted);
  ``rediss+sentinel://`` uses TLS to the Sentinels and the primary alike.  The user and
  password are the primary's; Sentinels that require a login of their own take
  ``?sentinel_username=…&sentinel_password=…``; ``sentinel_username`` alone logs in to
  them with the separate password below (the chart's bundled Sentinels, whose
  ``default`` user shares the primary's password).  The TLS options above apply too.

A password configured apart (``AGENTCHAIN_REDIS_PASSWORD[_FILE]``) is used when the URL
has none.  Every client retries a command that failed on a broken connection or a
timeout, with exponential back-off for up to about :data:`RETRY_BUDGET_SECONDS`: long
enough for Sentinel to promote a replica after the primary died, short enough that a
webhook still answers 503 within GitHub's ten seconds when Redis is down for good.
What a failover means for work in flight is in ``docs/architecture.md`` (Redis).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}
SENTINEL_PORT = 26379
# Back-off 0.1 s doubling to 1 s: 0.1+0.2+0.4+0.8 then 1 s each, ~8 s over 10 retries.
RETRIES = 10
RETRY_BASE_SECONDS = 0.1
RETRY_CAP_SECONDS = 1.0
RETRY_BUDGET_SECONDS = 8.0
# A dead server without a TCP reset (a lost node) is noticed within these.
CONNECT_TIMEOUT_SECONDS = 5.0
SOCKET_TIMEOUT_SECONDS = 15.0
# URL query options that are numbers or flags, as redis-py's own URL parser reads them.
_TLS_FLAGS = frozenset({"ssl_check_hostname"})
_NUMBERS = frozenset({"socket_timeout", "socket_connect_timeout"})
_SENTINEL_AUTH = frozenset({"sentinel_username", "sentinel_password"})


class RedisUrlError(ValueError):
    """The Redis URL cannot be used; the message says what is wrong (never the password)."""


@dataclass(frozen=True)
class SentinelTarget:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    sentinel_auth: dict[str, str] = field(default_factory=dict)


def is_sentinel(url: str) -> bool:
    return url.split("://", 1)[0] in SENTINEL_SCHEMES


def parse_sentinel(url: str) -> SentinelTarget:
    """Read a ``redis+sentinel://`` (or ``rediss+sentinel://``) URL."""
    parts = urlsplit(url)
    if parts.scheme not in SENTINEL_SCHEMES:
        raise RedisUrlError(f"not a Sentinel URL (scheme {parts.scheme!r})")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    sentinels = tuple(_host_port(item) for item in hostlist.split(",") if item)
    if not sentinels:
        raise RedisUrlError("a Sentinel URL names at least one Sentinel host")
    segments = [s for s in parts.path.split("/") if s]
    if not segments or len(segments) > 2:
        raise RedisUrlError("a Sentinel URL's path is /<service name>[/<db>]")
    username, password = _credentials(userinfo)
    options, auth = _options(parts.query)
    return SentinelTarget(
        sentinels=sentinels,
        service=unquote(segments[0]),
        db=_number(segments[1], "db") if len(segments) == 2 else 0,
        username=username,
        password=password,
        tls=SENTINEL_SCHEMES[parts.scheme],
        options=options,
        sentinel_auth=auth,
    )


def _host_port(item: str) -> tuple[str, int]:
    host, sep, port = item.rpartition(":")
    if not sep or "]" in port:  # No port, or an IPv6 address without one.
        return item.strip("[]"), SENTINEL_PORT
    return host.strip("[]"), _number(port, "port")


def _number(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RedisUrlError(f"the Sentinel URL's {what} is not a number: {text!r}") from None


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    if not userinfo:
        return None, None
    user, sep, password = userinfo.partition(":")
    return (unquote(user) or None), (unquote(password) if sep else None)


def _options(query: str) -> tuple[dict[str, Any], dict[str, str]]:
    options: dict[str, Any] = {}
    auth: dict[str, str] = {}
    for key, value in parse_qsl(query):
        if key in _SENTINEL_AUTH:
            auth[key.removeprefix("sentinel_")] = value
        elif key in _TLS_FLAGS:
            options[key] = value.lower() not in ("0", "false", "no", "off")
        elif key in _NUMBERS:
            options[key] = float(value)
        elif key.startswith("ssl_"):
            options[key] = value
        else:
            raise RedisUrlError(f"unknown option in the Sentinel URL: {key!r}")
    return options, auth


def retry_policy() -> Retry:
    return Retry(ExponentialBackoff(cap=RETRY_CAP_SECONDS, base=RETRY_BASE_SECONDS), RETRIES)


def _common() -> dict[str, Any]:
    return {
        "decode_responses": False,
        "retry": retry_policy(),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "socket_timeout": SOCKET_TIMEOUT_SECONDS,
    }


def connect(url: str, password: str | None = None) -> aioredis.Redis:
    """A client for ``url`` (see the module docstring); ``password`` if the URL has none."""
    if is_sentinel(url):
        return _through_sentinel(parse_sentinel(url), password)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise RedisUrlError(
            "AGENTCHAIN_REDIS_URL must start with redis://, rediss://, unix://,"
            " redis+sentinel:// or rediss+sentinel://"
        )
    # A password in the URL wins over the separate one (redis-py's own precedence).
    client: aioredis.Redis = aioredis.Redis.from_url(url, password=password or None, **_common())
    return client


class SentinelManagedRedis(aioredis.Redis):
    """A client of the primary that also closes its Sentinel connections when closed."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        manager = getattr(self.connection_pool, "sentinel_manager", None)
        for sentinel in getattr(manager, "sentinels", ()):
            await sentinel.aclose()


def _sentinel_login(auth: dict[str, str], password: str | None) -> dict[str, str]:
    """The Sentinels' login: the URL's, with the separate password if it names only a user."""
    if "username" in auth and "password" not in auth and password:
        return {**auth, "password": password}
    return auth


def _through_sentinel(target: SentinelTarget, password: str | None) -> aioredis.Redis:
    tls = {"ssl": True, **target.options} if target.tls else dict(target.options)
    sentinel_kwargs: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "socket_timeout": CONNECT_TIMEOUT_SECONDS,
        **tls,
        **_sentinel_login(target.sentinel_auth, password),
    }
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
    common = {**_common(), **tls}
    client: aioredis.Redis = sentinel.master_for(
        target.service,
        redis_class=SentinelManagedRedis,
        db=target.db,
        username=target.username,
        password=target.password or password or None,
        **common,
    )
    return client
