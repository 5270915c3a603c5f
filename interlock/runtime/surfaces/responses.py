"""The OpenAI Responses surface: ``POST /v1/responses``, stateless.

A Responses request becomes the internal (OpenAI Chat-shaped) form: ``instructions`` -> a system
message; ``input`` as text -> one user message, as items -> messages (``input_text``/``output_text``
parts -> text, ``input_image`` -> an image part), ``function_call`` items -> an assistant's
``tool_calls`` (consecutive calls joined), ``function_call_output`` -> ``tool`` messages; ``reasoning``
items are not sent on (they are the provider's hidden state); function ``tools`` (flat) -> Chat's nested
tools, ``namespace`` groups flattened into their function tools (a call of one is answered with its
``namespace``); hosted tools (``web_search``, ``local_shell``, ``custom``, ...) and their call items are
left out and named in ``X-Interlock-Dropped`` (no chat upstream can run them), as is every request field
the internal form does not carry; ``max_output_tokens`` -> ``max_tokens``; ``reasoning.effort`` ->
``reasoning_effort``; ``text.format`` json_schema/json_object -> ``response_format``.
``previous_response_id`` is answered with a 400: the gateway stores no responses (send the whole
conversation as ``input`` items).

Answers are ``response`` objects (``output``: a ``reasoning`` item whose summary is the upstream's
thinking text when there is one, a ``message`` with ``output_text``, ``function_call`` items;
``status`` ``incomplete`` when the output limit was hit). Streams are typed SSE events
(``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.reasoning_summary_part.added``, ``response.reasoning_summary_text.delta``/``.done``,
``response.content_part.added``, ``response.output_text.delta``/``.done``,
``response.function_call_arguments.delta``/``.done``, ``response.output_item.done``,
``response.completed``), each with a ``sequence_number``; a stream broken after it started ends with
an ``error`` event and no ``response.completed``. Errors are OpenAI's ``{"error": {...}}``.
"""

from __future__ import annotations

from typing import Any

import orjson

from interlock.runtime.asgi import Header
from interlock.runtime.surfaces.base import (
    Failure,
    Parsed,
    StreamRender,
    Translated,
    Translation,
)
from interlock.runtime.surfaces.openai import (
    SSE_HEADERS,
    error_body,
)
from interlock.runtime.wire import openai_responses as wire
from interlock.runtime.wire.base import Relayed, RelayedChunk
from interlock.runtime.wire.openai_chat import reasoning


