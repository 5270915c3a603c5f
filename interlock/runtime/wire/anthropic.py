"""Anthropic Messages, the upstream side: OpenAI <-> Messages both ways for the adapter: requests, answers
and the SSE event stream (the caller's side, and the rules both share: ``wire.anthropic_caller``).

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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from interlock.runtime.base.asgi import json_object
from interlock.runtime.base.errors import CannotServe, InvalidRequest, MalformedResponse, ProtocolFailure
from interlock.runtime.wire.anthropic_caller import ERROR_TYPES, openai_call, text_of, tool_use, url_source
from interlock.runtime.wire.base import Endpoint, RelayedChunk
from interlock.runtime.wire.openai_chat import chunk_head, completion_id, delta_chunk
from interlock.runtime.wire.sse import SSEEvents

DEFAULT_MAX_TOKENS = 4096
FINISH_REASONS = {  # Anthropic's stop_reason -> OpenAI's (anthropic_caller.STOP_REASONS: the other way)
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}
# ERROR_TYPES the other way, for an upstream's error event (overloaded_error: 529, the later row)
_STATUSES = {kind: status for status, kind in ERROR_TYPES.items()} | {"api_error": 500}


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
                block = tool_use(call, 0, strict=True)
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
