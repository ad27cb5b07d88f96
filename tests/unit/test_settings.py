"""The settings model: one source for the environment, the flags and the docs.

Aspects covered (issue 15, "run the operator yourself"):
* every setting is read from ``AGENTCHAIN_<FIELD>``, lists from comma-separated text;
* a flag of ``agentchain run`` overrides the variable, and a flag not given does not;
* ``agentchain run --help`` lists every setting with its variable and default, and
  secret lists have no flag (only their file's path does);
* secret lists are read from their ``_FILE`` one per line, the variable otherwise;
* a bad value is refused with the field's name, not turned into a default;
* ``docs/configuration.md`` is what the model generates (drift test).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentchain import __main__ as cli
from agentchain import settings
from agentchain.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentchain run")
    settings.add_arguments(parser)
    return parser


def test_every_field_comes_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCHAIN_NAMESPACES", "a, b,,c")
    monkeypatch.setenv("AGENTCHAIN_LISTEN_PORT", "9090")
    monkeypatch.setenv("AGENTCHAIN_DASHBOARD", "false")  # On by default.
    config = Settings()
    assert config.namespaces == ("a", "b", "c")
    assert config.listen_port == 9090
    assert config.dashboard is False


def test_a_flag_overrides_the_variable_and_an_absent_flag_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTCHAIN_LISTEN_PORT", "9090")
    monkeypatch.setenv("AGENTCHAIN_MAX_CHAIN_JOBS", "4")
    args = _run_parser().parse_args(["--listen-port", "7000", "--namespaces", "x,y"])
    config = settings.from_arguments(args)
    assert config.listen_port == 7000
    assert config.namespaces == ("x", "y")
    assert config.max_chain_jobs == 4


def test_help_lists_every_setting_with_variable_and_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for field in Settings.model_fields:
        assert settings.env_name(field) in text
        flag = "--" + field.replace("_", "-")
        shown = re.search(rf"{flag}[ \]]", text) is not None
        assert shown == (field not in settings.SECRETS), flag
    assert "default: 8080" in text


def test_secret_lists_come_from_their_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secrets"
    path.write_text("one\n\n two \n")
    monkeypatch.setenv("AGENTCHAIN_WEBHOOK_SECRETS", "ignored-when-the-file-exists")
    monkeypatch.setenv("AGENTCHAIN_WEBHOOK_SECRETS_FILE", str(path))
    monkeypatch.setenv("AGENTCHAIN_ADMIN_TOKENS", "t1,t2")
    config = Settings()
    assert config.webhook_secrets == ("one", "two")
    assert config.admin_tokens == ("t1", "t2")


def test_a_bad_value_names_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCHAIN_MAX_CHAIN_JOBS", "ten")
    with pytest.raises(ValidationError, match="max_chain_jobs"):
        Settings()


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)//{traceId}", "https://jaeger.example/trace/", "/trace/{traceId}"]
)
def test_a_trace_url_must_be_http_and_name_the_trace(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCHAIN_TRACE_URL", url)
    with pytest.raises(ValidationError, match="trace_url"):
        Settings()
    monkeypatch.setenv("AGENTCHAIN_TRACE_URL", "https://jaeger.example/trace/{traceId}")
    assert Settings().trace_url == "https://jaeger.example/trace/{traceId}"


def test_configuration_doc_is_generated_from_the_model() -> None:
    assert DOC.read_text(encoding="utf-8") == settings.reference(), (
        "run: python -m agentchain config-reference"
    )
