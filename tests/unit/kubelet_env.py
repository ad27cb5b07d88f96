"""The kubelet's rules for a container's argv, env and working directory, as a test oracle.

The unit tests of the pod specs the product builds (``hop/rules/test_jobspec.py``,
``runtimes/rules/test_runtimecontainers.py``) read each value a container would get
through these rules, so a property test covers what only a kubelet would otherwise show
(ordering, ``$(VAR)`` expansion, escaping, optional references). Pure: no I/O, no clock,
no Kubernetes client; the Secrets' and ConfigMaps' raw ``data`` dicts are handed in.

The rules copied from the kubelet (`pkg/kubelet/kubelet_pods.go` `makeEnvironmentVariables`
and `third_party/forked/golang/expansion`):

* `envFrom` sources come first, in order, each key optionally prefixed; `env` entries come
  after and override them.
* An `env[].value` is expanded against the variables defined *before* it; `valueFrom`
  results are never expanded.
* `$(NAME)` is replaced when NAME is defined and left verbatim otherwise; `$$` is an escaped
  `$`; a lone `$` or an unterminated `$(` is kept as written.
* `command` and `args` are expanded against the final pod env (not the node's PATH/HOME).

Secrets arrive base64-encoded, exactly as the API returns them; decoding happens here.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Json = Mapping[str, Any]
ObjectData = Mapping[str, Mapping[str, str]]
"""Object name -> its `data` field, for the Secrets or the ConfigMaps of one namespace."""

NODE_IP = "127.0.0.1"
BASE_ENV_KEYS = ("PATH", "HOME", "LANG")

_OPERATOR = "$"
_OPENER = "("
_CLOSER = ")"
_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


class EnvError(Exception):
    """A required Secret, ConfigMap, key or field is missing; the kubelet's
    CreateContainerConfigError: the container must wait until it appears."""


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one container as a local process."""

    argv: list[str]
    env: dict[str, str]
    working_dir: str | None


# --- $(VAR) expansion -------------------------------------------------------------------


def _read_reference(rest: str) -> tuple[str, bool, int]:
    """Read what follows a `$`: (text, is_variable_name, characters consumed)."""
    if rest[0] == _OPERATOR:
        return _OPERATOR, False, 1
    if rest[0] == _OPENER:
        closer = rest.find(_CLOSER, 1)
        if closer != -1:
            return rest[1:closer], True, closer + 1
        # An unterminated reference is copied through; scanning resumes after the `(`.
        return _OPERATOR + _OPENER, False, 1
    return _OPERATOR + rest[0], False, 1


def expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """Expand `$(NAME)` references in `text` exactly like Kubernetes does."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == _OPERATOR and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_name, advance = _read_reference(text[cursor + 1 :])
            if is_name:
                value = lookup(read)
                out.append(f"$({read})" if value is None else value)
            else:
                out.append(read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


def expand_with(text: str, env: Mapping[str, str]) -> str:
    """`expand` against a plain mapping."""
    return expand(text, env.get)


# --- references to other objects ----------------------------------------------------------


def _env_sources(container: Json) -> Iterable[tuple[str, Json]]:
    """Yield ("secret"|"configmap", reference) for every object the container reads."""
    for source in container.get("envFrom") or []:
        if "secretRef" in source:
            yield "secret", source["secretRef"]
        if "configMapRef" in source:
            yield "configmap", source["configMapRef"]
    for var in container.get("env") or []:
        value_from = var.get("valueFrom") or {}
        if "secretKeyRef" in value_from:
            yield "secret", value_from["secretKeyRef"]
        if "configMapKeyRef" in value_from:
            yield "configmap", value_from["configMapKeyRef"]


def referenced_objects(containers: Iterable[Json]) -> tuple[set[str], set[str]]:
    """Names of the Secrets and ConfigMaps the containers need, so the node fetches them."""
    secrets: set[str] = set()
    config_maps: set[str] = set()
    for container in containers:
        for kind, ref in _env_sources(container):
            (secrets if kind == "secret" else config_maps).add(str(ref.get("name", "")))
    return secrets, config_maps


def decode_secret_value(encoded: str) -> str:
    """Secrets hold base64; bytes that are not UTF-8 are replaced rather than failing."""
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EnvError(f"secret value is not valid base64: {exc}") from exc
    return raw.decode("utf-8", errors="replace")


def _object_data(kind: str, ref: Json, secrets: ObjectData, config_maps: ObjectData) -> Json:
    """The referenced object's data, {} when optional and absent; EnvError otherwise."""
    name = str(ref.get("name", ""))
    store = secrets if kind == "secret" else config_maps
    if name in store:
        return store[name]
    if ref.get("optional"):
        return {}
    label = "secret" if kind == "secret" else "configmap"
    raise EnvError(f'{label} "{name}" not found')


