"""The stand-in model server's Gemini API (``e2e/models``), driven by the official
``google-genai`` client and by the real Gemini CLI.

Aspects covered:
- the ``google-genai`` client streams its answers (``streamGenerateContent``): text with
  its usage, and a function call with its arguments;
- a wrong key is Google's 401 (``UNAUTHENTICATED``), which the client raises as such;
- a request off the SDK's types (a field the API does not take) is a 400 and a violation;
- the real Gemini CLI (``@google/gemini-cli``, pinned in ``images/versions.env``, run by
  e2e/setup.sh's launcher with the pinned Node), pointed at the stand-in by
  ``GOOGLE_GEMINI_BASE_URL``, sends a request that conforms to the SDK's types and prints
  the scripted answer and its tokens as its ``stream-json`` result;
- that launcher runs the CLI with the pinned Node 20 whatever ``node`` is first on PATH:
  Debian bookworm's is 18, below the CLI's minimum.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from e2e.models import DEFAULT_API_KEY, ModelStandIn, text, tool
from e2e.models.fixtures import agent_cli, pinned
from e2e.runtime_node import AgentDir

MODEL = "gemini-2.5-pro"


def _client(standin: ModelStandIn, key: str = DEFAULT_API_KEY) -> genai.Client:
    options = types.HttpOptions(
        base_url=standin.url, retry_options=types.HttpRetryOptions(attempts=1)
    )
    return genai.Client(api_key=key, http_options=options)


def test_the_genai_client_streams_text_and_function_calls(model_standin: ModelStandIn) -> None:
    model_standin.script(
        text("Forty-two.", input_tokens=30, output_tokens=4),
        tool("store_get", {"key": "plan"}),
    )
    client = _client(model_standin)
    chunks = list(client.models.generate_content_stream(model=MODEL, contents="6 x 7?"))
    assert "".join(c.text or "" for c in chunks) == "Forty-two."
    usage = chunks[-1].usage_metadata
    assert usage is not None and usage.total_token_count == 34
    [call] = [
        part.function_call
        for chunk in client.models.generate_content_stream(model=MODEL, contents="plan?")
        for candidate in chunk.candidates or []
        for part in (candidate.content.parts if candidate.content else None) or []
        if part.function_call
    ]
    assert (call.name, call.args) == ("store_get", {"key": "plan"})
    [first, _] = model_standin.exchanges("gemini")
    assert first.path == f"/v1/models/{MODEL}:streamGenerateContent"


def test_a_wrong_key_is_googles_401(model_standin: ModelStandIn) -> None:
    client = _client(model_standin, "wrong")
    with pytest.raises(errors.ClientError) as refused:
        list(client.models.generate_content_stream(model=MODEL, contents="x"))
    assert (refused.value.code, refused.value.status) == (401, "UNAUTHENTICATED")


def test_a_request_off_the_sdk_types_is_a_400_and_a_violation(model_standin: ModelStandIn) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "x"}]}], "temprature": 1}
    request = urllib.request.Request(
        f"{model_standin.url}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
        data=json.dumps(body).encode(),
        headers={"x-goog-api-key": DEFAULT_API_KEY, "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    [violation] = model_standin.take_violations()
    assert "$.temprature: not a field of the SDK's type" in violation


def test_the_real_gemini_cli_reads_the_stand_in(
    model_standin: ModelStandIn, agent_dir: AgentDir
) -> None:
    """The reference image's own ``gemini``, in a runner pod."""
    home = agent_dir.path
    # With GOOGLE_GEMINI_BASE_URL the CLI's own guess of the auth type is "gateway", which
    # a headless run refuses: the user settings name the API key as the method.
    (home / ".gemini").mkdir()
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    model_standin.script(text("Forty-two.", input_tokens=300, output_tokens=40))
    env = {
        "GEMINI_API_KEY": DEFAULT_API_KEY,
        "GOOGLE_GEMINI_BASE_URL": model_standin.url,
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    argv = ("-p", "", "--output-format", "stream-json", "-m", MODEL)
    prompt = "What is six times seven?\n"
    ran, _ = agent_dir.pods.run(
        "gemini", home, {**env, "HOME": "{dir}"}, 60, ("gemini", *argv), stdin=prompt
    )
    done = subprocess.CompletedProcess(argv, ran.code, ran.stdout, ran.stderr)
    assert done.returncode == 0, done.stderr
    events: list[dict[str, Any]] = [json.loads(line) for line in done.stdout.splitlines()]
    said = "".join(e["content"] for e in events if e.get("role") == "assistant")
    [result] = [e for e in events if e["type"] == "result"]
    assert (said, result["status"]) == ("Forty-two.", "success")
    assert result["stats"]["total_tokens"] == 340
    [request] = model_standin.exchanges("gemini")
    assert "What is six times seven?" in json.dumps(request.body["contents"])


def test_the_gemini_cli_runs_on_the_pinned_node_whatever_node_is_on_path(
    tmp_path: Path,
) -> None:
    cli = agent_cli("gemini")
    # Debian bookworm's node, first on PATH: too old for the CLI.
    old = tmp_path / "bin" / "node"
    old.parent.mkdir()
    old.write_text("#!/bin/sh\necho 'node v18.19.0: too old for Gemini CLI' >&2\nexit 1\n")
    old.chmod(0o755)
    env = {"PATH": f"{old.parent}:{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}
    done = subprocess.run(
        [str(cli), "--version"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == pinned("GEMINI_CLI_VERSION"), done.stdout
