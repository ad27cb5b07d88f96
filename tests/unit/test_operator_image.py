"""The pure parts of the local image build (``e2e/controlplane/operator_image.py``): which
base images a Dockerfile needs, which files ``.dockerignore`` lets into the context, and
the cache key that decides whether a build is reused."""

from __future__ import annotations

from pathlib import Path

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
