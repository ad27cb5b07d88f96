"""The kubelet's environment rules as ``tests/unit/kubelet_env.py`` copies them: the oracle
the pod-spec property tests (``hop/rules/test_jobspec.py``,
``runtimes/rules/test_runtimecontainers.py``) read a container's values through.

Aspects covered:
- `$(VAR)` expansion: defined and undefined names, `$$` escaping, lone and trailing `$`,
  unterminated references, nested-looking input; properties (text without `$` is
  unchanged, escaping round-trips, defined names always substitute).
- env building: `value` expansion against earlier variables only, `valueFrom` never
  expanded, secretKeyRef (base64) / configMapKeyRef, optional objects and keys, missing
  required ones (EnvError), fieldRef paths incl. labels/annotations, `envFrom` with
  prefixes, override order, invalid keys skipped.
- launch: command+args expansion against the pod env only, base env (PATH/HOME/LANG)
  under the pod env, args-only commands, workingDir.
- referenced objects: the Secrets and ConfigMaps a container needs.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit import kubelet_env as envs

POD: dict[str, Any] = {
    "metadata": {
        "name": "p1",
        "namespace": "ns1",
        "uid": "u-1",
        "labels": {"app": "web"},
        "annotations": {"note": "hi"},
    },
    "spec": {"nodeName": "agentchain-local", "serviceAccountName": "sa"},
}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def env_of(container: dict[str, Any], secrets: Any = None, maps: Any = None) -> dict[str, str]:
    return envs.build_env(POD, container, secrets or {}, maps or {})


# --- $(VAR) expansion ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)", "a"),
        ("x$(A)y$(B)z", "xaybz"),
        ("$(MISSING)", "$(MISSING)"),
        ("$$(A)", "$(A)"),
        ("$$$(A)", "$a"),
        ("$$$$(A)", "$$(A)"),
        ("$", "$"),
        ("a$", "a$"),
        ("$A", "$A"),
        ("$(A", "$(A"),
        ("$(", "$("),
        ("$()", "$()"),
        ("$(A$(B))", "$(A$(B))"),
        ("$(A)$(A)", "aa"),
        ("${A}", "${A}"),
        ("$$", "$"),
        ("100$$", "100$"),
    ],
)
def test_expand_cases(text: str, expected: str) -> None:
    assert envs.expand_with(text, {"A": "a", "B": "b"}) == expected


@given(st.text().filter(lambda s: "$" not in s), st.dictionaries(st.text(), st.text()))
def test_expand_without_operator_is_identity(text: str, env: dict[str, str]) -> None:
    assert envs.expand_with(text, env) == text


@given(st.text(), st.dictionaries(st.text(), st.text()))
def test_escaped_text_expands_to_itself(text: str, env: dict[str, str]) -> None:
    assert envs.expand_with(text.replace("$", "$$"), env) == text


@given(st.text(alphabet=st.characters(blacklist_characters="$()"), min_size=1), st.text())
def test_defined_name_substitutes(name: str, value: str) -> None:
    assert envs.expand_with(f"<$({name})>", {name: value}) == f"<{value}>"


@given(st.text(alphabet=st.characters(blacklist_characters="$()"), min_size=1))
def test_undefined_name_stays_verbatim(name: str) -> None:
    assert envs.expand_with(f"$({name})", {}) == f"$({name})"


# --- env ------------------------------------------------------------------------------------


def test_value_expands_against_earlier_variables_only() -> None:
    container = {
        "env": [
            {"name": "LATER_REF", "value": "[$(B)]"},
            {"name": "A", "value": "a"},
            {"name": "B", "value": "$(A)-b"},
            {"name": "ESC", "value": "$$(A)"},
        ]
    }
    assert env_of(container) == {"LATER_REF": "[$(B)]", "A": "a", "B": "a-b", "ESC": "$(A)"}


def test_value_from_is_never_expanded() -> None:
    container = {
        "env": [
            {"name": "A", "value": "a"},
            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ]
    }
    assert env_of(container, {"s": {"k": b64("$(A)")}})["S"] == "$(A)"


def test_secret_and_config_map_keys() -> None:
    container = {
        "env": [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "mode"}}},
        ]
    }
    got = env_of(container, {"s": {"token": b64("sekrit ✓")}}, {"c": {"mode": "fast"}})
    assert got == {"TOKEN": "sekrit ✓", "MODE": "fast"}


@pytest.mark.parametrize(
    "ref",
    [
        {"secretKeyRef": {"name": "absent", "key": "k", "optional": True}},
        {"secretKeyRef": {"name": "s", "key": "absent", "optional": True}},
        {"configMapKeyRef": {"name": "absent", "key": "k", "optional": True}},
        {"configMapKeyRef": {"name": "c", "key": "absent", "optional": True}},
    ],
)
def test_optional_reference_absent_leaves_variable_unset(ref: dict[str, Any]) -> None:
    container = {"env": [{"name": "X", "valueFrom": ref}]}
    assert env_of(container, {"s": {"k": b64("v")}}, {"c": {"k": "v"}}) == {}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"secretKeyRef": {"name": "absent", "key": "k"}}, 'secret "absent" not found'),
        ({"secretKeyRef": {"name": "s", "key": "nope"}}, "couldn't find key nope"),
        ({"configMapKeyRef": {"name": "absent", "key": "k"}}, 'configmap "absent" not found'),
        ({"configMapKeyRef": {"name": "c", "key": "nope"}}, "couldn't find key nope"),
        ({"fieldRef": {"fieldPath": "spec.bogus"}}, "unsupported fieldRef"),
        ({"resourceFieldRef": {"resource": "limits.cpu"}}, "unsupported valueFrom"),
    ],
)
def test_missing_required_reference_is_an_env_error(ref: dict[str, Any], message: str) -> None:
    container = {"env": [{"name": "X", "valueFrom": ref}]}
    with pytest.raises(envs.EnvError, match=message):
        env_of(container, {"s": {"k": b64("v")}}, {"c": {"k": "v"}})


def test_invalid_base64_is_an_env_error() -> None:
    container = {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
    with pytest.raises(envs.EnvError, match="base64"):
        env_of(container, {"s": {"k": "not base64!"}})


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.name", "p1"),
        ("metadata.namespace", "ns1"),
        ("metadata.uid", "u-1"),
        ("metadata.labels['app']", "web"),
        ("metadata.labels['absent']", ""),
        ("metadata.annotations['note']", "hi"),
        ("spec.nodeName", "agentchain-local"),
        ("spec.serviceAccountName", "sa"),
        ("status.podIP", "127.0.0.1"),
        ("status.hostIP", "127.0.0.1"),
    ],
)
def test_field_ref(path: str, expected: str) -> None:
    container = {"env": [{"name": "F", "valueFrom": {"fieldRef": {"fieldPath": path}}}]}
    assert env_of(container) == {"F": expected}


def test_env_from_with_prefix_order_and_override() -> None:
    container = {
        "envFrom": [
            {"configMapRef": {"name": "c"}},
            {"secretRef": {"name": "s"}, "prefix": "S_"},
            {"configMapRef": {"name": "absent", "optional": True}},
            {"configMapRef": {"name": "c2"}},
        ],
        "env": [{"name": "K", "value": "from-env $(S_K)"}],
    }
    maps = {"c": {"K": "c", "ONLY": "c", "bad=key": "x"}, "c2": {"ONLY": "c2"}}
    got = env_of(container, {"s": {"K": b64("s")}}, maps)
    assert got == {"K": "from-env s", "ONLY": "c2", "S_K": "s"}


def test_env_from_missing_required_object() -> None:
    with pytest.raises(envs.EnvError, match='secret "s" not found'):
        env_of({"envFrom": [{"secretRef": {"name": "s"}}]})


def test_referenced_objects() -> None:
    containers: list[dict[str, Any]] = [
        {"envFrom": [{"secretRef": {"name": "s1"}}, {"configMapRef": {"name": "c1"}}]},
        {
            "env": [
                {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}},
                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "c2", "key": "k"}}},
                {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "D", "value": "x"},
            ]
        },
    ]
    assert envs.referenced_objects(containers) == ({"s1", "s2"}, {"c1", "c2"})


# --- launch ---------------------------------------------------------------------------------


def test_launch_expands_command_and_args_against_pod_env_only() -> None:
    container = {
        "command": ["sh", "-c"],
        "args": ["echo $(GREETING) $(PATH) $$(GREETING)"],
        "env": [{"name": "GREETING", "value": "hello"}, {"name": "HOME", "value": "/pod"}],
        "workingDir": "/tmp/w",
    }
    base = {"PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "SECRET_OF_NODE": "x"}
    launch = envs.build_launch(POD, container, {}, {}, base)
    assert launch.argv == ["sh", "-c", "echo hello $(PATH) $(GREETING)"]
    assert launch.env == {
        "PATH": "/usr/bin",
        "HOME": "/pod",
        "LANG": "C.UTF-8",
        "GREETING": "hello",
    }
    assert launch.working_dir == "/tmp/w"


def test_launch_without_command_uses_args() -> None:
    launch = envs.build_launch(POD, {"args": ["true"]}, {}, {}, {})
    assert (launch.argv, launch.working_dir) == (["true"], None)
