"""Anthropic Messages, the caller's side: what the surface picks per request (the upstream side, for the
adapter: ``wire.anthropic``). The rules both sides share live here (image sources <-> URLs, a tool call
as a ``tool_use`` block).

A request as the internal (Chat-shaped) form, and the names of what that form cannot carry
(``X-Interlock-Dropped``): ``system`` becomes the first message; content blocks map one to one (``text`` ->
text parts, ``image`` -> an ``image_url`` part, an assistant's ``tool_use`` -> ``tool_calls``, a user's
``tool_result`` -> a ``tool`` message placed before the rest of that turn, ``thinking`` -> the turn's
``reasoning_content``, the field llama-server and vLLM read back into the prompt); ``role: "system"`` turns
inside ``messages`` stay system turns where they stand; ``tools`` -> function tools (``strict`` kept;
``defer_loading: true`` ones left out, as Anthropic leaves them out of the model's prompt, until a
``tool_reference`` in a tool result loads them); ``tool_choice`` -> auto/required/named/none
(``disable_parallel_tool_use`` -> ``parallel_tool_calls: false``); ``thinking``'s type -> ``think``. Named,
never silently lost: ``cache_control``, top-level fields the form has no place for (``metadata``,
``output_config``, ``context_management``, ...), server tools (``tools.web_search_20250305``), other keys of a
tool (``tools.input_examples``), of ``thinking`` (``thinking.display``, ``thinking.budget_tokens``), of
``tool_choice`` and of a content block (``text.citations``), ``redacted_thinking`` blocks, and tool-result
parts a ``tool`` message cannot hold (``tool_result.image``).

An answer as ``content`` blocks and a stream as Anthropic's event sequence (``Events``:
``message_start``, ``content_block_start``/``_delta``/``_stop`` per block, ``message_delta`` with the stop
reason and output tokens, ``message_stop``; a stream broken after it started ends with an ``error``
event). Errors are ``{"type":"error","error":{"type","message"}}``, the type by status (``ERROR_TYPES``:
the one table, read the other way for an upstream's error event).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.base.asgi import Header, json_type
from interlock.runtime.base.errors import CannotServe, InvalidRequest
from interlock.runtime.wire.openai_chat import (
    NO_EXTRAS,
    TranslatedEvents,
    cached_tokens,
    call_arguments,
    first_choice,
    named,
    reasoning,
)
from interlock.runtime.wire.sse import SSE_HEADERS, frame

PING = frame("ping", b'{"type": "ping"}')  # Anthropic's keepalive event, as its API sends it
ERROR_TYPES = {  # an HTTP status -> Anthropic's error type (an unlisted one: by its class, _error_type)
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def _error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def error_body(status: int, message: str, code: str | None = None, gateway_code: str | None = None) -> bytes:
    """Anthropic's error body for an answer of ``status``; an upstream's own error ``code`` (and interlock's
    class beside it) as extra keys of its ``error``, which Anthropic's shape has no place for."""
    error = {"type": _error_type(status), "message": message}
    if gateway_code is not None and code is not None:
        error["code"], error["interlock_code"] = code, gateway_code
    return orjson.dumps({"type": "error", "error": error})


def source_url(source: Any) -> str | None:
    """The URL of an image block's ``source`` (a ``data:`` URL for base64 data), or None when it is
    neither a base64 nor a url source."""
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return str(source["url"])
    return None


def url_source(url: str) -> dict[str, Any]:
    """The image block ``source`` for ``url``: base64 for a ``data:`` URL, else a url source."""
    if url.startswith("data:"):
        head, _, data = url.partition(",")
        media = head[5:].split(";")[0] or "image/png"
        return {"type": "base64", "media_type": media, "data": data}
    return {"type": "url", "url": url}


