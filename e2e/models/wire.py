"""The providers' wire formats: the bodies and stream events of one scripted answer.

Pure functions from a ``Reply`` or ``Failure`` to the JSON the provider would send, as its
API reference and its official SDK's types describe them: the Anthropic Messages API
(streamed as server-sent ``event:``/``data:`` pairs), the OpenAI Responses API (streamed
``data:`` events with a ``sequence_number``) and Chat Completions (chunks, then
``data: [DONE]``). ``server.py`` validates each of them before it is sent.
"""

from __future__ import annotations

import json
import time
from typing import Any

from e2e.models.script import ERROR_TYPES, GOOGLE_STATUSES, Failure, Reply

Json = dict[str, Any]


def anthropic_error(failure: Failure) -> Json:
    kind = ERROR_TYPES.get(failure.status, ("api_error", "server_error", None))[0]
    return {"type": "error", "error": {"type": kind, "message": failure.message}}


def openai_error(failure: Failure) -> Json:
    _, kind, code = ERROR_TYPES.get(failure.status, ("api_error", "server_error", None))
    return {"error": {"message": failure.message, "type": kind, "param": None, "code": code}}


def _anthropic_blocks(reply: Reply, ids: list[str]) -> list[Json]:
    blocks: list[Json] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call, call_id in zip(reply.tool_calls, ids, strict=True):
        blocks.append(
            {"type": "tool_use", "id": call_id, "name": call.flat_name, "input": call.arguments}
        )
    return blocks


def _anthropic_usage(reply: Reply, output_tokens: int) -> Json:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def anthropic_message(reply: Reply, model: str, message_id: str, ids: list[str]) -> Json:
    """The whole message, as a request without ``stream`` gets it."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(reply, ids),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _anthropic_usage(reply, reply.output_tokens),
    }


def anthropic_events(reply: Reply, model: str, message_id: str, ids: list[str]) -> list[Json]:
    """The stream of one message: start, each block's start/delta/stop, delta, stop."""
    start = dict(
        anthropic_message(reply, model, message_id, ids),
        content=[],
        stop_reason=None,
        usage=_anthropic_usage(reply, 1),
    )
    events: list[Json] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(_anthropic_blocks(reply, ids)):
        if block["type"] == "text":
            empty: Json = {"type": "text", "text": ""}
            delta: Json = {"type": "text_delta", "text": block["text"]}
        else:
            empty = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append({"type": "content_block_start", "index": index, "content_block": empty})
        events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _responses_items(reply: Reply, response_id: str, ids: list[str]) -> list[Json]:
    items: list[Json] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{response_id}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call, call_id in zip(reply.tool_calls, ids, strict=True):
        item = {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": call.name,
            "arguments": json.dumps(call.arguments),
            "status": "completed",
        }
        if call.namespace:
            item["namespace"] = call.namespace
        items.append(item)
    return items


def _response(response_id: str, model: str, status: str, output: list[Json]) -> Json:
    return {
        "id": response_id,
        "object": "response",
        "created_at": float(int(time.time())),
        "model": model,
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def _item_events(item: Json, index: int) -> list[Json]:
    """One output item's events, from ``output_item.added`` to ``output_item.done``."""
    if item["type"] == "message":
        text = item["content"][0]["text"]
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": []}
        return [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": dict(item, status="in_progress", content=[]),
            },
            {"type": "response.content_part.added", **where, "part": part},
            {"type": "response.output_text.delta", **where, "delta": text, "logprobs": []},
            {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
            {"type": "response.content_part.done", **where, "part": dict(part, text=text)},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]
    where = {"item_id": item["id"], "output_index": index}
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": dict(item, arguments="", status="in_progress"),
        },
        {"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]},
        {"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"]},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def responses_events(reply: Reply, model: str, response_id: str, ids: list[str]) -> list[Json]:
    """The Responses API stream: created, each item's events, completed with usage."""
    items = _responses_items(reply, response_id, ids)
    events: list[Json] = [
        {"type": "response.created", "response": _response(response_id, model, "in_progress", [])}
    ]
    for index, item in enumerate(items):
        events.extend(_item_events(item, index))
    done = _response(response_id, model, "completed", items)
    done["usage"] = {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }
    events.append({"type": "response.completed", "response": done})
    return [dict(event, sequence_number=number) for number, event in enumerate(events)]


def _chat_calls(reply: Reply, ids: list[str]) -> list[Json]:
    return [
        {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": call.flat_name, "arguments": json.dumps(call.arguments)},
        }
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, ids, strict=True))
    ]


def _chat_usage(reply: Reply) -> Json:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def chat_completion(reply: Reply, model: str, completion_id: str, ids: list[str]) -> Json:
    message: Json = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {key: value for key, value in call.items() if key != "index"}
            for call in _chat_calls(reply, ids)
        ]
    finish = "tool_calls" if reply.tool_calls else "stop"
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "usage": _chat_usage(reply),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
    }


def chat_chunks(
    reply: Reply, model: str, completion_id: str, ids: list[str], with_usage: bool
) -> list[Json]:
    """Chat Completions chunks: the role and text, the tool calls, the finish, the usage."""
    base = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    deltas: list[Json] = [{"role": "assistant", "content": reply.text}]
    if reply.tool_calls:
        deltas.append({"tool_calls": _chat_calls(reply, ids)})
    chunks = [
        dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])
        for delta in deltas
    ]
    finish = "tool_calls" if reply.tool_calls else "stop"
    chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
    if with_usage:
        chunks.append(dict(base, choices=[], usage=_chat_usage(reply)))
    return chunks


def gemini_error(failure: Failure) -> Json:
    status = GOOGLE_STATUSES.get(failure.status, "UNKNOWN")
    return {"error": {"code": failure.status, "message": failure.message, "status": status}}


def gemini_chunks(reply: Reply, model: str, response_id: str) -> list[Json]:
    """A ``streamGenerateContent`` answer: the text, then the function calls (a tool call's
    ``flat_name``), each a chunk; the last one finishes with the usage."""
    parts: list[Json] = [{"text": reply.text}] if reply.text else []
    parts += [
        {"functionCall": {"name": call.flat_name, "args": call.arguments}}
        for call in reply.tool_calls
    ]
    usage = {
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": reply.output_tokens,
        "totalTokenCount": reply.input_tokens + reply.output_tokens,
    }
    chunks = []
    for index, part in enumerate(parts or [{"text": ""}]):
        candidate: Json = {"content": {"role": "model", "parts": [part]}, "index": 0}
        chunk: Json = {"candidates": [candidate], "modelVersion": model, "responseId": response_id}
        if index == max(len(parts), 1) - 1:
            candidate["finishReason"] = "STOP"
            chunk["usageMetadata"] = usage
        chunks.append(chunk)
    return chunks
