"""The Dockerfile, checked without a Docker engine (none exists where the tests run).

Aspects covered (issue 7):
* both stages build from the slim Python 3.11 base;
* the final stage runs as a numeric, non-root user and never writes bytecode;
* the entry point is the ``agentchain`` console script (declared in pyproject) and the
  default command is ``run``, so one image serves the operator, the API and the demo agent;
* every path the Dockerfile copies from the build context exists in the repository and is
  not excluded by ``.dockerignore``;
* the install step is ``pip install`` of the project itself, the same install CI runs;
* a code change reuses the layers before the package's own install: the dependencies'
  stage sees only pyproject.toml, and the final stage's copies come after its settings.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    stage: int


def parse(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped, numbered by stage."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    out: list[Instruction] = []
    stage = -1
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        out.append(Instruction(keyword, args.strip(), stage))
    return out


INSTRUCTIONS = parse(DOCKERFILE.read_text())
FINAL_STAGE = max(i.stage for i in INSTRUCTIONS)


def _final(keyword: str) -> list[Instruction]:
    return [i for i in INSTRUCTIONS if i.keyword == keyword and i.stage == FINAL_STAGE]


def _arg_defaults() -> dict[str, str]:
    defaults: dict[str, str] = {}
    for ins in INSTRUCTIONS:
        if ins.keyword == "ARG" and "=" in ins.args:
            name, _, value = ins.args.partition("=")
            defaults.setdefault(name, value)
    return defaults


def _copy_sources(ins: Instruction) -> list[str]:
    words = shlex.split(ins.args)
    if any(w.startswith("--from") for w in words):
        return []
    plain = [w for w in words if not w.startswith("--")]
    return plain[:-1]


def test_every_stage_builds_from_slim_python_311() -> None:
    defaults = _arg_defaults()
    froms = [i.args.split()[0] for i in INSTRUCTIONS if i.keyword == "FROM"]
    images = [re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], f) for f in froms]
    assert len(images) >= 2, "multi-stage: a builder and a final stage"
    assert set(images) == {"python:3.11-slim"}


def test_final_stage_runs_as_numeric_non_root_user() -> None:
    users = _final("USER")
    assert users, "the final stage must set USER"
    uid = users[-1].args.split(":")[0]
    assert uid.isdigit(), "numeric, so Kubernetes can verify runAsNonRoot"
    assert int(uid) != 0


def test_final_stage_never_writes_bytecode() -> None:
    env = " ".join(i.args for i in _final("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "HOME=/tmp" in env


def test_entrypoint_is_the_agentchain_console_script() -> None:
    entry = _final("ENTRYPOINT")
    cmd = _final("CMD")
    assert entry and json.loads(entry[-1].args) == ["agentchain"]
    assert cmd and json.loads(cmd[-1].args) == ["run"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["agentchain"] == "agentchain.__main__:main"


COPIES = [src for i in INSTRUCTIONS if i.keyword in ("COPY", "ADD") for src in _copy_sources(i)]


@pytest.mark.parametrize("source", COPIES)
def test_copied_path_exists_in_the_repository(source: str) -> None:
    assert (ROOT / source).exists(), f"Dockerfile copies {source!r}, which does not exist"


@pytest.mark.parametrize("source", COPIES)
def test_copied_path_is_in_the_build_context(source: str) -> None:
    # .dockerignore is an allow-list: '*' then '!path' for what the build needs.
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()]
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    assert source.rstrip("/") in allowed, f"{source!r} is excluded by .dockerignore"


def test_install_step_is_pip_install_of_the_project() -> None:
    runs = [shlex.split(i.args) for i in INSTRUCTIONS if i.keyword == "RUN"]
    installs = [r for r in runs if r[:2] == ["pip", "install"]]
    assert len(installs) == 1, "exactly one pip install of the project"
    words = installs[0][2:]
    targets = [w for w in words if not w.startswith("-")]
    assert targets == ["."], "the project itself, with its pinned metadata, nothing else"
    assert "-r" not in words and "-e" not in words
    # Its dependencies come from the stage that installs exactly pyproject's list.
    assert "--no-deps" in words


def _stage_of(name: str) -> list[Instruction]:
    stages = [i.stage for i in INSTRUCTIONS
              if i.keyword == "FROM" and i.args.lower().endswith(f" as {name}")]  # fmt: skip
    assert stages, f"no stage named {name}"
    return [i for i in INSTRUCTIONS if i.stage == stages[0]]


def test_the_dependencies_layer_depends_on_pyproject_only() -> None:
    # A code change must not reinstall the dependencies: the stage that installs them
    # sees nothing of the context but pyproject.toml, and installs its dependency list.
    deps = _stage_of("deps")
    copied = [src for i in deps if i.keyword in ("COPY", "ADD") for src in _copy_sources(i)]
    assert copied == ["pyproject.toml"]
    (run,) = [i.args for i in deps if i.keyword == "RUN"]
    assert '["project"]["dependencies"]' in run and "pip install" in run
    final = " ".join(i.args for i in _final("COPY"))
    assert "--from=deps /install /usr/local" in final


def test_the_final_stage_copies_come_after_its_configuration() -> None:
    # Every instruction after the first copy of the package is rebuilt on a code
    # change, so only the copies come last; the configuration before them is reused.
    final = [i for i in INSTRUCTIONS if i.stage == FINAL_STAGE]
    first_copy = next(n for n, i in enumerate(final) if i.keyword == "COPY")
    assert {i.keyword for i in final[first_copy:]} == {"COPY"}
