"""The Anthropic Messages surface: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

A Messages request becomes the internal (OpenAI-shaped) form: ``system`` becomes the first message;
content blocks map one to one (``text`` -> text parts, ``image`` with a base64 or URL source -> an
``image_url`` part, an assistant's ``tool_use`` -> ``tool_calls``, a user's ``tool_result`` -> a ``tool``
message placed before the rest of that turn); ``tools`` (``input_schema``) -> function tools;
``tool_choice`` auto/any/tool/none -> auto/required/named/none; ``stop_sequences`` -> ``stop``;
``top_k`` and ``thinking`` (-> ``think``) travel as the native fields the adapters already know (an
upstream that cannot take them drops them and says so in ``X-Interlock-Dropped``); ``role: "system"``
turns inside ``messages`` stay system turns where they stand. What the internal form cannot carry
(``cache_control``, ``metadata``, ``output_config``, ``context_management``, server tools, unknown
fields) is named in ``X-Interlock-Dropped``. To an ``anthropic`` candidate none of this applies: the
request goes as it came (``Native``, with its ``anthropic-beta``/``anthropic-version`` headers) and its
answer and events come back as they came, the model name replaced.

Answers: ``content`` blocks (``thinking``, ``text``, ``tool_use`` with parsed ``input``), ``stop_reason``
(``end_turn``, ``max_tokens``, ``tool_use``), ``usage`` in/out tokens. Streams follow Anthropic's event
sequence (``message_start``, ``content_block_start``/``_delta``/``_stop`` per block, ``message_delta``
with the stop reason and output tokens, ``message_stop``); a stream broken after it started ends with an
``error`` event and no ``message_stop``. Errors: ``{"type":"error","error":{"type","message"}}``.
``x-api-key`` and ``anthropic-version`` are accepted and not checked (the gateway has no caller keys).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import orjson

from interlock.runtime.access import caller_of
from interlock.runtime.asgi import (
    ClientGone,
    Header,
    Receive,
    Scope,
    Send,
    json_type,
    parse_object,
    read_body,
    send_json,
)
from interlock.runtime.errors import InvalidRequest
from interlock.runtime.guards.needs import needs_of
from interlock.runtime.resolve import resolve
from interlock.runtime.surfaces.base import (
    Failure,
    Parsed,
    StreamRender,
    Surface,
    chat_request,
    failure_of,
    first_choice,
    reasoning,
)
from interlock.runtime.surfaces.openai import SSE_HEADERS, cached_tokens, check_model, check_stream
from interlock.runtime.upstream.base import Native, Relayed, RelayedChunk
from interlock.runtime.wire.anthropic import source_url
from interlock.runtime.wire.openai_chat import call_arguments

if TYPE_CHECKING:
    from interlock.runtime.services import RequestServices

_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def message_id() -> str:
    return f"msg_{random.getrandbits(96):024x}"


def error_body(status: int, message: str) -> bytes:
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


# -- requests --------------------------------------------------------------------------------------


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidRequest(f"`{where}` must be a string or an array of content blocks")
    for number, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InvalidRequest(f"`{where}[{number}]` must be a content block with a `type`")
    return content


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    url = source_url(block.get("source"))
    if url is None:
        raise InvalidRequest(f"`{where}.source` must be a base64 or url image source")
    return {"type": "image_url", "image_url": {"url": url}}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            text
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(text := b.get("text"), str)
        )
    return ""


def _turn(index: int, message: Any) -> list[dict[str, Any]]:
    """One Anthropic message as internal messages (tool results first, as ``tool`` messages)."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise InvalidRequest(f"`{where}` must be an object, not {json_type(message)}")
    role = message.get("role")
    if role == "system":  # mid-conversation system turns (Claude Code's beta): kept where they are
        return [{"role": "system", "content": _text_of(_blocks(message.get("content"), f"{where}.content"))}]
    if role not in ("user", "assistant"):
        raise InvalidRequest(f"`{where}.role` must be `user`, `assistant` or `system`")
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for number, block in enumerate(_blocks(message.get("content"), f"{where}.content")):
        kind = block["type"]
        if kind == "text":
            text = block.get("text", "")
            if not isinstance(text, str):
                raise InvalidRequest(f"`{where}.content[{number}].text` must be a string")
            parts.append({"type": "text", "text": text})
        elif kind == "image":
            parts.append(_image(block, f"{where}.content[{number}]"))
        elif kind == "tool_use" and role == "assistant":
            arguments = orjson.dumps(block.get("input") or {}).decode()
            function = {"name": block.get("name", ""), "arguments": arguments}
            calls.append({"id": block.get("id", ""), "type": "function", "function": function})
        elif kind == "tool_result" and role == "user":
            text = _text_of(block.get("content"))
            if block.get("is_error"):
                text = f"error: {text}"
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id", ""), "content": text})
        elif kind in ("thinking", "redacted_thinking") and role == "assistant":
            thinking = block.get("thinking", "")
            if not isinstance(thinking, str):
                raise InvalidRequest(f"`{where}.content[{number}].thinking` must be a string")
            reasoning.append(thinking)
        else:
            raise InvalidRequest(f"`{where}.content[{number}]`: a {kind!r} block is not supported here")
    if parts or calls or not out:
        text_only = all(p["type"] == "text" for p in parts)
        content: Any = "\n".join(p["text"] for p in parts) if text_only else parts
        turn: dict[str, Any] = {"role": role, "content": content}
        if calls:
            turn["tool_calls"] = calls
        if reasoning:
            turn["reasoning"] = "\n".join(reasoning)
        out.append(turn)
    return out