def _key_value(kind: str, ref: Json, secrets: ObjectData, config_maps: ObjectData) -> str | None:
    """Value of one key of a Secret/ConfigMap; None means "optional and absent: skip it"."""
    data = _object_data(kind, ref, secrets, config_maps)
    key = str(ref.get("key", ""))
    if key not in data:
        if ref.get("optional"):
            return None
        raise EnvError(f'couldn\'t find key {key} in {kind} "{ref.get("name", "")}"')
    value = str(data[key])
    return decode_secret_value(value) if kind == "secret" else value


# --- fieldRef ------------------------------------------------------------------------------


def field_value(pod: Json, path: str) -> str:
    """Resolve a downward-API `fieldRef.fieldPath` against the pod."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple: dict[str, Any] = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": NODE_IP,
        "status.podIPs": NODE_IP,
        "status.hostIP": NODE_IP,
        "status.hostIPs": NODE_IP,
    }
    if path in simple:
        return str(simple[path] or "")
    match = _SUBSCRIPT.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise EnvError(f"unsupported fieldRef fieldPath {path!r}")


# --- building the environment ---------------------------------------------------------------


def _from_sources(container: Json, secrets: ObjectData, config_maps: ObjectData) -> dict[str, str]:
    """Variables from `envFrom`, later sources overriding earlier ones."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        kind, ref = (
            ("secret", source["secretRef"])
            if "secretRef" in source
            else (
                "configmap",
                source.get("configMapRef") or {},
            )
        )
        for key, value in _object_data(kind, ref, secrets, config_maps).items():
            # A key that cannot be an environment variable name is skipped, as the kubelet does.
            if not key or "=" in key:
                continue
            env[prefix + key] = decode_secret_value(value) if kind == "secret" else str(value)
    return env


def _var_value(
    pod: Json, var: Json, env: Mapping[str, str], secrets: ObjectData, config_maps: ObjectData
) -> str | None:
    """The value of one `env` entry given the variables defined before it."""
    value_from = var.get("valueFrom")
    if not value_from:
        return expand_with(str(var.get("value") or ""), env)
    if "secretKeyRef" in value_from:
        return _key_value("secret", value_from["secretKeyRef"], secrets, config_maps)
    if "configMapKeyRef" in value_from:
        return _key_value("configmap", value_from["configMapKeyRef"], secrets, config_maps)
    if "fieldRef" in value_from:
        return field_value(pod, str(value_from["fieldRef"].get("fieldPath", "")))
    raise EnvError(f"unsupported valueFrom for {var.get('name')!r}: {sorted(value_from)}")


def build_env(
    pod: Json, container: Json, secrets: ObjectData, config_maps: ObjectData
) -> dict[str, str]:
    """The container's environment as Kubernetes defines it (without the node's base env)."""
    env = _from_sources(container, secrets, config_maps)
    for var in container.get("env") or []:
        value = _var_value(pod, var, env, secrets, config_maps)
        if value is not None:
            env[str(var["name"])] = value
    return env


def process_env(base: Mapping[str, str], pod_env: Mapping[str, str]) -> dict[str, str]:
    """The process environment: PATH, HOME and LANG of the node, the pod env on top."""
    env = {key: base[key] for key in BASE_ENV_KEYS if key in base}
    env.update(pod_env)
    return env


def build_launch(
    pod: Json,
    container: Json,
    secrets: ObjectData,
    config_maps: ObjectData,
    base_env: Mapping[str, str],
) -> Launch:
    """argv, env and working directory for one container.

    The image is ignored, so there is no image entrypoint: when `command` is empty, `args`
    alone form the command line.
    """
    pod_env = build_env(pod, container, secrets, config_maps)
    words = [str(w) for w in (container.get("command") or [])]
    words += [str(w) for w in (container.get("args") or [])]
    argv = [expand_with(word, pod_env) for word in words]
    working_dir = container.get("workingDir") or None
    return Launch(argv=argv, env=process_env(base_env, pod_env), working_dir=working_dir)
