"""The stand-in model server (``e2e/models``) itself, driven by the official SDK clients.

Aspects covered:
- the ``anthropic`` and ``openai`` clients read its answers: Messages streamed and not,
  Responses streamed, Chat Completions streamed (with usage) and not; text and tool calls;
- a request off the SDK's parameter type (unknown field, missing field) gets the
  provider's 400 and is a violation; so is a request with nothing scripted;
- a wrong key is the provider's 401 and is not a violation (tests provoke it on purpose);
- a key with a script of its own is accepted and gets only its own answers, whatever order
  the keys' requests come in (jobs running at once each have one), and each exchange
  says whose it was;
- answers are checked too: an event with a field the SDK does not declare, or missing one
  it requires, is reported;
- each field the stand-in accepts beyond an SDK type (``KNOWN_EXTRAS``) is still missing
  from that type, so the exception goes when the SDK catches up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from e2e.models import DEFAULT_API_KEY, ModelStandIn, failure, text, tool, validation

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


@pytest.fixture
def clients(
    model_standin: ModelStandIn,
) -> Iterator[tuple[anthropic.Anthropic, openai.OpenAI]]:
    url = model_standin.url
    with (
        anthropic.Anthropic(base_url=url, api_key=DEFAULT_API_KEY, max_retries=0) as claude,
        openai.OpenAI(base_url=f"{url}/v1", api_key=DEFAULT_API_KEY, max_retries=0) as gpt,
    ):
        yield claude, gpt


def test_anthropic_client_reads_streamed_and_whole_messages(
    model_standin: ModelStandIn, clients: tuple[anthropic.Anthropic, openai.OpenAI]
) -> None:
    claude, _ = clients
    model_standin.script(
        text("streamed", input_tokens=7, output_tokens=3),
        tool("Read", {"file_path": "/a"}, text="Let me read."),
    )
    with claude.beta.messages.stream(model="m", max_tokens=9, messages=MESSAGES) as stream:
        message = stream.get_final_message()
    assert [b.type for b in message.content] == ["text"] and message.usage.output_tokens == 3
    whole = claude.beta.messages.create(model="m", max_tokens=9, messages=MESSAGES)
    assert whole.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "input", None)) for b in whole.content] == [
        ("text", None),
        ("tool_use", {"file_path": "/a"}),
    ]
    assert len(model_standin.exchanges("anthropic")) == 2


def test_openai_client_reads_responses_and_chat(
    model_standin: ModelStandIn, clients: tuple[anthropic.Anthropic, openai.OpenAI]
) -> None:
    _, gpt = clients
    model_standin.script(
        text("response"), tool("shell", {"cmd": ["ls"]}), text("chat"), tool("f", {"a": 1})
    )
    with gpt.responses.stream(model="gpt-5", input="hi") as stream:
        assert stream.get_final_response().output_text == "response"
    with gpt.responses.stream(model="gpt-5", input="hi") as stream:
        [call] = stream.get_final_response().output
    assert call.type == "function_call" and call.arguments == '{"cmd": ["ls"]}'
    chat = gpt.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "x"}])
    assert chat.choices[0].message.content == "chat"
    chunks = list(
        gpt.chat.completions.create(
            model="gpt-5",
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    calls = [
        c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls
    ]
    function, usage = calls[0][0].function, chunks[-1].usage
    assert function is not None and function.name == "f"
    assert usage is not None and usage.total_tokens == 120


def test_request_off_the_sdk_type_is_a_400_and_a_violation(
    model_standin: ModelStandIn, clients: tuple[anthropic.Anthropic, openai.OpenAI]
) -> None:
    claude, gpt = clients
    model_standin.always(text("never sent"))
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(
            model="m", max_tokens=9, messages=MESSAGES, extra_body={"temprature": 0.5}
        )
    assert refused.value.body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "$.temprature: not a field of the SDK's type",
        },
    }
    with pytest.raises(openai.BadRequestError):
        gpt.responses.create(
            model="gpt-5", input="hi", stream=True, extra_body={"input": [{"role": "user"}]}
        )
    taken = model_standin.take_violations()
    assert len(taken) == 2 and "temprature" in taken[0] and "content" in taken[1], taken


def test_unscripted_request_is_a_violation(
    model_standin: ModelStandIn, clients: tuple[anthropic.Anthropic, openai.OpenAI]
) -> None:
    claude, _ = clients
    with pytest.raises(anthropic.InternalServerError):
        claude.messages.create(model="m", max_tokens=9, messages=MESSAGES)
    assert [v.split(":")[0] for v in model_standin.take_violations()] == ["unscripted"]


def test_wrong_key_is_the_providers_401(model_standin: ModelStandIn) -> None:
    model_standin.script(text("never sent"), failure(429, retry_after=3))
    claude = anthropic.Anthropic(base_url=model_standin.url, api_key="sk-bad", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as refused:
        claude.messages.create(model="m", max_tokens=9, messages=MESSAGES)
    assert refused.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    assert [e.status for e in model_standin.exchanges()] == [401]


def test_each_key_gets_its_own_script(model_standin: ModelStandIn) -> None:
    model_standin.script(text("first of a"), text("second of a"), key="sk-a")
    model_standin.always(failure(529), key="sk-b")
    model_standin.script(text("the default key's"))
    url = model_standin.url

    def ask(key: str) -> str:
        with anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as claude:
            [block] = claude.messages.create(model="m", max_tokens=9, messages=MESSAGES).content
        assert block.type == "text"
        return block.text

    with pytest.raises(anthropic.APIStatusError) as overloaded:
        ask("sk-b")
    assert overloaded.value.status_code == 529
    assert [ask("sk-a"), ask(DEFAULT_API_KEY), ask("sk-a")] == [
        "first of a",
        "the default key's",
        "second of a",
    ]
    with pytest.raises(anthropic.AuthenticationError):
        ask("sk-unknown")
    assert [e.status for e in model_standin.exchanges(key="sk-a")] == [200, 200]
    assert [e.status for e in model_standin.exchanges(key="sk-b")] == [529]
    assert [e.key for e in model_standin.exchanges()] == [
        "sk-b", "sk-a", DEFAULT_API_KEY, "sk-a", "sk-unknown"
    ]  # fmt: skip


def test_answers_are_checked_against_the_sdk_types() -> None:
    assert validation.problems("anthropic.event", {"type": "message_stop", "x": 1}) == [
        "$.x: not a field of the SDK's BetaRawMessageStopEvent"
    ]
    missing = validation.problems("responses.event", {"type": "response.output_text.delta"})
    assert missing and all("ResponseTextDeltaEvent" in p for p in missing), missing


@pytest.mark.parametrize(
    ("kind", "path"),
    [(kind, path) for kind, paths in validation.KNOWN_EXTRAS.items() for path in paths],
)
def test_known_extras_are_still_missing_from_the_sdk(
    kind: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(validation, "KNOWN_EXTRAS", {})
    request = {"model": "gpt-5", "input": "hi", "stream": True, path.removeprefix("$."): {}}
    assert f"{path}: not a field of the SDK's type" in validation.problems(kind, request)
