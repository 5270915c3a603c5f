"""Ollama's native API, the upstream side: OpenAI <-> Ollama native both ways for the adapter: /api/chat
requests, answers and NDJSON chunks; /api/embed. The caller's side (an Ollama request as the internal
form; answers and NDJSON lines in Ollama's shape) is ``wire.ollama_caller``.

What happens to each request field is the table in ``fields`` (and docs/upstream-adapters.md). Two kinds
of refusal, both raised before anything is sent:
- ``CannotServe``: the request is fine, Ollama cannot carry it (``n: 2``, ``logprobs``, ``tool_choice:
  "required"``, remote image URLs, token-array embeddings); another candidate of the chain may.
  Remote ``http(s)`` image URLs are never fetched: that would add latency and a server-side request
  forgery hole; images must be ``data:`` URLs, whose base64 goes into the message's ``images``.
- ``InvalidRequest``: the request is malformed for any upstream (a message that is not an object).

Decisions worth knowing:
- Text parts (and an assistant's ``refusal`` parts) of one message are joined with a newline into its
  ``content``.
- Tool call arguments travel as JSON strings in OpenAI and as objects in Ollama; ids are generated
  (``call_<hex>``) when Ollama gives none. A tool message gets ``tool_name`` from the matching call.
- ``tool_choice``: ``none`` sends no tools, a named function (or ``allowed_tools`` in ``auto`` mode) sends
  only those tools; ``parallel_tool_calls: false`` keeps only the answer's first tool call.
- ``response_format`` json_object -> ``format: "json"``, json_schema -> ``format: <schema>``; a native
  top-level ``format`` passes when there is no ``response_format``.
- Sampling parameters go into ``options``; ``max_completion_tokens``/``max_tokens`` -> ``num_predict``;
  Ollama's runner options sent at the top level (``top_k``, ``min_p``, ``num_ctx``, as LiteLLM does)
  go into ``options`` too, over a native ``options`` object. ``keep_alive`` and ``think`` pass through;
  ``reasoning_effort`` -> ``think``. Thinking text comes back as ``reasoning`` (as Ollama's /v1 does); an
  assistant turn's ``reasoning_content`` (or ``reasoning``) goes as its ``thinking``.
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

from interlock.runtime.base.asgi import json_type
from interlock.runtime.base.errors import CannotServe, InvalidRequest, MalformedResponse, ProtocolFailure
from interlock.runtime.wire.base import RelayedChunk
from interlock.runtime.wire.error_bodies import credentials, error_for_object
from interlock.runtime.wire.fields import OLLAMA_OPTION_FIELDS
from interlock.runtime.wire.ollama_caller import native_function
from interlock.runtime.wire.openai_chat import call_arguments, completion_id, reasoning


def data_url_base64(url: str) -> str | None:
    """The base64 data of a base64 ``data:`` URL (what Ollama takes in ``images``), else None."""
    if url.startswith("data:"):
        header, comma, data = url.partition(",")
        if comma and header.endswith(";base64"):
            return data
    return None


# -- the upstream side: an internal request for a worker's /api/chat, its answers as OpenAI's -------


# top-level request field -> its key in Ollama's ``options``
_OPTIONS: dict[str, str] = {
    **{key: key for key in ("temperature", "top_p", "seed", "frequency_penalty", "presence_penalty")},
    **{key: key for key in OLLAMA_OPTION_FIELDS},
}


def _call_id() -> str:
    return f"call_{random.getrandbits(96):024x}"


# ----- refusals: fields whose value asks for what Ollama cannot do -----


def _shown(value: Any) -> str:
    """A caller's value inside a refusal: ``repr``, cut to 40 characters (messages stay short)."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _refuse_set(what: str) -> Callable[[Any], str | None]:
    return lambda value: what if value else None


def _refuse_n(value: Any) -> str | None:
    return None if value == 1 else f"Ollama answers one choice per request; `n` is {_shown(value)}"


def _refuse_modalities(value: Any) -> str | None:
    if isinstance(value, list) and all(m == "text" for m in value):
        return None
    return "Ollama models answer in text only; `modalities` asks for more"


def _refuse_verbosity(value: Any) -> str | None:
    return None if value == "medium" else f"Ollama cannot set `verbosity` {_shown(value)}"