class _Events(StreamRender):
    """Typed Responses events from OpenAI chunks: one open output item at a time."""

    __slots__ = (
        "_call",
        "_finish",
        "_id",
        "_item",
        "_model",
        "_namespaces",
        "_output",
        "_relayed",
        "_seq",
        "_started",
        "_text",
        "_usage",
    )
    headers: tuple[Header, ...] = SSE_HEADERS

    def __init__(self, model: str | None, namespaces: dict[str, str]) -> None:
        self._model = model
        self._namespaces = namespaces
        self._relayed = False
        self._id = wire.new_id("resp")
        self._seq = 0
        self._started = False
        self._output: list[dict[str, Any]] = []
        self._item: dict[str, Any] | None = None  # the open item: a message or a function call
        self._text = ""  # the open message's text so far
        self._call: int | None = None  # the open function call's index in the chunks
        self._finish: str | None = None
        self._usage: Any = None

    def _event(self, kind: str, out: list[bytes], **data: Any) -> None:
        data = {"type": kind, "sequence_number": self._seq, **data}
        self._seq += 1
        out.append(b"event: %b\ndata: %b\n\n" % (kind.encode(), orjson.dumps(data)))

    def _open(self, item: dict[str, Any], out: list[bytes], call: int | None = None) -> None:
        self._close(out)
        self._item, self._text, self._call = item, "", call
        self._event("response.output_item.added", out, output_index=len(self._output), item=item)
        if item["type"] == "reasoning":
            part: dict[str, Any] = {"type": "summary_text", "text": ""}
            self._event(
                "response.reasoning_summary_part.added",
                out,
                item_id=item["id"],
                output_index=len(self._output),
                summary_index=0,
                part=part,
            )
        elif item["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": []}
            self._event(
                "response.content_part.added",
                out,
                item_id=item["id"],
                output_index=len(self._output),
                content_index=0,
                part=part,
            )

    def _close(self, out: list[bytes]) -> None:
        item, self._item = self._item, None
        if item is None:
            return
        index = len(self._output)
        if item["type"] == "reasoning":
            text = self._text
            where = {"item_id": item["id"], "output_index": index, "summary_index": 0}
            self._event("response.reasoning_summary_text.done", out, **where, text=text)
            part: dict[str, Any] = {"type": "summary_text", "text": text}
            self._event("response.reasoning_summary_part.done", out, **where, part=part)
            item = wire.reasoning_item(item["id"], text)
        elif item["type"] == "message":
            text = self._text
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            self._event("response.output_text.done", out, **where, text=text, logprobs=[])
            part = {"type": "output_text", "text": text, "annotations": []}
            self._event("response.content_part.done", out, **where, part=part)
            item = wire.message_item(item["id"], text, "completed")
        else:
            item["status"] = "completed"
            self._event(
                "response.function_call_arguments.done",
                out,
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        self._event("response.output_item.done", out, output_index=index, item=item)
        self._output.append(item)

    def _relay(self, chunk: RelayedChunk) -> bytes:
        """A Responses upstream's event as it came; those that hold the ``response`` (created,
        in_progress, completed, ...) name the caller's model."""
        self._relayed = True
        event, data = chunk.native, chunk.raw
        response = event.get("response")
        if isinstance(response, dict) and "model" in response:
            data = orjson.dumps({**event, "response": {**response, "model": self._model}})
        return b"event: %b\ndata: %b\n\n" % (str(event.get("type")).encode(), data)

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        if type(chunk) is RelayedChunk:
            return self._relay(chunk)
        out: list[bytes] = []
        if not self._started:
            self._started = True
            response = wire.response(self._id, self._model, [], "in_progress", None, None)
            self._event("response.created", out, response=response)
            self._event("response.in_progress", out, response=response)
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
            delta = choice.get("delta") or {}
            thinking = reasoning(delta)
            if thinking:
                if self._item is None or self._item["type"] != "reasoning":
                    self._open(wire.reasoning_item(wire.new_id("rs"), None), out)
                assert self._item is not None
                self._text += thinking
                self._event(
                    "response.reasoning_summary_text.delta",
                    out,
                    item_id=self._item["id"],
                    output_index=len(self._output),
                    summary_index=0,
                    delta=thinking,
                )
            text = delta.get("content")
            if text:
                if self._item is None or self._item["type"] != "message":
                    self._open(wire.message_item(wire.new_id("msg"), "", "in_progress"), out)
                assert self._item is not None
                self._text += text
                self._event(
                    "response.output_text.delta",
                    out,
                    item_id=self._item["id"],
                    output_index=len(self._output),
                    content_index=0,
                    delta=text,
                    logprobs=[],
                )
            for call in delta.get("tool_calls") or ():
                function = call.get("function") or {}
                number = call.get("index", 0)
                if self._item is None or self._call != number:
                    call_id = call.get("id") or wire.new_id("call")
                    name = function.get("name") or ""
                    item = wire.call_item(
                        wire.new_id("fc"), call_id, name, "", "in_progress", self._namespaces
                    )
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
        return b"".join(out)

    def end(self) -> bytes:
        if self._relayed:  # the upstream's own response.completed went by
            return b""
        out: list[bytes] = []
        self._close(out)
        response = wire.response(self._id, self._model, self._output, "completed", self._finish, self._usage)
        self._event("response.completed", out, response=response)
        return b"".join(out)

    def error(self, message: str) -> bytes:
        out: list[bytes] = []
        self._event("error", out, code="stream_aborted", message=message, param=None)
        return b"".join(out)


class Responses(Translated):
    """``POST /v1/responses``; to an upstream declared ``responses: true``, the request goes as it came
    (``Native``, with its ``OpenAI-Beta`` header), and the answer and events come back as they came."""

    forwards = frozenset({b"openai-beta"})
    relays = "responses"
    limits = (("max_output_tokens",),)

    def translate(self, body: dict[str, Any]) -> Translation:
        return wire.internal_request(body)

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        if type(result) is Relayed:  # a Responses upstream's own answer: as it came, but for the model
            return orjson.dumps({**result.native, "model": parsed.echo})
        return orjson.dumps(wire.answer_of(result, parsed.echo, parsed.extras.get("namespaces", {})))

    def stream(self, parsed: Parsed, candidate: str) -> StreamRender:
        return _Events(parsed.echo, parsed.extras.get("namespaces", {}))

    def error(self, failure: Failure) -> bytes:
        return error_body(failure.message, failure.type, param=failure.param, code=failure.code)
