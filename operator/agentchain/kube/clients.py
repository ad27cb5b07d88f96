"""Kubernetes API clients for the operator's own calls.

kopf has its own client for watching; our reads and writes go through the
official ``kubernetes`` client.  It is synchronous, so every call is pushed to
a thread (``call``) to keep the event loop free.  Configuration comes from the
in-cluster service account or, outside a cluster, from ``KUBECONFIG``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import Callable
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

GROUP = "labrats.work"
VERSION = "v1alpha1"


@functools.cache
def api_client() -> client.ApiClient:
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))  # type: ignore[no-untyped-call]
    cfg = client.Configuration.get_default_copy()
    # Chains fan out many small calls at once; the default pool of 4 would queue them.
    cfg.connection_pool_maxsize = 32
    return client.ApiClient(cfg)


def custom() -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client())


def core() -> client.CoreV1Api:
    return client.CoreV1Api(api_client())


def batch() -> client.BatchV1Api:
    return client.BatchV1Api(api_client())


async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(fn, *args, **kwargs)


async def call_json(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call`` for typed core/batch methods, returning the API's JSON as is.

    The client's typed models cost milliseconds per Job to build and turn back into
    JSON; on the hop's critical path the operator only needs the dict.
    """

    def _fetch() -> Any:
        resp = fn(*args, _preload_content=False, **kwargs)
        try:
            return json.loads(resp.data)
        finally:
            resp.release_conn()

    return await asyncio.to_thread(_fetch)


def is_status(exc: BaseException, code: int) -> bool:
    return isinstance(exc, ApiException) and exc.status == code


def already_exists(exc: BaseException) -> bool:
    return is_status(exc, 409)


def not_found(exc: BaseException) -> bool:
    return is_status(exc, 404)