_REFUSALS: dict[str, Callable[[Any], str | None]] = {
    "audio": _refuse_set("Ollama models answer in text only; `audio` output is not available"),
    "function_call": _refuse_set(
        "the deprecated `function_call` is not translated for Ollama; use `tool_choice`"
    ),
    "functions": _refuse_set("the deprecated `functions` are not translated for Ollama; use `tools`"),
    "logit_bias": _refuse_set("Ollama has no `logit_bias`"),
    "logprobs": _refuse_set("Ollama's chat answers carry no `logprobs`"),
    "modalities": _refuse_modalities,
    "moderation": _refuse_set("Ollama runs no `moderation`"),
    "n": _refuse_n,
    "top_logprobs": _refuse_set("Ollama's chat answers carry no `top_logprobs`"),
    "verbosity": _refuse_verbosity,
    "web_search_options": _refuse_set("Ollama cannot search the web (`web_search_options`)"),
}


# ----- requests -----


def refusal(operation: str, body: Mapping[str, Any]) -> CannotServe | None:
    """Why Ollama cannot carry this request (``operation``: chat | embeddings), or None, found without
    translating: the router asks before a candidate's guards, so it never queues for a slot it will not
    use. The translation raises the same refusals (and, rarely, one this misses: tool call arguments
    that are not JSON); a malformed request is left to it (None here)."""
    try:
        if operation == "embeddings":
            _embedding_inputs(body.get("input"))
            return None
        _lift_options(body)
        _tools(body.get("tools"), body.get("tool_choice"))
        messages = body.get("messages")
        for index, message in enumerate(messages if isinstance(messages, list) else ()):
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(content, list):
                for number, part in enumerate(content):
                    _part(part, index, number)
    except CannotServe as exc:
        return exc
    except InvalidRequest:
        return None
    return None


