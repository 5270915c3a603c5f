"""Anthropic Messages, both sides: the rules its surface and its upstream adapter share (image sources
<-> URLs), and OpenAI <-> Messages both ways for the adapter: requests, answers and the SSE event stream.

Requests: system messages are joined into ``system``; text parts -> text blocks; ``data:`` image URLs ->
base64 image blocks, other URLs -> url image blocks; an assistant's ``tool_calls`` -> ``tool_use``
blocks (arguments parsed); ``tool`` messages -> ``tool_result`` blocks in a user turn; consecutive turns
of one role are merged (Anthropic wants them alternating). ``max_tokens`` is required there: the
request's ``max_tokens``/``max_completion_tokens``/``options.num_predict``, else ``DEFAULT_MAX_TOKENS``.
``stop`` -> ``stop_sequences``; ``temperature``, ``top_p``, ``top_k`` (also from ``options``); tools ->
``input_schema``; ``tool_choice`` auto/required/none/named -> auto/any/none/tool; ``parallel_tool_calls:
false`` -> ``disable_parallel_tool_use``; ``think`` / ``reasoning_effort`` -> ``thinking`` (a budget per
level, below ``max_tokens``). Refused (``CannotServe``, another candidate may serve): ``n``
above 1, ``logprobs``, ``audio``, embeddings.

Answers: text blocks joined into ``content``, ``tool_use`` -> ``tool_calls``, ``thinking`` ->
``reasoning``; ``stop_reason`` end_turn/stop_sequence -> stop, max_tokens -> length, tool_use ->
tool_calls; usage from ``input_tokens``/``output_tokens``. A stream is complete only at
``message_stop``; an ``error`` event raises the matching UpstreamError (``overloaded_error`` is a
transient 529).

For the surface (whose request ``anthropic_request`` translates), answers go out as ``content`` blocks and
streams as Anthropic's event sequence (``Events``: ``message_start``,
``content_block_start``/``_delta``/``_stop`` per block, ``message_delta`` with the stop reason and output
tokens, ``message_stop``; a stream broken after it started ends with an ``error`` event). Errors are
``{"type":"error","error":{"type","message"}}``, the type by status (``ERROR_TYPES``: the one table, read
the other way for an upstream's error event).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.base.asgi import Header, json_object
from interlock.runtime.base.errors import CannotServe, InvalidRequest, MalformedResponse, ProtocolFailure
from interlock.runtime.wire.base import Endpoint, RelayedChunk
from interlock.runtime.wire.openai_chat import (
    TranslatedEvents,
    cached_tokens,
    call_arguments,
    chunk_head,
    completion_id,
    delta_chunk,
    first_choice,
    reasoning,
)
from interlock.runtime.wire.sse import SSE_HEADERS, SSEEvents, frame

DEFAULT_MAX_TOKENS = 4096
PING = frame("ping", b'{"type": "ping"}')  # Anthropic's keepalive event, as its API sends it
FINISH_REASONS = {  # Anthropic's stop_reason -> OpenAI's finish_reason (STOP_REASONS: the other way)
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}
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
# the other way, for an upstream's error event (overloaded_error: 529, the later row)
_STATUSES = {kind: status for status, kind in ERROR_TYPES.items()} | {"api_error": 500}


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


STOP_REASONS = {  # OpenAI's finish_reason -> Anthropic's stop_reason
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}


def message_id() -> str:
    return f"msg_{random.getrandbits(96):024x}"


# -- the client side: an answer as a Messages answer (the request: ``anthropic_request``) --------

# -- answers ---------------------------------------------------------------------------------------


def _tool_use(call: Mapping[str, Any], number: int, *, strict: bool) -> dict[str, Any]:
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
        content.append(_tool_use(call, len(content), strict=False))
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


# -- the client side's stream: OpenAI chunks as Anthropic's events ---------------------------------


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


# -- the upstream side: an internal request as a Messages request, its answer and events as OpenAI's --


def refusal(operation: str, body: Mapping[str, Any]) -> CannotServe | None:
    if operation == "embeddings":
        return CannotServe("Anthropic has no embeddings API", param="input")
    n = body.get("n")
    if n is not None and n != 1:
        return CannotServe("Anthropic answers one choice per request; `n` is not 1", param="n")
    for key in ("logprobs", "audio"):
        if body.get(key):
            return CannotServe(f"Anthropic cannot give `{key}`", param=key)
    return None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            blocks.append({"type": "text", "text": part.get("text", "")})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if not isinstance(url, str):
                raise InvalidRequest("an `image_url` part has no url")
            blocks.append({"type": "image", "source": url_source(url)})
    return blocks


def _turns(messages: Any) -> tuple[str, list[dict[str, Any]]]:
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, Mapping):
            raise InvalidRequest("every message must be an object")
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(text_of(message.get("content")))
            continue
        if role == "tool":
            role = "user"
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": message.get("tool_call_id", ""),
                    "content": text_of(message.get("content")),
                }
            ]
        else:
            role = "assistant" if role == "assistant" else "user"
            blocks = _blocks(message.get("content"))
            calls = message.get("tool_calls") or ()
            if not isinstance(calls, list | tuple) or not all(isinstance(c, Mapping) for c in calls):
                raise InvalidRequest("`tool_calls` must be an array of objects", param="messages")
            for call in calls:
                function = call.get("function")
                if not isinstance(function, Mapping):
                    raise InvalidRequest("every tool call needs a `function` object", param="messages")
                block = _tool_use(call, 0, strict=True)
                blocks.append({**block, "id": call.get("id", "")})
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n".join(system), turns


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    out: dict[str, Any] | None
    if choice is None or choice == "auto":
        out = {"type": "auto"} if parallel is False else None
    elif choice == "required":
        out = {"type": "any"}
    elif choice == "none":
        out = {"type": "none"}
    elif isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        out = {"type": "tool", "name": choice["function"].get("name", "")}
    else:
        out = None
    if out is not None and parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def messages_request(body: Mapping[str, Any], model: str, *, stream: bool) -> dict[str, Any]:
    system, turns = _turns(body.get("messages"))
    options = body.get("options") if isinstance(body.get("options"), Mapping) else {}
    assert isinstance(options, Mapping)
    limit = body.get("max_tokens") or body.get("max_completion_tokens") or options.get("num_predict")
    request: dict[str, Any] = {
        "model": model,
        "messages": turns,
        "max_tokens": limit if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_TOKENS,
    }
    if system:
        request["system"] = system
    stop = body.get("stop", options.get("stop"))
    if stop:
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise InvalidRequest("`stop` must be a string or an array of strings", param="stop")
        request["stop_sequences"] = stop
    for key in ("temperature", "top_p", "top_k"):
        value = body.get(key, options.get(key))
        if value is not None:
            request[key] = value
    tools = body.get("tools")
    if tools and not isinstance(tools, list):
        raise InvalidRequest("`tools` must be an array", param="tools")
    if tools and body.get("tool_choice") != "none":
        request["tools"] = [
            {
                "name": t["function"].get("name", ""),
                "description": t["function"].get("description", ""),
                "input_schema": t["function"].get("parameters") or {"type": "object"},
            }
            for t in tools
            if isinstance(t, Mapping) and isinstance(t.get("function"), Mapping)
        ]
        choice = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
        if choice is not None:
            request["tool_choice"] = choice
    thinking = _thinking(body, request["max_tokens"])
    if thinking is not None:
        request["thinking"] = thinking
    if stream:
        request["stream"] = True
    return request


# ``reasoning_effort`` (and Ollama's ``think`` levels) as a thinking budget; ``think: true`` is medium
THINKING_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384}
MIN_THINKING_BUDGET = 1024  # the least Anthropic takes; it must also stay below max_tokens


def _thinking(body: Mapping[str, Any], max_tokens: int) -> dict[str, Any] | None:
    """Anthropic's ``thinking`` for ``think`` / ``reasoning_effort``: enabled with the level's budget
    (cut below ``max_tokens``), disabled for ``think: false`` or ``reasoning_effort: none``; None when
    the request says nothing or the budget does not fit under ``max_tokens``."""
    think, effort = body.get("think"), body.get("reasoning_effort")
    if think is False or effort == "none":
        return {"type": "disabled"}
    level = think if isinstance(think, str) else effort if isinstance(effort, str) else None
    if level is None and think is not True:
        return None
    budget = min(THINKING_BUDGETS.get(level or "medium", THINKING_BUDGETS["medium"]), max_tokens - 1)
    return {"type": "enabled", "budget_tokens": budget} if budget >= MIN_THINKING_BUDGET else None


def _usage(usage: Any) -> dict[str, Any]:
    """OpenAI's usage for Anthropic's: ``prompt_tokens`` counts the cached input too (Anthropic's
    ``input_tokens`` does not), ``prompt_tokens_details.cached_tokens`` what was read from the cache."""
    usage = usage if isinstance(usage, Mapping) else {}
    read, written = (
        int(usage.get("cache_read_input_tokens") or 0),
        int(usage.get("cache_creation_input_tokens") or 0),
    )
    prompt = int(usage.get("input_tokens") or 0) + read + written
    completion = int(usage.get("output_tokens") or 0)
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if read:
        out["prompt_tokens_details"] = {"cached_tokens": read}
    return out


def chat_completion(answer: Any, model: str) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get("content"), list):
        raise MalformedResponse("Messages answer has no content list")
    texts, thinking, calls = [], [], []
    for block in answer["content"]:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "thinking":
            thinking.append(block.get("thinking", ""))
        elif kind == "tool_use":
            calls.append(openai_call(block))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if thinking:
        message["reasoning"] = "".join(thinking)
    if calls:
        message["tool_calls"] = calls
    finish = FINISH_REASONS.get(str(answer.get("stop_reason")), "stop")
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(answer.get("usage")),
    }


class EventDecoder(SSEEvents):
    """Anthropic's SSE events to ``chat.completion.chunk`` dicts; complete only at ``message_stop``
    after a ``message_delta`` with a ``stop_reason`` (without one the stream was cut).

    ``relay``: every event comes as one ``RelayedChunk`` (its chunk, or one without choices), holding
    the event as it came, for a Messages caller."""

    __slots__ = (
        "_blocks",
        "_calls",
        "_head",
        "_include_usage",
        "_relay",
        "_stopped",
        "_usage",
        "done",
        "prompt_tokens",
    )

    def __init__(self, model: str, endpoint: Endpoint, include_usage: bool, *, relay: bool = False) -> None:
        super().__init__(endpoint)
        self._relay = relay
        self._include_usage = include_usage
        self._head = chunk_head(model)
        self._blocks: dict[int, int] = {}  # content block index -> tool call index
        self._calls = 0
        self._usage: dict[str, Any] = {}
        self._stopped = False  # a message_delta has given the stop_reason
        self.done = False
        self.prompt_tokens: int | None = None  # message_start's input_tokens

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return delta_chunk(self._head, delta, finish)

    def end(self, out: deque[dict[str, Any]]) -> None:
        self.flush(out)
        if not self.done:
            raise ProtocolFailure("stream ended before message_stop")

    def _dispatch(self, data: bytes, out: deque[dict[str, Any]]) -> None:
        event = json_object(data, MalformedResponse, "stream event")
        if not self._relay:
            self._decode(event, out)
            return
        before = len(out)
        self._decode(event, out)
        chunk = out.pop() if len(out) > before else {**self._head, "choices": []}
        out.append(RelayedChunk(chunk, event, data))

    def _decode(self, event: dict[str, Any], out: deque[dict[str, Any]]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self._usage.update(message.get("usage") or {})
            given = self._usage.get("input_tokens")
            self.prompt_tokens = given if isinstance(given, int) and given > 0 else None
            out.append(self._chunk({"role": "assistant", "content": ""}))
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                number = self._calls
                self._calls += 1
                self._blocks[event.get("index", 0)] = number
                call = {"index": number, "id": block.get("id", ""), "type": "function"}
                call["function"] = {"name": block.get("name", ""), "arguments": ""}
                out.append(self._chunk({"tool_calls": [call]}))
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                out.append(self._chunk({"content": delta.get("text", "")}))
            elif delta.get("type") == "thinking_delta":
                out.append(self._chunk({"reasoning": delta.get("thinking", "")}))
            elif delta.get("type") == "input_json_delta":
                number = self._blocks.get(event.get("index", 0), 0)
                call = {"index": number, "function": {"arguments": delta.get("partial_json", "")}}
                out.append(self._chunk({"tool_calls": [call]}))
        elif kind == "message_delta":
            self._usage.update(event.get("usage") or {})
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                self._stopped = True
                out.append(self._chunk({}, FINISH_REASONS.get(str(reason), "stop")))
        elif kind == "message_stop":
            if not self._stopped:
                raise ProtocolFailure("stream reached message_stop without a stop_reason")
            if self._include_usage:
                out.append({**self._head, "choices": [], "usage": _usage(self._usage)})
            self.done = True
        elif kind == "error":
            error = dict(event.get("error") or {})
            status = _STATUSES.get(str(error.get("type")))
            if status is not None:
                error["code"] = status
            self._refused(error)
