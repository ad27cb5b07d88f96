"""The local node's only conversation with the kube-apiserver.

Everything goes through the sync `kubernetes` client with `_preload_content=False`, so
the node handles plain JSON dicts in API (camelCase) form, exactly what `kubectl get -o
json` shows, instead of generated model objects. The coroutine methods run the blocking
calls in worker threads; `list_pods` and `watch_pods` stay blocking because they are used
from the node's dedicated watch thread.

Errors that only mean "the world moved on" (the pod is already gone, a precondition no
longer holds) are swallowed here so that the callers can stay linear.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch import watch as _watch

from e2e.controlplane.localnode_env import EnvError
from e2e.controlplane.localnode_volumes import bound_directory

log = logging.getLogger("localnode")

MERGE_PATCH = "application/merge-patch+json"
WATCH_SECONDS = 240
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
Json = dict[str, Any]


_iter_lines: Any = _watch.iter_resp_lines  # untyped in the client


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def _json(response: Any) -> Json:
    data: Json = json.loads(response.data)
    return data


class NodeApi:
    """Thin wrapper over CoreV1Api for the calls a kubelet makes."""

    def __init__(self, kubeconfig: str) -> None:
        configuration = client.Configuration()
        load: Any = config.load_kube_config  # untyped in the client
        load(config_file=kubeconfig, client_configuration=configuration)
        # One connection per concurrent status write plus the watch; the default of
        # 5 x CPUs warns ("pool is full") on small machines running many pods.
        configuration.connection_pool_maxsize = 64
        # Typed as Any on purpose: with `_preload_content=False` the generated methods return
        # raw urllib3 responses and accept plain dicts, which their annotations do not say.
        self.core: Any = client.CoreV1Api(client.ApiClient(configuration))

    # --- the Node ---------------------------------------------------------------------

    async def register_node(self, body: Json) -> None:
        """Create the Node, or take over an existing one of the same name."""
        try:
            await asyncio.to_thread(self.core.create_node, body, _preload_content=False)
        except ApiException as exc:
            if exc.status != 409:
                raise
            meta = {"metadata": {"labels": body["metadata"]["labels"]}, "spec": body["spec"]}
            await asyncio.to_thread(
                self.core.patch_node,
                body["metadata"]["name"],
                meta,
                _content_type=MERGE_PATCH,
                _preload_content=False,
            )
        await self.heartbeat(body)
        await self._clear_condition_taints(body["metadata"]["name"])

    async def _clear_condition_taints(self, name: str) -> None:
        """Drop the not-ready/unreachable taints that admission puts on a new Node.

        In a full cluster the node-lifecycle controller removes them once the Node reports
        Ready; the local control plane does not run that controller, so without this the
        scheduler would never place a pod here.
        """
        node = _json(await asyncio.to_thread(self.core.read_node, name, _preload_content=False))
        taints = node.get("spec", {}).get("taints") or []
        kept = [t for t in taints if t.get("key") not in CONDITION_TAINTS]
        if len(kept) != len(taints):
            await asyncio.to_thread(
                self.core.patch_node, name, {"spec": {"taints": kept or None}},
                _content_type=MERGE_PATCH, _preload_content=False,
            )  # fmt: skip

    async def heartbeat(self, body: Json) -> None:
        """Write the Node status: Ready with a fresh lastHeartbeatTime."""
        await asyncio.to_thread(
            self.core.patch_node_status,
            body["metadata"]["name"],
            {"status": body["status"]},
            _content_type=MERGE_PATCH,
            _preload_content=False,
        )

    # --- pods ---------------------------------------------------------------------------

    async def patch_pod_status(self, namespace: str, name: str, status: Json) -> None:
        try:
            await asyncio.to_thread(
                self.core.patch_namespaced_pod_status,
                name,
                namespace,
                {"status": status},
                _content_type=MERGE_PATCH,
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def delete_pod_now(self, namespace: str, name: str, uid: str) -> None:
        """Finish a graceful deletion, as the kubelet does once the containers are gone."""
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        try:
            await asyncio.to_thread(
                self.core.delete_namespaced_pod,
                name,
                namespace,
                body=body,
                grace_period_seconds=0,
                _preload_content=False,
            )
        except ApiException as exc:
            # 404: already gone; 409: a new pod of the same name replaced it.
            if exc.status not in (404, 409):
                raise

    async def read_data(
        self, namespace: str, secrets: set[str], config_maps: set[str]
    ) -> tuple[dict[str, Mapping[str, str]], dict[str, Mapping[str, str]]]:
        """`data` of the named Secrets and ConfigMaps; missing objects are left out."""
        found_secrets = {
            name: data
            for name in sorted(secrets)
            if (data := await self._data(self.core.read_namespaced_secret, name, namespace))
            is not None
        }
        found_maps = {
            name: data
            for name in sorted(config_maps)
            if (data := await self._data(self.core.read_namespaced_config_map, name, namespace))
            is not None
        }
        return found_secrets, found_maps

    async def _data(self, read: Any, name: str, namespace: str) -> Mapping[str, str] | None:
        try:
            obj = _json(await asyncio.to_thread(read, name, namespace, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        data: Mapping[str, str] = obj.get("data") or {}
        return data

    async def claim_directories(self, namespace: str, claims: set[str]) -> dict[str, str]:
        """Claim name → the directory of its bound volume; unbound claims are left out."""
        found: dict[str, str] = {}
        for name in sorted(claims):
            read_claim = self.core.read_namespaced_persistent_volume_claim
            claim = await self._read(read_claim, name, namespace)
            volume_name = ((claim or {}).get("spec") or {}).get("volumeName")
            volume = None
            if volume_name:
                volume = await self._read(self.core.read_persistent_volume, volume_name)
            directory = bound_directory(claim, volume)
            if directory is not None:
                found[name] = directory
        return found

    async def request_token(
        self, namespace: str, account: str, key: tuple[str, int], pod: str, uid: str
    ) -> str:
        """A token of ``account`` bound to the pod (TokenRequest), as the kubelet asks."""
        audience, seconds = key
        spec: Json = {
            "expirationSeconds": seconds,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid},
        }
        if audience:
            spec["audiences"] = [audience]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        try:
            response = await asyncio.to_thread(
                self.core.create_namespaced_service_account_token,
                account, namespace, body, _preload_content=False,
            )  # fmt: skip
        except ApiException as exc:  # e.g. the ServiceAccount is gone: wait, as the kubelet
            raise EnvError(f"service account token of {account!r}: {exc.reason}") from exc
        return str(_json(response)["status"]["token"])

    async def _read(self, read: Any, *args: str) -> Json | None:
        try:
            return _json(await asyncio.to_thread(read, *args, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    # --- the blocking list + watch used by the watch thread ----------------------------

    def list_pods(self, node_name: str) -> tuple[list[Json], str]:
        listed = _json(
            self.core.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={node_name}",
                _preload_content=False,
                _request_timeout=30,
            )
        )
        return list(listed.get("items") or []), str(listed["metadata"]["resourceVersion"])

    def watch_pods(self, node_name: str, resource_version: str) -> Iterator[tuple[str, Json]]:
        """Yield (type, pod) until the server ends the watch; WatchExpired on 410 Gone."""
        response = self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node_name}",
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=(10, WATCH_SECONDS + 30),
        )
        try:
            lines: Iterator[str] = _iter_lines(response)
            for line in lines:
                if not line:
                    continue
                event = json.loads(line)
                kind, obj = str(event["type"]), event["object"]
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise WatchExpired(obj.get("message", ""))
                    raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                yield kind, obj
        finally:
            response.close()
            response.release_conn()