def text_of(content: Any) -> str:
    """The text of a string or of the ``text`` blocks (or parts) of a list, joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            text
            for p in content
            if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(text := p.get("text"), str)
        )
    return ""


def openai_call(block: Mapping[str, Any]) -> dict[str, Any]:
    """A ``tool_use`` block as an OpenAI tool call (its ``input`` as a JSON string)."""
    function = {"name": block.get("name", ""), "arguments": orjson.dumps(block.get("input") or {}).decode()}
    return {"id": block.get("id", ""), "type": "function", "function": function}


# -- the request ----------------------------------------------------------------------------------


def _checked_blocks(content: Any, where: str) -> list[dict[str, Any]]:
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


# the keys of each content block the internal form carries (a thinking block's ``signature`` means
# something to Anthropic only); any other key of a block is named (``text.citations``)
_BLOCK_READ = {
    "text": frozenset({"type", "text", "cache_control"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
}


def _unread(block: dict[str, Any], kind: str, dropped: list[str]) -> None:
    read = _BLOCK_READ.get(kind)
    if read is not None:
        for key in block:
            if key not in read:
                named(f"{kind}.{key}", dropped)


def _result_text(content: Any, dropped: list[str]) -> str:
    """A ``tool_result``'s content as the text a ``tool`` message holds: its text parts; a
    ``tool_reference`` (tool search) loads its tool (``_loaded``) and says nothing; any other part
    (an image, a document) has no place in a tool message and is named (``tool_result.image``)."""
    if isinstance(content, list):
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in ("text", "tool_reference"):
                named(f"tool_result.{kind}", dropped)
    return text_of(content)


def _turn(index: int, message: Any, dropped: list[str]) -> list[dict[str, Any]]:
    """One Anthropic message as internal messages (tool results first, as ``tool`` messages)."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise InvalidRequest(f"`{where}` must be an object, not {json_type(message)}")
    role = message.get("role")
    if role == "system":  # mid-conversation system turns (Claude Code's beta): kept where they are
        return [
            {
                "role": "system",
                "content": text_of(_checked_blocks(message.get("content"), f"{where}.content")),
            }
        ]
    if role not in ("user", "assistant"):
        raise InvalidRequest(f"`{where}.role` must be `user`, `assistant` or `system`")
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for number, block in enumerate(_checked_blocks(message.get("content"), f"{where}.content")):
        kind = block["type"]
        _unread(block, kind, dropped)
        if kind == "text":
            text = block.get("text", "")
            if not isinstance(text, str):
                raise InvalidRequest(f"`{where}.content[{number}].text` must be a string")
            parts.append({"type": "text", "text": text})
        elif kind == "image":
            parts.append(_image(block, f"{where}.content[{number}]"))
        elif kind == "tool_use" and role == "assistant":
            calls.append(openai_call(block))
        elif kind == "tool_result" and role == "user":
            text = _result_text(block.get("content"), dropped)
            if block.get("is_error"):
                text = f"error: {text}"
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id", ""), "content": text})
        elif kind == "redacted_thinking" and role == "assistant":
            named("redacted_thinking", dropped)  # encrypted: only Anthropic reads it
        elif kind == "thinking" and role == "assistant":
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
            turn["reasoning_content"] = "\n".join(reasoning)
        out.append(turn)
    return out


# what a client tool may carry besides ``name``: read into the function tool, or handled where named
_TOOL_READ = frozenset(
    {"name", "type", "description", "input_schema", "strict", "defer_loading", "cache_control"}
)


def _tools(tools: Any, loaded: frozenset[str], dropped: list[str]) -> list[dict[str, Any]]:
    """Function tools for the client tools. Server tools (a ``type`` such as ``web_search_20250305``, run
    by Anthropic) are left out and named in ``dropped`` (``tools.web_search_20250305``). A tool with
    ``defer_loading: true`` is left out as Anthropic leaves it out of the model's prompt, until a
    ``tool_reference`` block in a tool result loads it (``loaded``). ``strict`` goes on as the
    function's; any other key of a tool is named (``tools.input_examples``)."""
    if not isinstance(tools, list):
        raise InvalidRequest("`tools` must be an array")
    out = []
    for number, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise InvalidRequest(f"`tools[{number}].name` must be a string")
        kind = tool.get("type")
        if kind not in (None, "custom"):
            named(f"tools.{kind}", dropped)
            continue
        for key in tool:
            if key not in _TOOL_READ:
                named(f"tools.{key}", dropped)
        if tool.get("defer_loading") is True and tool["name"] not in loaded:
            continue
        function: dict[str, Any] = {"name": tool["name"], "parameters": tool.get("input_schema") or {}}
        if tool.get("description"):
            function["description"] = tool["description"]
        if isinstance(tool.get("strict"), bool):
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


