"""OpenAI <-> Ollama native, both ways: /api/chat requests, answers and NDJSON chunks; /api/embed.

Decisions worth knowing:
- Images must be ``data:`` URLs: their base64 goes into the message's ``images``. Remote ``http(s)``
  image URLs are refused with ClientError 400 (deterministic, no fallback): fetching arbitrary URLs
  from the gateway would add latency and a server-side request forgery hole.
- Text parts of one message are joined with a newline into its ``content``.
- Tool call arguments travel as JSON strings in OpenAI and as objects in Ollama; ids are generated
  (``call_<hex>``) when Ollama gives none. A tool message gets ``tool_name`` from the matching call.
- ``response_format`` json_object -> ``format: "json"``, json_schema -> ``format: <schema>``.
- Sampling parameters go into ``options``; ``max_completion_tokens``/``max_tokens`` -> ``num_predict``.
  Ollama-native extras in the body pass through: ``options`` (e.g. ``num_ctx``), ``keep_alive``, ``think``;
  ``reasoning_effort`` -> ``think``. Thinking text comes back as ``reasoning`` (as Ollama's own /v1 does).
- ``finish_reason``: ``tool_calls`` when the answer calls tools, ``length`` for done_reason length,
  else ``stop``; usage from ``prompt_eval_count``/``eval_count``.
"""

from __future__ import annotations

import base64
import random
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from interlock.runtime.errors import ClientError, MalformedResponse, ProtocolFailure
from interlock.runtime.upstream.failures import credentials, error_for_object

_OPTION_KEYS = ("temperature", "top_p", "seed", "frequency_penalty", "presence_penalty")


def _bad_request(message: str) -> ClientError:
    return ClientError(message, status=400)


def completion_id() -> str:
    return f"chatcmpl-{random.getrandbits(96):024x}"


def _call_id() -> str:
    return f"call_{random.getrandbits(96):024x}"


# ----- requests -----