def _tools(tools: Any, dropped: list[str]) -> list[dict[str, Any]]:
    """Function tools for the client tools; server tools (a ``type`` such as ``web_search_20250305``,
    run by Anthropic) are left out and named in ``dropped`` (``tools.web_search_20250305``)."""
    if not isinstance(tools, list):
        raise InvalidRequest("`tools` must be an array")
    out = []
    for number, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise InvalidRequest(f"`tools[{number}].name` must be a string")
        kind = tool.get("type")
        if kind not in (None, "custom"):
            if f"tools.{kind}" not in dropped:
                dropped.append(f"tools.{kind}")
            continue
        function: dict[str, Any] = {"name": tool["name"], "parameters": tool.get("input_schema") or {}}
        if tool.get("description"):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> Any:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "auto":
        return "auto"
    if kind == "any":
        return "required"
    if kind == "none":
        return "none"
    if kind == "tool" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise InvalidRequest("`tool_choice.type` must be auto, any, tool (with a name) or none")


# the request fields the internal form carries, as they are or translated
_READ = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "tools",
        "tool_choice",
        "thinking",
        "stream",
    }
)


def _cache_marks(body: dict[str, Any]) -> bool:
    """Whether any system, message or tool block carries ``cache_control`` (a chat upstream has none)."""
    system = body.get("system")
    blocks: list[Any] = [*system] if isinstance(system, list) else []
    tools = body.get("tools")
    blocks.extend(tools if isinstance(tools, list) else ())
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            blocks.extend(content)
    return any(isinstance(block, dict) and "cache_control" in block for block in blocks)


