"""A fake Ollama worker: /api/tags, /api/show, /api/ps, /api/chat (NDJSON or JSON), /api/generate,
/api/embed, /api/version.

Shapes follow docs/wire-formats.md: streams are NDJSON and on by default, the last chunk
carries ``done``, ``done_reason`` and the duration/count fields, native tool calls carry object
arguments. Models are declared with their capabilities: an unknown model answers 404 ``model "x" not
found, try pulling it first``, tools sent to a model without ``tools`` answer 400, and so does ``think``
sent to a model without ``thinking`` (thinking models answer with ``message.thinking``).

Model metadata as real Ollama reports it: ``/api/show`` gives capabilities, the model's maximum
(``model_info.<family>.context_length``) and the Modelfile's ``num_ctx`` in ``parameters``; ``/api/ps``
lists loaded models with the context they were loaded with (``ModelSpec.loaded_context``, else the
``options.num_ctx`` of the request that loaded them, else the Modelfile's, else 4096).
``fail_metadata()`` makes /api/show and /api/ps answer 500 (the /api/tags probe keeps passing);
``calls(model)`` counts the chat (or other) requests a model received. A load request (``/api/generate``
without a prompt, as a warm-up sends, or ``/api/chat`` with ``messages: []``) loads the model and
answers one JSON object with ``done_reason: "load"`` (``keep_alive`` 0: unloads it, ``"unload"``);
``keep_alive[model]`` is what the last request for it set (None: Ollama's default timer).

Tool calls: the first tool offered, with the arguments its JSON schema implies, or the calls scripted in
``Reply.tool_calls`` (several at once, as a model calling tools in parallel does); see ``replies``.

Run it out of process: ``python -m interlock.testing.fake_ollama --port 0`` prints its URL first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
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
    embedding_for,
    last_is_tool_result,
    planned_calls,
    split_text,
)

_NDJSON = "application/x-ndjson"
DEFAULT_CONTEXT = 4096  # what Ollama loads a model with when nothing sets num_ctx


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One installed model. ``num_ctx`` is what its Modelfile sets (shown by /api/show), if anything."""

    name: str
    capabilities: tuple[str, ...] = ("completion",)
    context_length: int = 8192
    family: str = "llama"
    parameter_size: str = "3B"
    quantization_level: str = "Q4_K_M"
    size: int = 2_019_393_189
    num_ctx: int | None = None
    loaded: bool = False
    loaded_context: int | None = None  # the context it is loaded with at start (implies loaded)

    @property
    def full_name(self) -> str:
        return self.name if ":" in self.name else f"{self.name}:latest"


DEFAULT_MODELS = (
    ModelSpec("llama3.2:3b", ("completion", "tools")),
    ModelSpec(
        "gemma3:12b",
        ("completion", "vision"),
        context_length=131072,
        family="gemma3",
        parameter_size="12.2B",
        size=8_149_190_253,
    ),
    ModelSpec(
        "nomic-embed-text",
        ("embedding",),
        context_length=2048,
        family="nomic-bert",
        parameter_size="137M",
        quantization_level="F16",
        size=274_302_450,
    ),
)


