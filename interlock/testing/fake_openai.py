"""A fake OpenAI-compatible upstream: /v1/models, /v1/chat/completions (JSON and SSE), /v1/embeddings,
/v1/responses (stateless; JSON and typed SSE events).

Shapes follow docs/wire-formats.md. With ``api_key`` set, every route demands exactly
``Authorization: Bearer <api_key>`` and answers 401 otherwise; that 401 echoes the key it received,
as a careless upstream might, so tests can prove the gateway never passes such text on unredacted.

With ``server`` (``vllm``, ``sglang``, ``llama.cpp``) it also serves that server's ``GET /metrics`` (and
llama.cpp's ``GET /slots``) from ``reported`` (``testing.server_load``), outside faults and the log,
and its tokenizer: llama.cpp's ``POST /apply-template`` (a ChatML rendering of the messages and tools)
and ``POST /tokenize`` (``{"content"}`` -> ``{"tokens"}``), vLLM's and SGLang's ``POST /tokenize``
(``{"messages"}`` -> ``{"count"}``), counted by ``tokenize`` (words and punctuation, and each special
marker one token); ``tokenized`` counts the calls.

Run it out of process: ``python -m interlock.testing.fake_openai --port 0`` prints its URL first.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Sequence
from typing import Any

import orjson

from interlock.testing.fake_server import (
    Answer,
    ErrorAnswer,
    FakeServer,
    Incoming,
    JsonAnswer,
    Route,
    StreamAnswer,
)
from interlock.testing.replies import (
    Reply,
    count_words,
    embedding_base64,
    embedding_for,
    last_is_tool_result,
    planned_calls,
    split_text,
)
from interlock.testing.server_load import PROMETHEUS, Reported, llama_models, metrics, props, slots

_SSE = "text/event-stream"
REASONING = "reasoning_content"  # where llama-server (--reasoning-format deepseek) puts a model's thinking


class FakeOpenAI(FakeServer):
    """An OpenAI-compatible upstream on loopback; ``base_url`` is what a client is configured with."""

    kind = "fake-openai"

    def __init__(
        self,
        *,
        name: str | None = None,
        api_key: str | None = None,
        models: Sequence[str] | None = None,
        reply: Reply | None = None,
        embedding_dimensions: int = 8,
        strict: bool = False,
        record: bool = True,
        port: int = 0,
        server: str | None = None,
    ) -> None:
        """``models=None`` accepts any model name (and lists ``fake-model``); a list is enforced (404).
        ``strict``: a field OpenAI's API does not define answers 400, as OpenAI itself does."""
        super().__init__(name=name, reply=reply, record=record, port=port)
        self.api_key = api_key
        self.models = tuple(models) if models is not None else None
        self.embedding_dimensions = embedding_dimensions
        self.strict = strict
        self._known = _known_fields() if strict else None
        self.server = server
        self.reported = Reported()  # what /metrics and /slots say, with ``server``
        self.tokenized = 0  # calls to the tokenizer routes
        if server is not None:
            metrics(server, self.reported, "m")  # an unknown kind fails here, not on the first fetch
            self._control[("GET", "/metrics")] = self._metrics
            self._control[("POST", "/tokenize")] = self._tokenize
            if server == "llama.cpp":
                self._control[("GET", "/slots")] = self._slots
                self._control[("GET", "/props")] = self._props
                self._control[("POST", "/apply-template")] = self._apply_template
        self.template_tools = False  # llama.cpp: whether its chat template writes a request's tools

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/v1/models"): self._models,
            ("POST", "/v1/chat/completions"): self._chat,
            ("POST", "/v1/embeddings"): self._embeddings,
            ("POST", "/v1/responses"): self._responses,
        }

    def error_body(self, status: int, message: str) -> bytes:
        kind = {401: "invalid_request_error", 429: "rate_limit_error"}.get(status)
        kind = kind or ("server_error" if status >= 500 else "invalid_request_error")
        return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}})

    def malformed_frame(self) -> bytes:
        return b'data: {"id": "chatcmpl-broken", "choices": [\n\n'

    def error_frame(self, message: str) -> bytes:
        error = {"message": message, "type": "server_error", "param": None, "code": None}
        return b"data: " + orjson.dumps({"error": error}) + b"\n\n"

    # ----- routes -----

    def _metrics(self, incoming: Incoming) -> Answer:
        assert self.server is not None
        model = self.models[0] if self.models else "fake-model"
        return StreamAnswer(PROMETHEUS, [metrics(self.server, self.reported, model)])

    def _slots(self, incoming: Incoming) -> Answer:
        return JsonAnswer(orjson.loads(slots(self.reported)))

    def _props(self, incoming: Incoming) -> Answer:
        model = self.models[0] if self.models else "fake-model"
        return JsonAnswer(orjson.loads(props(self.reported, model, tools=self.template_tools)))

    def _apply_template(self, incoming: Incoming) -> Answer:
        """llama.cpp's ``POST /apply-template``: the prompt a chat request becomes, nothing generated.
        ChatML, as SmolLM2's template writes it; the tools only with ``template_tools`` (SmolLM2's and
        Gemma's templates leave them out: tests/fixtures/discover/llama-server/apply_template.json)."""
        self.tokenized += 1
        body = incoming.body if isinstance(incoming.body, dict) else {}
        return JsonAnswer(
            {"prompt": chatml(body.get("messages"), body.get("tools") if self.template_tools else None)}
        )

    def _tokenize(self, incoming: Incoming) -> Answer:
        self.tokenized += 1
        body = incoming.body if isinstance(incoming.body, dict) else {}
        if self.server == "llama.cpp":
            content = body.get("content")
            if not isinstance(content, str):
                return ErrorAnswer(400, "content must be a string")
            return JsonAnswer({"tokens": list(range(tokenize(content)))})
        count = tokenize(chatml(body.get("messages"), body.get("tools")))
        return JsonAnswer({"count": count, "max_model_len": 8192, "tokens": list(range(count))})

    def _refused(self, incoming: Incoming) -> ErrorAnswer | None:
        if self.api_key is None:
            return None
        sent = incoming.headers.get("authorization", "")
        if sent == f"Bearer {self.api_key}":
            return None
        shown = sent.removeprefix("Bearer ") or "(none)"
        return ErrorAnswer(401, f"Incorrect API key provided: {shown}.")

    def _unknown_model(self, model: str | None) -> ErrorAnswer | None:
        if model is None:
            return ErrorAnswer(400, "you must provide a model parameter")
        if self.models is not None and model not in self.models:
            return ErrorAnswer(404, f"The model `{model}` does not exist or you do not have access to it.")
        return None

    def _models(self, incoming: Incoming) -> Answer:
        refused = self._refused(incoming)
        if refused is not None:
            return refused
        names = self.models if self.models is not None else ("fake-model",)
        if self.server == "llama.cpp":  # the server's own shape: one model, its context in `meta`
            return JsonAnswer(llama_models(names[0]))
        data = [{"id": n, "object": "model", "created": 1700000000, "owned_by": self.name} for n in names]
        return JsonAnswer({"object": "list", "data": data})

    def _unknown_field(self, incoming: Incoming, route: str) -> ErrorAnswer | None:
        if self._known is None or not isinstance(incoming.body, dict):
            return None
        for name in incoming.body:
            if name not in self._known[route]:
                return ErrorAnswer(400, f"Unrecognized request argument supplied: {name}")
        return None

    def _chat(self, incoming: Incoming) -> Answer:
        error = self._refused(incoming) or self._unknown_model(incoming.model)
        error = error or self._unknown_field(incoming, "chat")
        if error is not None:
            return error
        body: dict[str, Any] = incoming.body
        model = incoming.model or ""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return ErrorAnswer(400, "messages must be a non-empty array")
        reply = self.reply
        tools = body.get("tools") if body.get("tool_choice") != "none" else None
        calls = [
            {
                "id": f"call_{random.getrandbits(64):016x}",
                "type": "function",
                "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
            }
            for name, arguments in planned_calls(reply, tools, last_is_tool_result(messages))
        ]
        choices = body.get("n", 1)
        if choices is None:
            choices = 1
        if not isinstance(choices, int) or isinstance(choices, bool) or not 1 <= choices <= 128:
            return ErrorAnswer(400, f"Invalid 'n': expected an integer from 1 to 128, got {choices!r}.")
        pieces = split_text(reply.render(self.name, model), reply.chunks)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = "stop"
        if isinstance(limit, int) and 0 < limit < len(pieces):
            pieces, finish = pieces[:limit], "length"
        prompt_tokens = count_words(messages)
        completion_tokens = (len(calls) if calls else len(pieces)) * choices
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if reply.claims:
            usage.update(reply.claims)
        completion_id = f"chatcmpl-{random.getrandbits(64):016x}"
        created = int(time.time())
        if body.get("stream") is True:
            head = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
            }
            frames = []
            thought = None if calls else reply.reasoning
            for index in range(choices):
                frames.extend(self._choice_events(head, index, calls, pieces, finish, thought))
            options = body.get("stream_options")
            if isinstance(options, dict) and options.get("include_usage") is True and reply.usage:
                frames.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": usage}) + b"\n\n")
            return StreamAnswer(_SSE, frames, b"data: [DONE]\n\n")
        message: dict[str, Any]
        if calls:
            message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
        else:
            message = {"role": "assistant", "content": "".join(pieces)}
            if reply.reasoning is not None:
                message[REASONING] = reply.reasoning
        answer: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {"index": index, "message": message, "finish_reason": finish} for index in range(choices)
            ],
        }
        if reply.usage:
            answer["usage"] = usage
        return JsonAnswer(answer)

    @staticmethod
    def _choice_events(
        head: dict[str, Any],
        index: int,
        calls: list[dict[str, Any]],
        pieces: list[str],
        finish: str,
        thought: str | None = None,
    ) -> list[bytes]:
        """The stream events of choice ``index`` (``n`` choices follow one another); each tool call
        starts with its id and name, its arguments follow in two pieces; a ``thought`` comes first, in
        ``reasoning_content`` deltas, one per word (as llama-server streams it)."""
        frames = [_event(head, {"role": "assistant", "content": ""}, None, index)]
        for piece in split_text(thought, None) if thought else ():
            frames.append(_event(head, {REASONING: piece}, None, index))
        if calls:
            for number, call in enumerate(calls):
                function = call["function"]
                start = {**call, "index": number, "function": {"name": function["name"], "arguments": ""}}
                frames.append(_event(head, {"tool_calls": [start]}, None, index))
                for part in split_text(function["arguments"], 2):
                    delta = {"tool_calls": [{"index": number, "function": {"arguments": part}}]}
                    frames.append(_event(head, delta, None, index))
            frames.append(_event(head, {}, "tool_calls", index))
        else:
            frames.extend(_event(head, {"content": piece}, None, index) for piece in pieces)
            frames.append(_event(head, {}, finish, index))
        return frames

    def _responses(self, incoming: Incoming) -> Answer:
        """``POST /v1/responses``, stateless: a ``response`` object, or its typed events when streamed.

        Function tools may be called (``Reply.tool_calls``, as for chat); a hosted ``web_search`` tool
        is "run": a ``web_search_call`` item precedes the message, as OpenAI's answers show it."""
        error = self._refused(incoming) or self._unknown_model(incoming.model)
        if error is not None:
            return error
        body: dict[str, Any] = incoming.body
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        if not isinstance(items, list) or not items:
            return ErrorAnswer(400, "input must be a string or a non-empty array of items")
        if body.get("previous_response_id") is not None:
            return ErrorAnswer(400, "Previous response not found (this fake stores none).")
        model = incoming.model or ""
        offered = body.get("tools")
        tools: list[Any] = offered if isinstance(offered, list) else []
        functions = [
            {"type": "function", "function": tool}
            for tool in tools
            if isinstance(tool, dict) and tool.get("type") == "function"
        ]
        answered = isinstance(items[-1], dict) and items[-1].get("type") == "function_call_output"
        calls = planned_calls(self.reply, functions, answered)
        pieces = split_text(self.reply.render(self.name, model), self.reply.chunks)
        output = _response_output(tools, calls, pieces)
        prompt = count_words([i for i in items if isinstance(i, dict)])
        completion = len(calls) or len(pieces)
        usage = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        }
        response: dict[str, Any] = {
            "id": _rid("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "model": model,
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "store": body.get("store", True),
            "tools": tools,
            "usage": usage if self.reply.usage else None,
            "metadata": body.get("metadata") or {},
        }
        if body.get("stream") is not True:
            return JsonAnswer(response)
        return StreamAnswer(_SSE, _response_events(response, pieces))

    def _embeddings(self, incoming: Incoming) -> Answer:
        error = self._refused(incoming) or self._unknown_model(incoming.model)
        error = error or self._unknown_field(incoming, "embeddings")
        if error is not None:
            return error
        body: dict[str, Any] = incoming.body
        texts = _embedding_inputs(body.get("input"))
        if texts is None:
            return ErrorAnswer(
                400, "input must be a string, an array of strings, or an array of token arrays"
            )
        dimensions = body.get("dimensions")
        size = dimensions if isinstance(dimensions, int) and dimensions > 0 else self.embedding_dimensions
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = embedding_for(text, size)
            encoded: Any = embedding_base64(vector) if as_base64 else vector
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(t.split()) for t in texts)
        return JsonAnswer(
            {
                "object": "list",
                "data": data,
                "model": incoming.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


def _known_fields() -> dict[str, frozenset[str]]:
    """The request fields OpenAI's API defines, as its SDK declares them (imported only when strict)."""
    from openai.types import embedding_create_params
    from openai.types.chat import completion_create_params

    return {
        "chat": frozenset(completion_create_params.CompletionCreateParamsStreaming.__annotations__),
        "embeddings": frozenset(embedding_create_params.EmbeddingCreateParams.__annotations__),
    }


def _embedding_inputs(inputs: Any) -> list[str] | None:
    """Each input as text: strings as they are, a token array as its ids joined by spaces (one token
    a word, so usage counts tokens); None when the input has none of OpenAI's four shapes."""
    if isinstance(inputs, str):
        return [inputs]
    if not isinstance(inputs, list) or not inputs:
        return None
    if all(isinstance(t, str) for t in inputs):
        return inputs
    if all(_is_tokens(t) for t in inputs):
        return [" ".join(map(str, inputs))]
    if all(isinstance(t, list) and t and all(_is_tokens(i) for i in t) for t in inputs):
        return [" ".join(map(str, tokens)) for tokens in inputs]
    return None


def _is_tokens(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _event(head: dict[str, Any], delta: dict[str, Any], finish: str | None, index: int = 0) -> bytes:
    chunk = {**head, "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _response_output(
    tools: list[Any], calls: list[tuple[str, dict[str, Any]]], pieces: list[str]
) -> list[dict[str, Any]]:
    """A response's ``output`` items: a ``web_search_call`` when a hosted web_search tool is offered, then
    the function calls, or else the message of ``pieces``."""
    output: list[dict[str, Any]] = []
    if any(isinstance(t, dict) and t.get("type") == "web_search" for t in tools):
        action = {"type": "search", "query": "fake search"}
        output.append({"type": "web_search_call", "id": _rid("ws"), "status": "completed", "action": action})
    for name, arguments in calls:
        output.append(
            {
                "type": "function_call",
                "id": _rid("fc"),
                "call_id": _rid("call"),
                "name": name,
                "arguments": orjson.dumps(arguments).decode(),
                "status": "completed",
            }
        )
    if not calls:
        text = {"type": "output_text", "text": "".join(pieces), "annotations": [], "logprobs": []}
        output.append(
            {
                "type": "message",
                "id": _rid("msg"),
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        )
    return output


def _rid(prefix: str) -> str:
    return f"{prefix}_{random.getrandbits(96):024x}"


def _typed(events: list[bytes], kind: str, **data: Any) -> None:
    event = {"type": kind, "sequence_number": len(events), **data}
    events.append(b"event: %b\ndata: %b\n\n" % (kind.encode(), orjson.dumps(event)))


def _response_events(response: dict[str, Any], pieces: list[str]) -> list[bytes]:
    """A ``response``'s stream, as OpenAI sends one: created, in_progress, each output item added, its
    deltas and done events, then completed (the whole response)."""
    events: list[bytes] = []
    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    _typed(events, "response.created", response=opening)
    _typed(events, "response.in_progress", response=opening)
    for index, item in enumerate(response["output"]):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            _typed(events, "response.output_item.added", output_index=index, item={**item, "content": []})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            _typed(events, "response.content_part.added", **where, content_index=0, part=part)
            for piece in pieces:
                _typed(
                    events, "response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[]
                )
            text = item["content"][0]["text"]
            _typed(events, "response.output_text.done", **where, content_index=0, text=text, logprobs=[])
            _typed(events, "response.content_part.done", **where, content_index=0, part=item["content"][0])
        elif item["type"] == "function_call":
            added = {**item, "arguments": "", "status": "in_progress"}
            _typed(events, "response.output_item.added", output_index=index, item=added)
            for piece in split_text(item["arguments"], 2):
                _typed(events, "response.function_call_arguments.delta", **where, delta=piece)
            _typed(events, "response.function_call_arguments.done", **where, arguments=item["arguments"])
        else:  # a hosted tool's call: added in progress, done completed
            _typed(
                events,
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress"},
            )
        _typed(events, "response.output_item.done", output_index=index, item=item)
    _typed(events, "response.completed", response=response)
    return events


def main(argv: Sequence[str] | None = None) -> None:
    from interlock.testing.run_fake import run_fake

    def build(args: Any) -> FakeServer:
        models = args.models.split(",") if args.models else None
        return FakeOpenAI(
            name=args.name,
            api_key=args.api_key,
            models=models,
            reply=args.reply,
            strict=args.strict,
            record=not args.no_record,
            port=args.port,
            server=args.server,
        )

    run_fake("fake_openai", build, argv, extra=_extra_args)


def _extra_args(parser: Any) -> None:
    parser.add_argument("--api-key", default=None, help="demand `Authorization: Bearer <key>`")
    parser.add_argument("--models", default=None, help="comma-separated model names to accept (default: any)")
    parser.add_argument("--strict", action="store_true", help="answer 400 to fields OpenAI does not define")
    parser.add_argument(
        "--server", default=None, help="serve /metrics (and /slots) as vllm, sglang or llama.cpp"
    )


if __name__ == "__main__":
    main()


def chatml(messages: Any, tools: Any) -> str:
    """The fake's chat template: ChatML, the tools' JSON (when written) in a system turn first."""
    out = []
    if tools:
        out.append(f"<|im_start|>system\n{orjson.dumps(tools).decode()}<|im_end|>\n")
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, dict):
            content = message.get("content")
            text = content if isinstance(content, str) else orjson.dumps(content).decode()
            out.append(f"<|im_start|>{message.get('role')}\n{text}<|im_end|>\n")
    return "".join(out) + "<|im_start|>assistant\n"


def tokenize(text: str) -> int:
    """The fake's tokenizer: a word, a run of digits or one other character is a token; a special
    marker (``<|im_start|>``) is one."""
    return len(_TOKEN.findall(text))


_TOKEN = re.compile(r"<\|[a-z_]+\|>|[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")