def _lift_options(body: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level fields that go into ``options``; raises CannotServe for a refused field."""
    lifted: dict[str, Any] = {}
    for key, value in body.items():
        if value is None:
            continue
        option = _OPTIONS.get(key)
        if option is not None:
            lifted[option] = value
            continue
        check = _REFUSALS.get(key)
        if check is not None:
            refusal = check(value)
            if refusal is not None:
                raise CannotServe(refusal, param=key)
    return lifted


def chat_request(body: Mapping[str, Any], model: str, stream: bool) -> dict[str, Any]:
    """An OpenAI chat request as an Ollama /api/chat request; raises CannotServe or InvalidRequest."""
    lifted = _lift_options(body)
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise InvalidRequest("`messages` must be an array", param="messages")
    tool_names: dict[str, str] = {}
    out: dict[str, Any] = {
        "model": model,
        "messages": [_message(i, m, tool_names) for i, m in enumerate(messages)],
        "stream": stream,
    }
    tools = _tools(body.get("tools"), body.get("tool_choice"))
    if tools:
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
    elif body.get("format") is not None:
        out["format"] = body["format"]
    options: dict[str, Any] = {}
    native = body.get("options")
    if isinstance(native, Mapping):
        options.update(native)
    options.update(lifted)
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


def _tool_name(tool: Any) -> str | None:
    function = tool.get("function") if isinstance(tool, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    return name if isinstance(name, str) else None


def _tools(tools: Any, choice: Any) -> list[Any] | None:
    """The tools to send, after ``tool_choice``: emulated where Ollama has no counterpart, else refused."""
    if not tools or choice == "none":
        return None
    if not isinstance(tools, list):
        raise InvalidRequest("`tools` must be an array", param="tools")
    for index, tool in enumerate(tools):
        kind = tool.get("type", "function") if isinstance(tool, Mapping) else None
        if kind != "function" or _tool_name(tool) is None:
            raise CannotServe(
                f"Ollama takes function tools only, not {_shown(kind)} tools", param=f"tools[{index}]"
            )
    if choice is None or choice == "auto":
        return tools
    if choice == "required":
        raise CannotServe('Ollama cannot force a tool call (`tool_choice: "required"`)', param="tool_choice")
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind == "function":
        names = {_tool_name(choice)}
    elif kind == "allowed_tools":
        allowed = choice.get("allowed_tools")
        allowed = allowed if isinstance(allowed, Mapping) else {}
        if allowed.get("mode") == "required":
            raise CannotServe(
                'Ollama cannot force a tool call (`tool_choice.allowed_tools.mode: "required"`)',
                param="tool_choice",
            )
        listed = allowed.get("tools")
        names = {_tool_name(tool) for tool in listed} if isinstance(listed, list) else set()
    else:
        raise CannotServe(
            f"Ollama has no counterpart for `tool_choice` {_shown(choice)}", param="tool_choice"
        )
    chosen = [tool for tool in tools if _tool_name(tool) in names]
    if not chosen:
        raise InvalidRequest("`tool_choice` names no function that is in `tools`", param="tool_choice")
    return chosen


def _message(index: int, message: Any, tool_names: dict[str, str]) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        raise InvalidRequest(f"`messages[{index}]` must be an object", param=f"messages[{index}]")
    role = message.get("role")
    out: dict[str, Any] = {"role": "system" if role == "developer" else role}
    content = message.get("content")
    if content is None or isinstance(content, str):
        out["content"] = content or ""
    elif isinstance(content, list):
        texts: list[str] = []
        images: list[str] = []
        for number, part in enumerate(content):
            text, image = _part(part, index, number)
            if image is None:
                texts.append(text)
            else:
                images.append(image)
        out["content"] = "\n".join(texts)
        if images:
            out["images"] = images
    else:
        where = f"messages[{index}].content"
        raise InvalidRequest(f"`{where}` must be a string or an array of parts", param=where)
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [_native_call(call, tool_names, index) for call in calls]
    thinking = reasoning(message) if role == "assistant" else None
    if isinstance(thinking, str) and thinking:
        out["thinking"] = thinking  # an earlier turn's thinking, back as Ollama's own field
    if role == "tool":
        call_id = message.get("tool_call_id")
        name = tool_names.get(call_id) if isinstance(call_id, str) else None
        name = name or message.get("name")
        if isinstance(name, str):
            out["tool_name"] = name
    return out


def _part(part: Any, index: int, number: int) -> tuple[str, str | None]:
    """One content part: ``(text, None)`` or ``("", image base64)``; raises for other part types."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind == "text":
        return str(part.get("text", "")), None
    if kind == "refusal":  # an assistant turn replayed: its refusal was its text
        return str(part.get("refusal", "")), None
    if kind == "image_url":
        return "", _image(part.get("image_url"), index, number)
    raise CannotServe(
        f"content part type {_shown(kind)} is not supported by Ollama",
        param=f"messages[{index}].content[{number}]",
    )


def _image(image_url: Any, index: int, number: int) -> str:
    url = image_url.get("url") if isinstance(image_url, Mapping) else image_url
    data = data_url_base64(url) if isinstance(url, str) else None
    if data is not None:
        return data
    where = f"messages[{index}].content[{number}].image_url"
    if not isinstance(url, str):
        raise InvalidRequest(f"`{where}` needs a url", param=where)
    if not url.startswith("data:"):
        raise CannotServe(
            "Ollama models take images as data: URLs only; remote image URLs are not fetched", param=where
        )
    raise CannotServe("Ollama takes base64-encoded image data: URLs only", param=where)


def _native_call(call: Any, tool_names: dict[str, str], index: int) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        where = f"messages[{index}].tool_calls"
        raise InvalidRequest(f"`{where}` need a function name", param=where)
    name = function["name"]
    try:
        arguments = call_arguments(function.get("arguments"))
    except ValueError:
        raise CannotServe(
            f"Ollama takes tool call arguments as JSON objects; those of {name!r} are not JSON",
            param=f"messages[{index}].tool_calls",
        ) from None
    call_id = call.get("id")
    if isinstance(call_id, str):
        tool_names[call_id] = name
    return native_function(name, arguments)


def _embedding_inputs(inputs: Any) -> str | list[str]:
    if isinstance(inputs, list) and any(not isinstance(item, str) for item in inputs):
        raise CannotServe("Ollama embeddings take strings only, not token arrays", param="input")
    if not isinstance(inputs, str | list):
        raise InvalidRequest("`input` must be a string or an array of strings", param="input")
    return inputs


def embed_request(body: Mapping[str, Any], model: str) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "input": _embedding_inputs(body.get("input"))}
    if body.get("dimensions") is not None:
        out["dimensions"] = body["dimensions"]
    return out


# ----- answers -----