def _loaded(messages: list[Any]) -> frozenset[str]:
    """The tools the ``tool_reference`` blocks of the conversation's tool results load (tool search)."""
    names: set[str] = set()
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            inner = (
                block.get("content")
                if isinstance(block, dict) and block.get("type") == "tool_result"
                else None
            )
            for part in inner if isinstance(inner, list) else ():
                if isinstance(part, dict) and part.get("type") == "tool_reference":
                    names.add(str(part.get("tool_name")))
    return frozenset(names)


def _think(thinking: Any, internal: dict[str, Any], dropped: list[str]) -> None:
    """``thinking``'s type as ``think`` (``adaptive``: the model decides, as it does when not told); its
    other keys (``budget_tokens``, ``display``) have no counterpart upstream and are named."""
    if not isinstance(thinking, dict):
        return
    kind = thinking.get("type")
    if kind == "enabled":
        internal["think"] = True
    elif kind == "disabled":
        internal["think"] = False
    for key in thinking:
        if key != "type":
            named(f"thinking.{key}", dropped)


def _openai_tool_choice(choice: Any) -> Any:
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


def _end_on_the_user(messages: list[dict[str, Any]]) -> None:
    """System turns after the conversation's last user turn go just before it, so the conversation ends
    on the user's words. Claude Code 2.1.337 ends its requests with its environment as such a turn; a
    chat template renders it last, right before the answer, and a small model then writes the system
    text back instead of answering (SmolLM2-135M: 512 tokens of the environment block, where with the
    turn moved, as llama-server's own /v1/messages reads it, it answers in 17)."""
    end = len(messages)
    while end > 0 and messages[end - 1]["role"] == "system":
        end -= 1
    if end > 1 and messages[end - 1]["role"] == "user":
        trailing = messages[end:]
        del messages[end:]
        messages[end - 1 : end - 1] = trailing