def chat_request(body: Mapping[str, Any], model: str, stream: bool) -> dict[str, Any]:
    """An OpenAI chat request as an Ollama /api/chat request; raises ClientError for what cannot go."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _bad_request("messages must be an array")
    tool_names: dict[str, str] = {}
    out: dict[str, Any] = {
        "model": model,
        "messages": [_message(m, tool_names) for m in messages],
        "stream": stream,
    }
    tools = body.get("tools")
    if tools and body.get("tool_choice") != "none":
        out["tools"] = tools
    response_format = body.get("response_format")
    if isinstance(response_format, Mapping):
        kind = response_format.get("type")
        if kind == "json_object":
            out["format"] = "json"
        elif kind == "json_schema":
            spec = response_format.get("json_schema")
            schema = spec.get("schema") if isinstance(spec, Mapping) else None
            out["format"] = schema if isinstance(schema, Mapping) else "json"
    options: dict[str, Any] = {}
    native = body.get("options")
    if isinstance(native, Mapping):
        options.update(native)
    for key in _OPTION_KEYS:
        value = body.get(key)
        if value is not None:
            options[key] = value
    limit = body.get("max_completion_tokens")
    if limit is None:
        limit = body.get("max_tokens")
    if limit is not None:
        options["num_predict"] = limit
    stop = body.get("stop")
    if stop is not None:
        options["stop"] = [stop] if isinstance(stop, str) else stop
    if options:
        out["options"] = options
    for key in ("keep_alive", "think"):
        if body.get(key) is not None:
            out[key] = body[key]
    effort = body.get("reasoning_effort")
    if isinstance(effort, str) and "think" not in out:
        out["think"] = effort if effort in ("low", "medium", "high") else effort != "none"
    return out


def _message(message: Any, tool_names: dict[str, str]) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        raise _bad_request("each message must be an object")
    role = message.get("role")
    out: dict[str, Any] = {"role": "system" if role == "developer" else role}
    content = message.get("content")
    if content is None or isinstance(content, str):
        out["content"] = content or ""
    elif isinstance(content, list):
        texts: list[str] = []
        images: list[str] = []
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text":
                texts.append(str(part.get("text", "")))
            elif kind == "image_url":
                images.append(_image(part.get("image_url")))
            else:
                raise _bad_request(f"content part type {kind!r} is not supported by Ollama")
        out["content"] = "\n".join(texts)
        if images:
            out["images"] = images
    else:
        raise _bad_request("message content must be a string or an array of parts")
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [_native_call(call, tool_names) for call in calls]
    if role == "tool":
        call_id = message.get("tool_call_id")
        name = tool_names.get(call_id) if isinstance(call_id, str) else None
        name = name or message.get("name")
        if isinstance(name, str):
            out["tool_name"] = name
    return out


def _image(image_url: Any) -> str:
    url = image_url.get("url") if isinstance(image_url, Mapping) else image_url
    if not isinstance(url, str):
        raise _bad_request("image_url needs a url")
    if not url.startswith("data:"):
        raise _bad_request("Ollama models take images as data: URLs only; remote image URLs are not fetched")
    header, comma, data = url.partition(",")
    if not comma or not header.endswith(";base64"):
        raise _bad_request("image data: URLs must be base64-encoded")
    return data


def _native_call(call: Any, tool_names: dict[str, str]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise _bad_request("tool_calls need a function name")
    name = function["name"]
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments) if arguments.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise _bad_request(f"arguments of tool call {name!r} are not valid JSON") from exc
    call_id = call.get("id")
    if isinstance(call_id, str):
        tool_names[call_id] = name
    return {"function": {"name": name, "arguments": arguments if arguments is not None else {}}}


def embed_request(body: Mapping[str, Any], model: str) -> dict[str, Any]:
    inputs = body.get("input")
    if isinstance(inputs, list) and any(not isinstance(item, str) for item in inputs):
        raise _bad_request("Ollama embeddings take strings only, not token arrays")
    if not isinstance(inputs, str | list):
        raise _bad_request("input must be a string or an array of strings")
    out: dict[str, Any] = {"model": model, "input": inputs}
    if body.get("dimensions") is not None:
        out["dimensions"] = body["dimensions"]
    return out


# ----- answers -----


def _usage(answer: Mapping[str, Any]) -> dict[str, int]:
    prompt = answer.get("prompt_eval_count") or 0
    completion = answer.get("eval_count") or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _finish_reason(answer: Mapping[str, Any], called_tools: bool) -> str:
    if called_tools:
        return "tool_calls"
    return "length" if answer.get("done_reason") == "length" else "stop"


def _openai_calls(calls: Any, first_index: int = 0) -> list[dict[str, Any]]:
    out = []
    for offset, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            raise MalformedResponse("tool call without a function")
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else orjson.dumps(arguments or {}).decode()
        call_id = call.get("id")
        out.append(
            {
                "index": first_index + offset,
                "id": call_id if isinstance(call_id, str) and call_id else _call_id(),
                "type": "function",
                "function": {"name": function.get("name"), "arguments": text},
            }
        )
    return out


def chat_completion(answer: Any, model: str) -> dict[str, Any]:
    """An Ollama /api/chat answer (``stream: false``) as an OpenAI ``chat.completion``."""
    if not isinstance(answer, Mapping):
        raise MalformedResponse("response is not a JSON object")
    native = answer.get("message")
    if not isinstance(native, Mapping):
        raise MalformedResponse("response has no message")
    message: dict[str, Any] = {"role": "assistant", "content": native.get("content") or ""}
    if native.get("thinking"):
        message["reasoning"] = native["thinking"]
    calls = native.get("tool_calls")
    if isinstance(calls, list) and calls:
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in _openai_calls(calls)]
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_ollama",
        "choices": [
            {"index": 0, "message": message, "finish_reason": _finish_reason(answer, "tool_calls" in message)}
        ],
        "usage": _usage(answer),
    }


class NDJSONDecoder:
    """Ollama's NDJSON chat stream to ``chat.completion.chunk`` dicts (role in the first delta)."""

    __slots__ = ("_first", "_head", "_headers", "_include_usage", "_tools", "done", "on_done")

    def __init__(self, model: str, include_usage: bool, headers: Mapping[str, str]) -> None:
        """``headers`` are the endpoint's: their credentials are masked in an error line's text."""
        self._head = {
            "id": completion_id(),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        self._include_usage = include_usage
        self._headers = headers
        self._first = True
        self._tools = 0
        self.done = False
        self.on_done: Callable[[Mapping[str, Any]], None] | None = None  # gets the final native message

    def feed(self, line: bytes, out: deque[dict[str, Any]]) -> None:
        if self.done or not line.strip():
            return
        try:
            native = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise MalformedResponse("stream line is not valid JSON") from exc
        if not isinstance(native, dict):
            raise MalformedResponse("stream line is not a JSON object")
        if "error" in native:
            raise error_for_object(native["error"], credentials(self._headers))
        message = native.get("message")
        delta: dict[str, Any] = {}
        if self._first:
            delta["role"] = "assistant"
            delta["content"] = ""
            self._first = False
        if isinstance(message, dict):
            content = message.get("content")
            if content:
                delta["content"] = content
            if message.get("thinking"):
                delta["reasoning"] = message["thinking"]
            calls = message.get("tool_calls")
            if isinstance(calls, list) and calls:
                delta["tool_calls"] = _openai_calls(calls, self._tools)
                self._tools += len(calls)
        if native.get("done"):
            finish = _finish_reason(native, self._tools > 0)
            out.append({**self._head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            if self._include_usage:
                out.append({**self._head, "choices": [], "usage": _usage(native)})
            self.done = True
            if self.on_done is not None:
                self.on_done(native)
        elif delta:
            out.append({**self._head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})

    def end(self, out: deque[dict[str, Any]]) -> None:
        if not self.done:
            raise ProtocolFailure("stream ended before its last chunk")


def embeddings(answer: Any, model: str, encoding_format: Any) -> dict[str, Any]:
    """An Ollama /api/embed answer as OpenAI's embeddings list (base64 float32 when asked)."""
    vectors = answer.get("embeddings") if isinstance(answer, Mapping) else None
    if not isinstance(vectors, list):
        raise MalformedResponse("response has no embeddings")
    as_base64 = encoding_format == "base64"
    data = []
    for index, vector in enumerate(vectors):
        encoded: Any = vector
        if as_base64:
            encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = answer.get("prompt_eval_count") or 0
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