def usage_of(answer: Mapping[str, Any]) -> dict[str, int]:
    """Ollama's counts as an OpenAI usage (``counts``: the other way)."""
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


def chat_completion(answer: Mapping[str, Any], model: str, one_call: bool = False) -> dict[str, Any]:
    """An Ollama /api/chat answer (``stream: false``, a JSON object: ``asgi.json_object``) as an OpenAI
    ``chat.completion``; ``one_call`` (``parallel_tool_calls: false``) keeps only its first tool call."""
    native = answer.get("message")
    if not isinstance(native, Mapping):
        raise MalformedResponse("response has no message")
    message: dict[str, Any] = {"role": "assistant", "content": native.get("content") or ""}
    if native.get("thinking"):
        message["reasoning"] = native["thinking"]
    calls = native.get("tool_calls")
    if isinstance(calls, list) and calls:
        if one_call:
            calls = calls[:1]
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
        "usage": usage_of(answer),
    }


def relayed_request(
    native: Mapping[str, Any], body: Mapping[str, Any], model: str, *, stream: bool
) -> dict[str, Any]:
    """An Ollama caller's own ``/api/chat`` request for a worker: as it came, but for what the gateway
    owns: ``model``, ``stream``, the ``options.num_ctx`` the guards chose, a ``think`` they took out and
    the ``keep_alive`` they pinned where the caller set none (``body``: the internal form as the guards
    left it)."""
    request = dict(native)
    request["model"] = model
    request["stream"] = stream
    options = body.get("options")
    window = options.get("num_ctx") if isinstance(options, Mapping) else None
    if window is not None:
        sent = request.get("options")
        sent = sent if isinstance(sent, Mapping) else {}
        if sent.get("num_ctx") != window:
            request["options"] = {**sent, "num_ctx": window}
    if "think" in request and "think" not in body and "reasoning_effort" not in body:
        del request["think"]
    if "keep_alive" not in request and body.get("keep_alive") is not None:  # a placed model's pin
        request["keep_alive"] = body["keep_alive"]
    return request


class NDJSONDecoder:
    """Ollama's NDJSON chat stream to ``chat.completion.chunk`` dicts (role in the first delta).

    ``relay``: every line comes as one ``RelayedChunk`` (its chunk, with the usage on the last line's,
    or one without choices), holding the line as it came, for an Ollama caller."""

    __slots__ = (
        "_first",
        "_head",
        "_headers",
        "_include_usage",
        "_one_call",
        "_relay",
        "_tools",
        "done",
        "on_done",
    )

    def __init__(
        self,
        model: str,
        include_usage: bool,
        headers: Mapping[str, str],
        one_call: bool = False,
        *,
        relay: bool = False,
    ) -> None:
        """``headers`` are the endpoint's: their credentials are masked in an error line's text;
        ``one_call`` (``parallel_tool_calls: false``) keeps only the stream's first tool call."""
        self._relay = relay
        self._one_call = one_call
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
        try:  # (``asgi.json_object`` inline, its wording: this runs once per stream line)
            native = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise MalformedResponse(f"stream line is not valid JSON ({exc})") from None
        if not isinstance(native, dict):
            raise MalformedResponse(f"stream line must be a JSON object, not {json_type(native)}")
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
            if isinstance(calls, list) and calls and not (self._one_call and self._tools):
                if self._one_call:
                    calls = calls[:1]
                delta["tool_calls"] = _openai_calls(calls, self._tools)
                self._tools += len(calls)
        if native.get("done"):
            finish = _finish_reason(native, self._tools > 0)
            last = {**self._head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if self._relay:
                out.append(RelayedChunk({**last, "usage": usage_of(native)}, native, line))
            else:
                out.append(last)
                if self._include_usage:
                    out.append({**self._head, "choices": [], "usage": usage_of(native)})
            self.done = True
            if self.on_done is not None:
                self.on_done(native)
        elif self._relay:
            choices = [{"index": 0, "delta": delta, "finish_reason": None}] if delta else []
            out.append(RelayedChunk({**self._head, "choices": choices}, native, line))
        elif delta:
            out.append({**self._head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})

    def whole(self, data: bytes, out: deque[dict[str, Any]]) -> bool:
        """A read that is one whole line: fed at once (False for any other read)."""
        if data.find(b"\n") != len(data) - 1:
            return False
        self.feed(data[:-1], out)
        return True

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
