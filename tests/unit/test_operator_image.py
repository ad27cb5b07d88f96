"""The local image build (``e2e/controlplane/operator_image.py``) without buildah: which
base images a Dockerfile needs, which files ``.dockerignore`` lets into the context, the
cache key that decides whether a build is reused, and an image built for the node reused
in another directory instead of built again."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e.controlplane import operator_image, realnode_images
from e2e.controlplane.operator_image import (
    base_images,
    cache_key,
    context_files,
    ignore_rules,
    included,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_repository_dockerfile_needs_the_slim_python_image() -> None:
    assert base_images((ROOT / "Dockerfile").read_text()) == ["python:3.11-slim"]


def test_base_images_substitute_arg_defaults_and_skip_stage_names() -> None:
    dockerfile = (
        "# syntax=docker/dockerfile:1\n"
        "ARG BASE=debian:bookworm-slim\n"
        'ARG TOOLS="golang:1.22"\n'
        "FROM --platform=linux/amd64 ${TOOLS} AS tools\n"
        "ARG BASE=ignored-after-from\n"
        "FROM $BASE as final\n"
        "COPY --from=tools /x /x\n"
        "FROM tools\n"
        "FROM scratch\n"
    )
    assert base_images(dockerfile) == ["golang:1.22", "debian:bookworm-slim"]


def test_the_context_is_what_dockerignore_lets_in(tmp_path: Path) -> None:
    names = ("pyproject.toml", "README.md", "operator/pkg/a.py", "operator/pkg/b.pyc",
             "operator/pkg/__pycache__/a.cpython-311.pyc", "operator/x.egg-info/PKG-INFO",
             "tests/test_a.py", ".git/HEAD", "Makefile")  # fmt: skip
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    rules = ignore_rules((ROOT / ".dockerignore").read_text())
    assert context_files(tmp_path, rules) == ["README.md", "operator/pkg/a.py", "pyproject.toml"]


def test_ignore_rules_last_match_wins_and_stars_stay_in_one_directory() -> None:
    rules = ignore_rules("# comment\n\ndocs/*\n!docs/keep.md\n*.log\n")
    assert not included("docs/a.md", rules)
    assert included("docs/keep.md", rules)
    assert not included("debug.log", rules)
    assert included("sub/debug.log", rules)  # `*` does not cross a `/`
    assert included("docs", rules)
    assert not included("docs/sub/deep.md", rules)  # the parent `docs/sub` matched


def test_cache_key_changes_with_any_input_and_not_otherwise() -> None:
    parts = [("Dockerfile", b"FROM python:3.11-slim\n"), ("context/a.py", b"print(1)\n")]
    key = cache_key(parts)
    assert key == cache_key(list(parts))
    assert len(key) == 16
    assert cache_key([parts[0], ("context/a.py", b"print(2)\n")]) != key
    assert cache_key([parts[0], ("context/b.py", b"print(1)\n")]) != key
    assert cache_key(parts[:1]) != key
    # Moving bytes between a name and its content is a different input set.
    assert cache_key([("ab", b"c")]) != cache_key([("a", b"bc")])


def test_an_image_already_built_for_the_node_is_linked_into_another_directory_not_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    (root / "operator").mkdir(parents=True)
    (root / "Dockerfile").write_text("FROM python:3.11-slim\nCOPY operator/ /src/\n")
    (root / "operator" / "a.py").write_text("print(1)\n")
    monkeypatch.setenv("AGENTCHAIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(operator_image, "base_key", lambda prefix: "stand-in")
    monkeypatch.setattr(operator_image, "host_python", lambda: tmp_path)

    def no_buildah(*tools: str) -> None:
        raise AssertionError("buildah would run")

    monkeypatch.setattr(operator_image, "_require", no_buildah)
    key = operator_image.Recipe.of(root, "Dockerfile", None).key
    node = realnode_images.cache_dir() / f"{operator_image.IMAGE_NAME}-{key}.tar"
    node.parent.mkdir(parents=True)
    node.write_bytes(b"an OCI archive")

    built = operator_image.build(root, archives=tmp_path / "agents")

    assert built.cached
    assert built.archive == tmp_path / "agents" / node.name
    assert built.archive.read_bytes() == b"an OCI archive"
    assert not list((tmp_path / "agents").glob("*.partial"))
    # An image built nowhere yet goes to buildah.
    (root / "operator" / "a.py").write_text("print(2)\n")
    with pytest.raises(AssertionError, match="buildah would run"):
        operator_image.build(root, archives=tmp_path / "agents")