def internal_request(
    body: dict[str, Any], *, counting: bool = False
) -> tuple[dict[str, Any], list[str], Mapping[str, Any]]:
    """The internal (Chat-shaped) form of a Messages request (``counting``: max_tokens optional), the
    names of what it cannot carry, and its extras (none: a Messages answer needs nothing kept)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("`messages` must be a non-empty array")
    internal: dict[str, Any] = {"model": body.get("model"), "messages": []}
    dropped: list[str] = []
    system = body.get("system")
    if system:
        internal["messages"].append({"role": "system", "content": text_of(_checked_blocks(system, "system"))})
    for index, message in enumerate(messages):
        internal["messages"].extend(_turn(index, message, dropped))
    if internal["messages"][-1]["role"] == "system":
        _end_on_the_user(internal["messages"])
    max_tokens = body.get("max_tokens")
    if not counting and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise InvalidRequest("`max_tokens` is required: a positive integer")
    if max_tokens is not None:
        internal["max_tokens"] = max_tokens
    if body.get("stop_sequences"):
        internal["stop"] = body["stop_sequences"]
    for key in ("temperature", "top_p", "top_k"):
        if body.get(key) is not None:
            internal[key] = body[key]
    if body.get("tools"):
        tools = _tools(body["tools"], _loaded(messages), dropped)
        if tools:
            internal["tools"] = tools
            choice = body.get("tool_choice")
            if choice is not None:
                internal["tool_choice"] = _openai_tool_choice(choice)
                if choice.get("disable_parallel_tool_use") is True:
                    internal["parallel_tool_calls"] = False
                for key in choice:
                    if key not in ("type", "name", "disable_parallel_tool_use"):
                        named(f"tool_choice.{key}", dropped)
    _think(body.get("thinking"), internal, dropped)
    for key, value in body.items():
        if key not in _READ and value is not None:
            dropped.append(key)
    if _cache_marks(body):
        dropped.append("cache_control")
    return internal, dropped, NO_EXTRAS


# -- the answer, its events -------------------------------------------------------------------------


STOP_REASONS = {  # OpenAI's finish_reason -> Anthropic's stop_reason
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}


def message_id() -> str:
    return f"msg_{random.getrandbits(96):024x}"


def tool_use(call: Mapping[str, Any], number: int, *, strict: bool) -> dict[str, Any]:
    """An OpenAI tool call as a ``tool_use`` block, its JSON ``arguments`` as the ``input`` object. Not
    JSON: ``strict`` (a request for an Anthropic upstream) raises CannotServe, else (a model's broken
    arguments, for a Messages client) the input is empty."""
    function = call.get("function") or {}
    try:
        arguments = call_arguments(function.get("arguments"))
    except ValueError:
        if strict:
            raise CannotServe(
                "a tool call's arguments are not JSON; Anthropic takes objects", param="messages"
            ) from None
        arguments = {}
    return {
        "type": "tool_use",
        "id": call.get("id") or f"toolu_{number}",
        "name": function.get("name", ""),
        "input": arguments,
    }


def usage_of(usage: Any) -> dict[str, int]:
    """Anthropic's usage for OpenAI's: the cached part of the prompt is ``cache_read_input_tokens``,
    not counted again in ``input_tokens`` (Anthropic counts them apart, OpenAI in the prompt)."""
    usage = usage if isinstance(usage, Mapping) else {}
    cached = cached_tokens(usage)
    out = {
        "input_tokens": (usage.get("prompt_tokens") or 0) - cached,
        "output_tokens": usage.get("completion_tokens") or 0,
    }
    if cached:
        out["cache_read_input_tokens"] = cached
    return out


def answer_of(result: Mapping[str, Any], model: Any) -> dict[str, Any]:
    """A ``chat.completion`` as a Messages answer naming ``model``."""
    choice = first_choice(result)
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    thinking = reasoning(message)
    if thinking:
        content.append({"type": "thinking", "thinking": thinking, "signature": ""})
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        content.append(tool_use(call, len(content), strict=False))
    return {
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"),
        "stop_sequence": None,
        "usage": usage_of(result.get("usage")),
    }


# -- the stream: OpenAI chunks as Anthropic's events -----------------------------------------------


def _event(name: str, data: dict[str, Any]) -> bytes:
    return frame(name, orjson.dumps(data))


class Events(TranslatedEvents):
    """Anthropic's event sequence from OpenAI chunks: one open block at a time (thinking, text, a tool);
    or, from a Messages upstream that got the caller's own request, its events as they came (the model
    named in ``message_start`` replaced by the caller's)."""

    __slots__ = ("_block", "_index")
    headers: tuple[Header, ...] = SSE_HEADERS

    def __init__(self, model: str | None) -> None:
        super().__init__(model)
        self._block: tuple[str, int] | None = None  # (kind, the OpenAI tool-call index) of the open block
        self._index = -1

    def keepalive(self) -> bytes:
        """Anthropic's own ``ping`` event, which its SDKs (and Claude Code) read past; sent before
        ``message_start`` too, which names the model that answers and is not known yet."""
        return PING

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

    def _relay(self, event: dict[str, Any], raw: bytes) -> bytes:
        kind = event.get("type")
        if kind == "message_start" and isinstance(message := event.get("message"), dict):
            raw = orjson.dumps({**event, "message": {**message, "model": self._model}})
        return frame(str(kind), raw)

    def _start(self, out: list[bytes]) -> None:
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

    def _translate(self, delta: dict[str, Any], out: list[bytes]) -> None:
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

    def _end(self, out: list[bytes]) -> None:
        usage = usage_of(self._usage)
        delta = {
            "stop_reason": STOP_REASONS.get(self._finish or "stop", "end_turn"),
            "stop_sequence": None,
        }
        out.append(_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
        out.append(_event("message_stop", {"type": "message_stop"}))

    def error(self, message: str) -> bytes:
        return _event("error", {"type": "error", "error": {"type": "api_error", "message": message}})