def internal_request(body: dict[str, Any], *, counting: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The internal (OpenAI-shaped) form of a Messages request (``counting``: max_tokens optional), and
    the names of what it cannot carry."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("`messages` must be a non-empty array")
    internal: dict[str, Any] = {"model": body.get("model"), "messages": []}
    dropped: list[str] = []
    system = body.get("system")
    if system:
        internal["messages"].append({"role": "system", "content": _text_of(_blocks(system, "system"))})
    for index, message in enumerate(messages):
        internal["messages"].extend(_turn(index, message))
    max_tokens = body.get("max_tokens")
    if not counting and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise InvalidRequest("`max_tokens` is required: a positive integer")
    if max_tokens is not None:
        internal["max_tokens"] = max_tokens
    if body.get("stop_sequences"):
        internal["stop"] = body["stop_sequences"]
    for key in ("temperature", "top_p", "top_k"):
        if body.get(key) is not None:
            internal[key] = body[key]
    if body.get("tools"):
        tools = _tools(body["tools"], dropped)
        if tools:
            internal["tools"] = tools
            if body.get("tool_choice") is not None:
                internal["tool_choice"] = _tool_choice(body["tool_choice"])
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "enabled":
        internal["think"] = True
    elif kind == "disabled":
        internal["think"] = False  # "adaptive": the model decides, as it does when not told
    for key, value in body.items():
        if key not in _READ and value is not None:
            dropped.append(key)
    if _cache_marks(body):
        dropped.append("cache_control")
    return internal, dropped


# -- answers ---------------------------------------------------------------------------------------


def _input(arguments: Any) -> Any:
    try:
        return call_arguments(arguments)
    except ValueError:  # a model's broken arguments: the client gets an empty input
        return {}


def _usage(usage: Any) -> dict[str, int]:
    """Anthropic's usage for OpenAI's: the cached part of the prompt is ``cache_read_input_tokens``,
    not counted again in ``input_tokens`` (Anthropic counts them apart, OpenAI in the prompt)."""
    usage = usage if isinstance(usage, dict) else {}
    cached = cached_tokens(usage)
    out = {
        "input_tokens": (usage.get("prompt_tokens") or 0) - cached,
        "output_tokens": usage.get("completion_tokens") or 0,
    }
    if cached:
        out["cache_read_input_tokens"] = cached
    return out


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: %b\ndata: %b\n\n" % (name.encode(), orjson.dumps(data))


class _Events(StreamRender):
    """Anthropic's event sequence from OpenAI chunks: one open block at a time (thinking, text, a tool);
    or, from a Messages upstream that got the caller's own request, its events as they came (the model
    named in ``message_start`` replaced by the caller's)."""

    __slots__ = ("_block", "_finish", "_index", "_model", "_relayed", "_started", "_usage")
    headers: tuple[Header, ...] = SSE_HEADERS

    def __init__(self, model: str) -> None:
        self._model = model
        self._relayed = False
        self._started = False
        self._block: tuple[str, int] | None = None  # (kind, the OpenAI tool-call index) of the open block
        self._index = -1
        self._finish: str | None = None
        self._usage: Any = None

    def _open(self, kind: str, call: int, block: dict[str, Any], out: list[bytes]) -> None:
        if self._block == (kind, call):
            return
        self._close(out)
        self._index += 1
        self._block = (kind, call)
        out.append(
            _event(
                "content_block_start",
                {"type": "content_block_start", "index": self._index, "content_block": block},
            )
        )

    def _close(self, out: list[bytes]) -> None:
        if self._block is not None:
            out.append(_event("content_block_stop", {"type": "content_block_stop", "index": self._index}))
            self._block = None

    def _delta(self, delta: dict[str, Any], out: list[bytes]) -> None:
        out.append(
            _event(
                "content_block_delta", {"type": "content_block_delta", "index": self._index, "delta": delta}
            )
        )

    def _relay(self, chunk: RelayedChunk) -> bytes:
        self._relayed = True
        event = chunk.native
        kind = event.get("type")
        data = chunk.raw
        if kind == "message_start" and isinstance(message := event.get("message"), dict):
            data = orjson.dumps({**event, "message": {**message, "model": self._model}})
        return b"event: %b\ndata: %b\n\n" % (str(kind).encode(), data)

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        if type(chunk) is RelayedChunk:
            return self._relay(chunk)
        out: list[bytes] = []
        if not self._started:
            self._started = True
            message: dict[str, Any] = {
                "id": message_id(),
                "type": "message",
                "role": "assistant",
                "model": self._model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0},
            }
            out.append(_event("message_start", {"type": "message_start", "message": message}))
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
            delta = choice.get("delta") or {}
            thinking = reasoning(delta)
            if thinking:
                self._open("thinking", -1, {"type": "thinking", "thinking": "", "signature": ""}, out)
                self._delta({"type": "thinking_delta", "thinking": thinking}, out)
            if delta.get("content"):
                self._open("text", -1, {"type": "text", "text": ""}, out)
                self._delta({"type": "text_delta", "text": delta["content"]}, out)
            for call in delta.get("tool_calls") or ():
                function = call.get("function") or {}
                number = call.get("index", 0)
                if self._block != ("tool", number):
                    block: dict[str, Any] = {
                        "type": "tool_use",
                        "id": call.get("id") or f"toolu_{number}",
                        "name": function.get("name") or "",
                        "input": {},
                    }
                    self._open("tool", number, block, out)
                if function.get("arguments"):
                    self._delta({"type": "input_json_delta", "partial_json": function["arguments"]}, out)
        return b"".join(out)

    def end(self) -> bytes:
        if self._relayed:  # the upstream's own message_delta and message_stop went by
            return b""
        out: list[bytes] = []
        self._close(out)
        usage = _usage(self._usage)
        delta = {"stop_reason": _STOP_REASONS.get(self._finish or "stop", "end_turn"), "stop_sequence": None}
        out.append(_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
        out.append(_event("message_stop", {"type": "message_stop"}))
        return b"".join(out)

    def error(self, message: str) -> bytes:
        return _event("error", {"type": "error", "error": {"type": "api_error", "message": message}})


class Messages(Surface):
    """``POST /v1/messages``; to a Messages upstream, the request goes as it came (``Native``) with its
    ``anthropic-beta``/``anthropic-version`` headers, and the answer comes back as it came."""

    forwards = frozenset({b"anthropic-beta", b"anthropic-version"})

    def parse(self, body: dict[str, Any]) -> Parsed:
        model = check_model(body)
        stream = check_stream(body)
        internal, dropped = internal_request(body)
        parsed = chat_request(model, stream, internal)
        parsed.dropped = tuple(dropped)
        parsed.native = Native("anthropic", body)
        return parsed

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        if type(result) is Relayed:
            return orjson.dumps({**result.native, "model": parsed.echo})
        choice = first_choice(result)
        message = choice.get("message") or {}
        content: list[dict[str, Any]] = []
        thinking = reasoning(message)
        if thinking:
            content.append({"type": "thinking", "thinking": thinking, "signature": ""})
        if message.get("content"):
            content.append({"type": "text", "text": message["content"]})
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            content.append(
                {
                    "type": "tool_use",
                    "id": call.get("id") or f"toolu_{len(content)}",
                    "name": function.get("name", ""),
                    "input": _input(function.get("arguments")),
                }
            )
        answer = {
            "id": message_id(),
            "type": "message",
            "role": "assistant",
            "model": parsed.echo,
            "content": content,
            "stop_reason": _STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"),
            "stop_sequence": None,
            "usage": _usage(result.get("usage")),
        }
        return orjson.dumps(answer)

    def stream(self, parsed: Parsed, candidate: str) -> StreamRender:
        return _Events(parsed.echo)

    def error(self, failure: Failure) -> bytes:
        return error_body(failure.status, failure.message)


async def count_tokens(services: RequestServices, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/messages/count_tokens``: the gateway's own estimate (the preflight's), not a tokenizer."""
    plan = services.plan
    headers = [plan.plan_header]
    try:
        body = parse_object(await read_body(scope, receive, plan.server.max_body_bytes))
        caller = caller_of(scope)
        caller.check(resolve(plan, check_model(body), caller).label)
        internal, _ = internal_request(body, counting=True)
        needs = needs_of(internal, "chat", plan.preflight)
    except ClientGone:
        return
    except Exception as exc:  # a refusal; anything else is a bug, logged and answered 500
        failure = failure_of(exc, plan)
        headers.extend(failure.headers)
        await send_json(send, failure.status, error_body(failure.status, failure.message), headers)
        return
    tokens = needs.prompt_tokens + needs.images * plan.preflight.image_reserve_tokens
    await send_json(send, 200, orjson.dumps({"input_tokens": tokens}), headers)
