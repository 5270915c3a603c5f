"""OpenAI Responses, both sides. The client side: a Responses request as the internal (Chat-shaped)
form, a ``chat.completion`` as a ``response`` object with its output items, and the stream's typed
events (``Events``, which build the same items); what each field becomes is in ``surfaces/responses``'
docstring and docs/surfaces.md. The upstream side, for an OpenAI-compatible provider declared
``responses: true``: the caller's own request relayed to ``{base_url}/responses`` as it came, its
answer and events read for metering (``completion_of``, ``EventDecoder``) and given back whole.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.base.asgi import Header, json_object, json_type
from interlock.runtime.base.errors import InvalidRequest, MalformedResponse, ProtocolFailure
from interlock.runtime.wire.base import Endpoint, RelayedChunk
from interlock.runtime.wire.openai_chat import (
    NO_EXTRAS,
    TranslatedEvents,
    cached_tokens,
    chunk_head,
    completion_id,
    delta_chunk,
    first_choice,
    named,
    reasoning,
)
from interlock.runtime.wire.sse import SSE_HEADERS, SSEEvents, frame


def new_id(prefix: str) -> str:
    return f"{prefix}_{random.getrandbits(96):024x}"


# -- requests --------------------------------------------------------------------------------------


def _part(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text", "text"):
        text = part.get("text", "")
        if not isinstance(text, str):
            raise InvalidRequest(f"`{where}.text` must be a string", param=where)
        return {"type": "text", "text": text}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        return {"type": "image_url", "image_url": {"url": part["image_url"]}}
    raise InvalidRequest(f"`{where}`: a content part of type {kind!r} is not supported", param=where)


def _content(content: Any, where: str) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest(f"`{where}` must be a string or an array of parts", param=where)
    parts = [_part(part, f"{where}[{n}]") for n, part in enumerate(content)]
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


# call items of hosted tools (and their outputs): the provider ran them; a chat upstream cannot read them
_HOSTED_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "computer_call",
        "computer_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "tool_search_call",
        "tool_search_output",
        "compaction",
    }
)


def _messages(items: Any, dropped: list[str]) -> list[dict[str, Any]]:
    """The internal messages of ``input``; the kinds of items a chat upstream cannot read are left out
    and named in ``dropped`` (``input.web_search_call``)."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise InvalidRequest("`input` must be a string or a non-empty array of items", param="input")
    out: list[dict[str, Any]] = []
    reasoning: list[str] = []  # the summaries of reasoning items, for the assistant turn they precede
    for n, item in enumerate(items):
        where = f"input[{n}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"`{where}` must be an object, not {json_type(item)}", param=where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise InvalidRequest(
                    f"`{where}.role` must be user, assistant, system or developer", param=where
                )
            out.append({"role": role, "content": _content(item.get("content"), f"{where}.content")})
            _reasoned(out[-1], reasoning, dropped)
        elif kind == "function_call":
            call = {
                "id": item.get("call_id", ""),
                "type": "function",
                "function": {"name": item.get("name", ""), "arguments": item.get("arguments") or "{}"},
            }
            previous = out[-1] if out else None
            if previous is not None and previous["role"] == "assistant" and "tool_calls" in previous:
                previous["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
            _reasoned(out[-1], reasoning, dropped)
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else orjson.dumps(output).decode()
            out.append({"role": "tool", "tool_call_id": item.get("call_id", ""), "content": text})
        elif kind == "reasoning":
            thought = _reasoning_item(item, dropped)
            if thought:
                reasoning.append(thought)
        elif kind in _HOSTED_ITEMS:
            named(f"input.{kind}", dropped)
        else:
            raise InvalidRequest(f"`{where}`: an item of type {kind!r} is not supported", param=where)
    if reasoning:  # no assistant turn after it to carry it
        named("input.reasoning", dropped)
    return out


def _reasoned(message: dict[str, Any], reasoning: list[str], dropped: list[str]) -> None:
    """The reasoning items before an assistant turn become its ``reasoning`` (before another turn, they
    have no place: named ``input.reasoning``)."""
    if not reasoning:
        return
    if message["role"] == "assistant":
        message["reasoning_content"] = "\n".join(reasoning)
    else:
        named("input.reasoning", dropped)
    reasoning.clear()


def _reasoning_item(item: dict[str, Any], dropped: list[str]) -> str:
    """The text of a reasoning item's summary (what this gateway's answers put there): the turn's
    ``reasoning``, as a chat upstream takes it; its encrypted content only the provider that wrote it
    reads (named ``input.reasoning.encrypted_content``)."""
    if item.get("encrypted_content"):
        named("input.reasoning.encrypted_content", dropped)
    summary = item.get("summary")
    texts = [
        part["text"]
        for part in (summary if isinstance(summary, list) else ())
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    ]
    return "\n".join(texts)


_FUNCTION_READ = frozenset({"type", "name", "description", "parameters", "strict"})


def _function(tool: dict[str, Any], dropped: list[str]) -> dict[str, Any]:
    for key in tool:
        if key not in _FUNCTION_READ:
            named(f"tools.{key}", dropped)
    function = {
        k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None
    }
    return {"type": "function", "function": function}


def _tools(tools: Any, dropped: list[str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Chat's function tools for Responses ``tools``, and the namespace of each tool that came from a
    ``namespace`` group (flattened into its function tools). Hosted tools (``web_search``,
    ``file_search``, ``code_interpreter``, ``image_generation``, ``local_shell``, ``custom``, ...) run at
    the provider, which a chat upstream is not: they are left out and named (``tools.web_search``)."""
    if not isinstance(tools, list):
        raise InvalidRequest("`tools` must be an array", param="tools")
    out: list[dict[str, Any]] = []
    namespaces: dict[str, str] = {}
    for n, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if not isinstance(kind, str):
            raise InvalidRequest(f"`tools[{n}]` must be an object with a `type`", param="tools")
        if kind == "function":
            if not isinstance(tool.get("name"), str):
                raise InvalidRequest(f"`tools[{n}]`: a function tool needs a `name`", param="tools")
            out.append(_function(tool, dropped))
        elif kind == "namespace" and isinstance(tool.get("tools"), list):
            group = tool.get("name") if isinstance(tool.get("name"), str) else ""
            if tool.get("description"):  # flattened into its functions: the group's own words go
                named("tools.namespace.description", dropped)
            for inner in tool["tools"]:
                if not isinstance(inner, dict) or inner.get("type") != "function":
                    kind = inner.get("type") if isinstance(inner, dict) else None
                    named(f"tools.{group}.{kind}" if isinstance(kind, str) else f"tools.{group}", dropped)
                elif isinstance(inner.get("name"), str):
                    out.append(_function(inner, dropped))
                    namespaces[inner["name"]] = group
        else:
            named(f"tools.{kind}", dropped)
    return out, namespaces


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise InvalidRequest("`tool_choice` must be auto, none, required or a function", param="tool_choice")


def _response_format(text: Any) -> Any:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        return None
    kind = fmt.get("type")
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    return None


# the request fields the internal form carries (or that need nothing carried: ``store: false``)
_READ = frozenset(
    {
        "model",
        "stream",
        "input",
        "instructions",
        "max_output_tokens",
        "temperature",
        "top_p",
        "parallel_tool_calls",
        "user",
        "tools",
        "tool_choice",
        "reasoning",
        "text",
        "previous_response_id",
    }
)


def internal_request(body: dict[str, Any]) -> tuple[dict[str, Any], list[str], Mapping[str, Any]]:
    """The internal form of a Responses request, the names of what it cannot carry, and its extras:
    ``namespaces``, the group of each tool flattened out of a ``namespace`` tool (when there is one)."""
    if body.get("previous_response_id") is not None:
        raise InvalidRequest(
            "`previous_response_id` is not supported: this gateway is stateless and stores no responses; "
            "send the whole conversation as `input` items",
            param="previous_response_id",
        )
    dropped: list[str] = []
    messages = _messages(body.get("input"), dropped)
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.insert(0, {"role": "system", "content": instructions})
    internal: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    limit = body.get("max_output_tokens")
    if limit is not None:
        internal["max_tokens"] = limit
    for key in ("temperature", "top_p", "parallel_tool_calls", "user"):
        if body.get(key) is not None:
            internal[key] = body[key]
    namespaces: dict[str, str] = {}
    if body.get("tools"):
        tools, namespaces = _tools(body["tools"], dropped)
        if tools:
            internal["tools"] = tools
            if body.get("tool_choice") is not None:
                internal["tool_choice"] = _tool_choice(body["tool_choice"])
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict):
        if reasoning.get("effort") is not None:
            internal["reasoning_effort"] = reasoning["effort"]
        for key in reasoning:  # the summary: what the answer's reasoning item holds anyway
            if key not in ("effort", "summary", "generate_summary"):
                named(f"reasoning.{key}", dropped)
    text = body.get("text")
    for key in text if isinstance(text, dict) else ():
        if key != "format":
            named(f"text.{key}", dropped)
    response_format = _response_format(text)
    if response_format is not None:
        internal["response_format"] = response_format
    for key, value in body.items():
        if key not in _READ and value is not None and not (key == "store" and value is False):
            dropped.append(key)
    return internal, dropped, {"namespaces": namespaces} if namespaces else NO_EXTRAS


# -- answers ---------------------------------------------------------------------------------------


def _usage(usage: Any) -> dict[str, Any]:
    usage = usage if isinstance(usage, dict) else {}
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached_tokens(usage), "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def reasoning_item(item_id: str, text: str | None) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": text}] if text is not None else []
    return {"type": "reasoning", "id": item_id, "summary": summary}


def call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str, namespaces: Mapping[str, str]
) -> dict[str, Any]:
    item = {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }
    namespace = namespaces.get(name)
    if namespace:
        item["namespace"] = namespace
    return item


def response(
    response_id: str,
    model: str | None,
    output: list[dict[str, Any]],
    status: str,
    finish: str | None,
    usage: Any,
) -> dict[str, Any]:
    incomplete = status == "completed" and finish == "length"
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if incomplete else status,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "store": False,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": _usage(usage) if usage is not None or status == "completed" else None,
        "metadata": {},
    }


def answer_of(result: Mapping[str, Any], model: Any, namespaces: Mapping[str, str]) -> dict[str, Any]:
    """A ``chat.completion`` as a ``response`` object naming ``model`` (``namespaces``: the group of each
    tool flattened out of a ``namespace`` tool, given back on its calls)."""
    choice = first_choice(result)
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    thinking = reasoning(message)
    if thinking:
        output.append(reasoning_item(new_id("rs"), thinking))
    if message.get("content"):
        output.append(message_item(new_id("msg"), message["content"], "completed"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = function.get("arguments")
        arguments = arguments if isinstance(arguments, str) else orjson.dumps(arguments or {}).decode()
        output.append(
            call_item(
                new_id("fc"),
                call.get("id") or new_id("call"),
                function.get("name", ""),
                arguments,
                "completed",
                namespaces,
            )
        )
    finish = choice.get("finish_reason")
    return response(new_id("resp"), model, output, "completed", finish, result.get("usage"))


# -- the upstream side: a Responses caller's own request for an upstream that serves /responses ------


def chat_usage(usage: Any) -> dict[str, Any] | None:
    """A Responses ``usage`` as Chat's (``_usage``: the other way; the cached input is in both); None when
    the upstream gave none (the gateway's estimate is metered then, not zeros)."""
    if not isinstance(usage, Mapping):
        return None
    prompt, completion = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if isinstance(cached, int) and cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def _finish(response: Mapping[str, Any], called: bool) -> str:
    if response.get("status") == "incomplete":
        return "length"
    return "tool_calls" if called else "stop"


def completion_of(answer: Any, model: str) -> dict[str, Any]:
    """A ``response`` object as a ``chat.completion`` (for metering and for callers of other formats):
    its message items' text, its function calls, its usage."""
    if not isinstance(answer, dict) or not isinstance(answer.get("output"), list):
        raise MalformedResponse("Responses answer has no output list")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in answer["output"]:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
        elif kind == "function_call":
            function = {"name": item.get("name", ""), "arguments": item.get("arguments") or "{}"}
            calls.append({"id": item.get("call_id", ""), "type": "function", "function": function})
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    completion: dict[str, Any] = {
        "id": completion_id(),
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(answer, bool(calls))}],
    }
    usage = chat_usage(answer.get("usage"))
    if usage is not None:
        completion["usage"] = usage
    return completion


# the output items with a text part: their part events' and text events' names, the part's index key,
# the empty part, and what the text events carry beside the text
_TEXT_ITEMS: dict[str, tuple[str, str, str, dict[str, Any], dict[str, Any]]] = {
    "reasoning": (
        "response.reasoning_summary_part",
        "response.reasoning_summary_text",
        "summary_index",
        {"type": "summary_text", "text": ""},
        {},
    ),
    "message": (
        "response.content_part",
        "response.output_text",
        "content_index",
        {"type": "output_text", "text": "", "annotations": []},
        {"logprobs": []},
    ),
}


class Events(TranslatedEvents):
    """The surface's stream: typed Responses events from OpenAI chunks, one open output item at a time;
    or, from a Responses upstream that got the caller's own request, its events as they came."""

    __slots__ = ("_call", "_id", "_item", "_namespaces", "_output", "_seq", "_text")
    headers: tuple[Header, ...] = SSE_HEADERS

    def __init__(self, model: str | None, namespaces: dict[str, str]) -> None:
        super().__init__(model)
        self._namespaces = namespaces
        self._id = new_id("resp")
        self._seq = 0
        self._output: list[dict[str, Any]] = []
        self._item: dict[str, Any] | None = None  # the open item: a message or a function call
        self._text = ""  # the open message's text so far
        self._call: int | None = None  # the open function call's index in the chunks

    def _event(self, kind: str, out: list[bytes], **data: Any) -> None:
        data = {"type": kind, "sequence_number": self._seq, **data}
        self._seq += 1
        out.append(frame(kind, orjson.dumps(data)))

    def _open(self, item: dict[str, Any], out: list[bytes], call: int | None = None) -> None:
        self._close(out)
        self._item, self._text, self._call = item, "", call
        index = len(self._output)
        self._event("response.output_item.added", out, output_index=index, item=item)
        text = _TEXT_ITEMS.get(item["type"])
        if text is not None:
            parts, _, key, part, _ = text
            self._event(f"{parts}.added", out, item_id=item["id"], output_index=index, **{key: 0}, part=part)

    def _close(self, out: list[bytes]) -> None:
        item, self._item = self._item, None
        if item is None:
            return
        index = len(self._output)
        where = {"item_id": item["id"], "output_index": index}
        kind = _TEXT_ITEMS.get(item["type"])
        if kind is None:  # a function call
            item["status"] = "completed"
            self._event("response.function_call_arguments.done", out, **where, arguments=item["arguments"])
        else:
            parts, texts, key, part, extra = kind
            text, where[key] = self._text, 0
            self._event(f"{texts}.done", out, **where, text=text, **extra)
            self._event(f"{parts}.done", out, **where, part={**part, "text": text})
            if item["type"] == "reasoning":
                item = reasoning_item(item["id"], text)
            else:
                item = message_item(item["id"], text, "completed")
        self._event("response.output_item.done", out, output_index=index, item=item)
        self._output.append(item)

    def _said(self, kind: str, text: str, out: list[bytes]) -> None:
        """A delta of the open reasoning or message item's text (the item opened first if another is)."""
        item = self._item
        if item is None or item["type"] != kind:
            if kind == "reasoning":
                item = reasoning_item(new_id("rs"), None)
            else:
                item = message_item(new_id("msg"), "", "in_progress")
            self._open(item, out)
        self._text += text
        _, texts, key, _, extra = _TEXT_ITEMS[kind]
        where = {"item_id": item["id"], "output_index": len(self._output), key: 0}
        self._event(f"{texts}.delta", out, **where, delta=text, **extra)

    def _relay(self, event: dict[str, Any], raw: bytes) -> bytes:
        """A Responses upstream's event as it came; those that hold the ``response`` (created,
        in_progress, completed, ...) name the caller's model."""
        response = event.get("response")
        if isinstance(response, dict) and "model" in response:
            raw = orjson.dumps({**event, "response": {**response, "model": self._model}})
        return frame(str(event.get("type")), raw)

    def _start(self, out: list[bytes]) -> None:
        started = response(self._id, self._model, [], "in_progress", None, None)
        self._event("response.created", out, response=started)
        self._event("response.in_progress", out, response=started)

    def _translate(self, delta: dict[str, Any], out: list[bytes]) -> None:
        thinking = reasoning(delta)
        if thinking:
            self._said("reasoning", thinking, out)
        text = delta.get("content")
        if text:
            self._said("message", text, out)
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            number = call.get("index", 0)
            if self._item is None or self._call != number:
                call_id = call.get("id") or new_id("call")
                name = function.get("name") or ""
                item = call_item(new_id("fc"), call_id, name, "", "in_progress", self._namespaces)
                self._open(item, out, number)
            assert self._item is not None
            if function.get("arguments"):
                self._item["arguments"] += function["arguments"]
                self._event(
                    "response.function_call_arguments.delta",
                    out,
                    item_id=self._item["id"],
                    output_index=len(self._output),
                    delta=function["arguments"],
                )

    def _end(self, out: list[bytes]) -> None:
        done = response(self._id, self._model, self._output, "completed", self._finish, self._usage)
        self._event("response.completed", out, response=done)

    def error(self, message: str) -> bytes:
        out: list[bytes] = []
        self._event("error", out, code="stream_aborted", message=message, param=None)
        return b"".join(out)


_ENDS = frozenset({"response.completed", "response.incomplete"})


class EventDecoder(SSEEvents):
    """A Responses upstream's typed events, each as one ``RelayedChunk`` holding the event as it came (for
    the Responses caller) and its ``chat.completion.chunk`` (text, reasoning and call deltas; the finish
    reason and usage at ``response.completed``) for metering. Complete only at ``response.completed`` or
    ``response.incomplete``; ``response.failed`` and ``error`` events raise the matching UpstreamError."""

    __slots__ = ("_calls", "_head", "done")

    def __init__(self, model: str, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        self._head = chunk_head(model)
        self._calls: dict[str, int] = {}  # a function call item's id -> its tool call index
        self.done = False

    def end(self, out: deque[dict[str, Any]]) -> None:
        self.flush(out)
        if not self.done:
            raise ProtocolFailure("stream ended before response.completed")

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return delta_chunk(self._head, delta, finish)

    def _dispatch(self, data: bytes, out: deque[dict[str, Any]]) -> None:
        event = json_object(data, MalformedResponse, "stream event")
        kind = event.get("type")
        chunk: dict[str, Any] = {**self._head, "choices": []}
        if kind == "response.created":
            chunk = self._chunk({"role": "assistant", "content": ""})
        elif kind == "response.output_text.delta":
            chunk = self._chunk({"content": str(event.get("delta", ""))})
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            chunk = self._chunk({"reasoning": str(event.get("delta", ""))})
        elif kind == "response.output_item.added":
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                number = self._calls[str(item.get("id"))] = len(self._calls)
                function = {"name": item.get("name", ""), "arguments": ""}
                call = {
                    "index": number,
                    "id": item.get("call_id", ""),
                    "type": "function",
                    "function": function,
                }
                chunk = self._chunk({"tool_calls": [call]})
        elif kind == "response.function_call_arguments.delta":
            number = self._calls.get(str(event.get("item_id")), 0)
            call = {"index": number, "function": {"arguments": str(event.get("delta", ""))}}
            chunk = self._chunk({"tool_calls": [call]})
        elif kind in _ENDS:
            response = event.get("response")
            response = response if isinstance(response, dict) else {}
            chunk = self._chunk({}, _finish(response, bool(self._calls)))
            usage = chat_usage(response.get("usage"))
            if usage is not None:
                chunk["usage"] = usage
            self.done = True
        elif kind == "response.failed":
            response = event.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            self._refused(error or {"message": "response.failed"})
        elif kind == "error":
            self._refused(event)
        out.append(RelayedChunk(chunk, event, data))