class FakeOllama(FakeServer):
    """An Ollama worker on loopback; ``url`` is the worker URL (no ``/v1``)."""

    kind = "fake-ollama"

    def __init__(
        self,
        *,
        name: str | None = None,
        models: Sequence[ModelSpec] = DEFAULT_MODELS,
        reply: Reply | None = None,
        version: str = "0.12.6",
        record: bool = True,
        port: int = 0,
    ) -> None:
        super().__init__(name=name, reply=reply, record=record, port=port)
        self.models = {spec.full_name: spec for spec in models}
        self.version = version
        self._loaded: dict[str, int] = {
            spec.full_name: spec.loaded_context or spec.num_ctx or DEFAULT_CONTEXT
            for spec in models
            if spec.loaded or spec.loaded_context
        }
        self._metadata_down = False
        self.keep_alive: dict[str, Any] = {}  # model -> the keep_alive the last request set (Ollama's timer)

    def routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/api/tags"): self._tags,
            ("POST", "/api/show"): self._show,
            ("GET", "/api/ps"): self._ps,
            ("POST", "/api/chat"): self._chat,
            ("POST", "/api/generate"): self._generate,
            ("POST", "/api/embed"): self._embed,
            ("GET", "/api/version"): self._version,
        }

    def error_body(self, status: int, message: str) -> bytes:
        return orjson.dumps({"error": message})

    def malformed_frame(self) -> bytes:
        return b'{"model": "broken", "message": {\n'

    def error_frame(self, message: str) -> bytes:
        return orjson.dumps({"error": message}) + b"\n"

    # ----- routes -----

    def _find(self, model: str | None) -> ModelSpec | ErrorAnswer:
        if not model:
            return ErrorAnswer(400, "model is required")
        spec = self.models.get(model if ":" in model else f"{model}:latest")
        if spec is None:
            return ErrorAnswer(404, f'model "{model}" not found, try pulling it first')
        return spec

    def _details(self, spec: ModelSpec) -> dict[str, Any]:
        return {
            "format": "gguf",
            "family": spec.family,
            "families": [spec.family],
            "parameter_size": spec.parameter_size,
            "quantization_level": spec.quantization_level,
        }

    def _entry(self, spec: ModelSpec) -> dict[str, Any]:
        return {
            "name": spec.full_name,
            "model": spec.full_name,
            "modified_at": "2025-06-01T12:00:00.000000000Z",
            "size": spec.size,
            "digest": hashlib.sha256(spec.full_name.encode()).hexdigest(),
            "details": self._details(spec),
        }

    def _tags(self, incoming: Incoming) -> Answer:
        return JsonAnswer({"models": [self._entry(spec) for spec in self.models.values()]})

    def _ps(self, incoming: Incoming) -> Answer:
        if self._metadata_down:
            return ErrorAnswer(500, "metadata unavailable (injected)")
        models = []
        for name, context in sorted(self._loaded.items()):
            spec = self.models[name]
            entry = self._entry(spec)
            del entry["modified_at"]
            entry.update(expires_at="2099-01-01T00:00:00Z", size_vram=spec.size, context_length=context)
            models.append(entry)
        return JsonAnswer({"models": models})

    # ----- preflight helpers: metadata failures, request counts, loading, thinking -----

    def fail_metadata(self, down: bool = True) -> None:
        """/api/show and /api/ps answer 500 while ``down`` (the /api/tags probe still passes)."""
        self._metadata_down = down

    def calls(self, model: str, path: str = "/api/chat") -> int:
        """How many requests to ``path`` named ``model`` (as sent, e.g. ``llama3.2:3b``)."""
        return sum(1 for r in self.requests if r.path == path and r.model == model)

    def loaded(self) -> dict[str, int]:
        """Loaded models and the context each was loaded with, as /api/ps reports them."""
        return dict(self._loaded)

    def _load(self, spec: ModelSpec, body: dict[str, Any]) -> None:
        """A request loads its model; with another ``num_ctx`` than loaded, Ollama reloads it. Every
        request resets the model's timer to its ``keep_alive``, or to the server's default when it names
        none (recorded as ``None``)."""
        self.keep_alive[spec.full_name] = body.get("keep_alive")
        options = body.get("options")
        asked = options.get("num_ctx") if isinstance(options, dict) else None
        if isinstance(asked, int) and asked > 0:
            self._loaded[spec.full_name] = asked
        elif spec.full_name not in self._loaded:
            self._loaded[spec.full_name] = spec.num_ctx or DEFAULT_CONTEXT

    def _load_only(self, spec: ModelSpec, body: dict[str, Any]) -> str:
        """A load request's work: ``keep_alive`` 0 unloads the model, anything else loads it; the
        ``done_reason`` Ollama answers with."""
        if body.get("keep_alive") in (0, "0", "0s"):
            self._loaded.pop(spec.full_name, None)
            return "unload"
        self._load(spec, body)
        return "load"

    def _think_refusal(self, spec: ModelSpec, body: dict[str, Any]) -> ErrorAnswer | None:
        think = body.get("think")
        if think in (None, False) or "thinking" in spec.capabilities:
            return None
        return ErrorAnswer(400, f'"{spec.full_name}" does not support thinking')

    def _thinking(self, spec: ModelSpec, body: dict[str, Any]) -> str | None:
        think = body.get("think")
        if think in (None, False) or "thinking" not in spec.capabilities:
            return None
        return f"Thinking ({think if isinstance(think, str) else 'on'}) about it."

    def _thinking_frame(self, model: str | None, created: str, thinking: str) -> bytes:
        message = {"role": "assistant", "content": "", "thinking": thinking}
        return _line({"model": model, "created_at": created, "message": message, "done": False})

    def _show(self, incoming: Incoming) -> Answer:
        if self._metadata_down:
            return ErrorAnswer(500, "metadata unavailable (injected)")
        body = incoming.body if isinstance(incoming.body, dict) else {}
        name = body.get("model") or body.get("name")
        spec = self._find(name if isinstance(name, str) else None)
        if isinstance(spec, ErrorAnswer):
            return spec
        parameters = 'stop                           "<|eot_id|>"\ntemperature                    0.7'
        if spec.num_ctx is not None:
            parameters = f"num_ctx                        {spec.num_ctx}\n" + parameters
        return JsonAnswer(
            {
                "license": "fake licence",
                "modelfile": f"FROM {spec.full_name}",
                "parameters": parameters,
                "template": "{{ .Prompt }}",
                "details": self._details(spec),
                "model_info": {
                    "general.architecture": spec.family,
                    f"{spec.family}.context_length": spec.context_length,
                },
                "capabilities": list(spec.capabilities),
                "modified_at": "2025-06-01T12:00:00.000000000Z",
            }
        )

    def _generate(self, incoming: Incoming) -> Answer:
        """``POST /api/generate``. Without a prompt it only loads the model (or, with ``keep_alive`` 0,
        unloads it) and answers one JSON object, stream or not, as Ollama's handler does:
        ``{"model", "created_at", "response": "", "done": true, "done_reason": "load"}``; an
        embedding-only model answers 400 ``"x" does not support generate``. With a prompt: a completion
        whose chunks carry ``response``."""
        spec = self._find(incoming.model)
        if isinstance(spec, ErrorAnswer):
            return spec
        if "completion" not in spec.capabilities:
            return ErrorAnswer(400, f'"{incoming.model}" does not support generate')
        body: dict[str, Any] = incoming.body
        created = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        prompt = body.get("prompt")
        if not prompt:
            reason = self._load_only(spec, body)
            head = {"model": incoming.model, "created_at": created, "response": ""}
            return JsonAnswer({**head, "done": True, "done_reason": reason})
        self._load(spec, body)
        pieces = split_text(self.reply.render(self.name, incoming.model or ""), self.reply.chunks)
        final = {
            "model": incoming.model,
            "created_at": created,
            "response": "",
            "done": True,
            "done_reason": "stop",
            "total_duration": 123_000_000,
            "load_duration": 1_000_000,
            "prompt_eval_count": len(str(prompt).split()),
            "prompt_eval_duration": 20_000_000,
            "eval_count": len(pieces),
            "eval_duration": 100_000_000,
        }
        if body.get("stream", True) is False:
            return JsonAnswer({**final, "response": "".join(pieces)})
        frames = [
            _line({"model": incoming.model, "created_at": created, "response": piece, "done": False})
            for piece in pieces
        ]
        return StreamAnswer(_NDJSON, [*frames, _line(final)])

    def _version(self, incoming: Incoming) -> Answer:
        return JsonAnswer({"version": self.version})

    def _chat(self, incoming: Incoming) -> Answer:
        spec = self._find(incoming.model)
        if isinstance(spec, ErrorAnswer):
            return spec
        body: dict[str, Any] = incoming.body
        messages = body.get("messages")
        if messages == []:  # Ollama's load request: the model is loaded (or unloaded), nothing generated
            created = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            reason = self._load_only(spec, body)
            empty = {"role": "assistant", "content": ""}
            return JsonAnswer(
                {"model": incoming.model, "created_at": created, "message": empty, "done": True}
                | {"done_reason": reason}
            )
        if not isinstance(messages, list):
            return ErrorAnswer(400, "messages must be an array")
        if body.get("tools") and "tools" not in spec.capabilities:
            return ErrorAnswer(400, f"registry.ollama.ai/library/{spec.full_name} does not support tools")
        refusal = self._think_refusal(spec, body)
        if refusal is not None:
            return refusal
        self._load(spec, body)
        thinking = self._thinking(spec, body)
        reply = self.reply
        calls = self._tool_calls(body, messages)
        tool = calls[0]["function"]["name"] if calls else None
        text = reply.render(self.name, incoming.model or "")
        if body.get("format"):
            text = orjson.dumps({"reply": text}).decode()
        pieces = split_text(text, reply.chunks) if tool is None else [""]
        options = body.get("options")
        limit = options.get("num_predict") if isinstance(options, dict) else None
        done_reason = "stop"
        if isinstance(limit, int) and 0 < limit < len(pieces):
            pieces, done_reason = pieces[:limit], "length"
        created = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        prompt_tokens = count_words(messages)
        final: dict[str, Any] = {
            "model": incoming.model,
            "created_at": created,
            "done": True,
            "done_reason": done_reason,
            "total_duration": 123_000_000,
            "load_duration": 1_000_000,
            "prompt_eval_count": prompt_tokens,
            "prompt_eval_duration": 20_000_000,
            "eval_count": len(pieces),
            "eval_duration": 100_000_000,
        }
        if body.get("stream", True) is False:
            message: dict[str, Any] = {"role": "assistant", "content": "".join(pieces)}
            if thinking is not None:
                message["thinking"] = thinking
            if calls:
                message["tool_calls"] = calls
            return JsonAnswer({**final, "message": message})
        frames = []
        if thinking is not None:
            frames.append(self._thinking_frame(incoming.model, created, thinking))
        if calls:
            chunk = {"role": "assistant", "content": "", "tool_calls": calls}
            frames.append(
                _line({"model": incoming.model, "created_at": created, "message": chunk, "done": False})
            )
        else:
            for piece in pieces:
                chunk = {"role": "assistant", "content": piece}
                frames.append(
                    _line({"model": incoming.model, "created_at": created, "message": chunk, "done": False})
                )
        frames.append(_line({**final, "message": {"role": "assistant", "content": ""}}))
        return StreamAnswer(_NDJSON, frames)

    def _tool_calls(self, body: dict[str, Any], messages: list[Any]) -> list[dict[str, Any]]:
        """Native tool calls (object arguments) for the tools the request offers: ``planned_calls``."""
        planned = planned_calls(self.reply, body.get("tools"), last_is_tool_result(messages))
        return [{"function": {"name": name, "arguments": arguments}} for name, arguments in planned]

    def _embed(self, incoming: Incoming) -> Answer:
        spec = self._find(incoming.model)
        if isinstance(spec, ErrorAnswer):
            return spec
        if "embedding" not in spec.capabilities:
            return ErrorAnswer(400, f'"{spec.full_name}" does not support embeddings')
        body: dict[str, Any] = incoming.body
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return ErrorAnswer(400, "invalid input type")
        self._load(spec, body)
        dimensions = body.get("dimensions")
        size = dimensions if isinstance(dimensions, int) and dimensions > 0 else 8
        return JsonAnswer(
            {
                "model": incoming.model,
                "embeddings": [embedding_for(t, size) for t in texts],
                "total_duration": 14_000_000,
                "load_duration": 1_000_000,
                "prompt_eval_count": sum(len(t.split()) for t in texts),
            }
        )


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def parse_model(text: str) -> ModelSpec:
    """``name`` or ``name=cap1,cap2`` (the command line's ``--model``)."""
    name, _, caps = text.partition("=")
    return ModelSpec(name, tuple(caps.split(",")) if caps else ("completion",))


def main(argv: Sequence[str] | None = None) -> None:
    from interlock.testing.run_fake import run_fake

    def build(args: Any) -> FakeServer:
        models = [parse_model(m) for m in args.model] if args.model else DEFAULT_MODELS
        return FakeOllama(
            name=args.name, models=models, reply=args.reply, record=not args.no_record, port=args.port
        )

    def extra(parser: Any) -> None:
        parser.add_argument(
            "--model", action="append", default=[], help="`name` or `name=cap1,cap2` (repeatable)"
        )

    run_fake("fake_ollama", build, argv, extra=extra)


if __name__ == "__main__":
    main()
