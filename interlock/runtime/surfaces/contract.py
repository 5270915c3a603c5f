"""What each route takes and answers, as JSON Schema: the routes' half of the OpenAPI document.

A request schema states what the gateway itself checks (required fields, their types, the shapes it
parses) and lists the other fields it knows, untyped: those are passed on, translated or dropped as
``wire/fields.py`` says, and the upstream judges their values. So a request the schema calls
valid is one the gateway accepts and sends on; one it calls invalid is answered with a 4xx before any
upstream is called. Answer schemas name what every answer carries. ``$ref: ModelName`` is the plan's
model names, filled in by ``runtime.ops.openapi`` (it is the only part that changes with the plan).

Every surface row (``route_table.rows``) and every admin route (``ops.routes``, their docs in
``ops.contract``) carries one ``Doc``; ``runtime.ops.openapi`` refuses a route without one, so the
document cannot lose a route.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from interlock.runtime.wire.fields import CHAT_FIELDS, EMBEDDING_FIELDS, NATIVE_FIELDS, Field

Schema = Mapping[str, Any]

MODEL: Schema = {"$ref": "#/components/schemas/ModelName"}
STRING: Schema = {"type": "string"}
TEXT: Schema = {"type": "string", "minLength": 1}
OBJECT: Schema = {"type": "object"}
FLAG: Schema = {"type": ["boolean", "null"]}
INTEGER: Schema = {"type": "integer"}
ANY: Schema = {}
UNSET: Schema = {  # JSON's falsy values: what "not set" means to a check like ``if body.get(key)``
    "anyOf": [
        {"enum": [None, False, "", 0]},
        {"type": "array", "maxItems": 0},
        {"type": "object", "maxProperties": 0},
    ]
}


@dataclass(frozen=True, slots=True)
class Doc:
    """One route's contract: a summary, its request body (None: it takes none), its answers by media type
    (JSON schemas; a string for text), the error shape (None: the route answers no errors of its own)
    and ``statuses``, the errors it documents besides 200 (keys of ``runtime.ops.openapi.STATUSES``)."""

    summary: str
    tag: str
    answers: Mapping[str, Schema]
    request: Schema | None = None
    error: Schema | None = None
    statuses: tuple[str, ...] = ()
    extra: Mapping[str, Schema] = field(default_factory=dict)  # other statuses' answers (e.g. 503)


def _obj(required: tuple[str, ...], **properties: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        out["required"] = list(required)
    return out


def _passed(rows: tuple[Field, ...], checked: Mapping[str, Schema]) -> dict[str, Schema]:
    """The known fields: the checked ones with their schema, the rest untyped with their handling."""
    out: dict[str, Schema] = {}
    for row in rows:
        out[row.name] = checked.get(row.name) or {
            "description": f"OpenAI-compatible: {row.openai}; Ollama: {row.ollama} ({row.note})"
        }
    return out


# -- errors (one shape per wire format) -------------------------------------------------------------

OPENAI_ERROR = _obj(
    ("error",),
    error=_obj(
        ("message", "type"),
        message=STRING,
        type=STRING,
        param={"type": ["string", "null"]},
        code={"type": ["string", "null"]},
    ),
)
OLLAMA_ERROR = _obj(("error",), error=STRING)
ANTHROPIC_ERROR = _obj(
    ("type", "error"),
    type={"const": "error"},
    error=_obj(("type", "message"), type=STRING, message=STRING),
)

LIFECYCLE = ("400", "402", "404", "405", "413", "429", "4XX", "503")  # the lifecycle's
PARSED = ("400", "404", "405", "413")  # a request parsed and resolved, never sent upstream

SSE_EVENT = _obj(("data",), event=STRING, data=STRING)  # one server-sent event, as OpenAPI 3.2 reads one
SSE = {"text/event-stream": SSE_EVENT}
NDJSON = {"application/x-ndjson": {"type": "string", "description": "one JSON object a line"}}

# -- OpenAI Chat Completions and Embeddings ---------------------------------------------------------

_MESSAGE_FIELDS = ("content", "name", "tool_calls", "tool_call_id", "reasoning", "reasoning_content")
_ROLE_MESSAGE = _obj(("role",), role=STRING, **dict.fromkeys(_MESSAGE_FIELDS, ANY))

CHAT_REQUEST = _obj(
    ("messages",),
    **_passed(
        CHAT_FIELDS + NATIVE_FIELDS,
        {
            "model": MODEL,
            "messages": {"type": "array", "minItems": 1, "items": _ROLE_MESSAGE},
            "stream": FLAG,
        },
    ),
)
CHAT_ANSWER = _obj(
    ("choices", "model"),
    id=STRING,
    object=STRING,
    model=STRING,
    choices={"type": "array", "items": OBJECT},
    usage={"type": ["object", "null"]},
)
EMBEDDINGS_REQUEST = _obj(
    ("input",),
    **_passed(
        EMBEDDING_FIELDS,
        {
            "model": MODEL,
            "input": {"anyOf": [STRING, {"type": "array", "minItems": 1}]},
        },
    ),
)
EMBEDDINGS_ANSWER = _obj(("data",), object=STRING, model=STRING, data={"type": "array", "items": OBJECT})

CHAT = Doc(
    "OpenAI Chat Completions (stream: true answers server-sent events)",
    "openai",
    {"application/json": CHAT_ANSWER, **SSE},
    CHAT_REQUEST,
    OPENAI_ERROR,
    LIFECYCLE,
)
EMBEDDINGS = Doc(
    "OpenAI Embeddings",
    "openai",
    {"application/json": EMBEDDINGS_ANSWER},
    EMBEDDINGS_REQUEST,
    OPENAI_ERROR,
    LIFECYCLE,
)

# -- Ollama native --------------------------------------------------------------------------------------

_NATIVE_PASSED = {name: ANY for name in ("options", "format", "keep_alive", "think", "tools")}
_IMAGES = {"type": ["array", "null"], "items": TEXT}
_NATIVE_CALL = _obj(("function",), id=ANY, function=_obj(("name",), name=STRING, arguments=ANY))
_NATIVE_MESSAGE = _obj(
    ("role",),
    role=STRING,
    content={"type": ["string", "null"]},
    images=_IMAGES,
    tool_calls={"type": ["array", "null"], "items": _NATIVE_CALL},
    tool_name=ANY,
    name=ANY,
    thinking=ANY,
)
NATIVE_CHAT_REQUEST = _obj(
    ("messages",),
    model=MODEL,
    messages={"type": "array", "minItems": 1, "items": _NATIVE_MESSAGE},
    stream=FLAG,
    **_NATIVE_PASSED,
)
GENERATE_REQUEST = _obj(
    ("prompt",),
    model=MODEL,
    prompt=TEXT,
    system=ANY,
    images=_IMAGES,
    stream=FLAG,
    **{
        name: {"description": "refused unless empty: use /api/chat", **UNSET}
        for name in ("raw", "template", "context", "suffix")
    },
    **{k: v for k, v in _NATIVE_PASSED.items() if k != "tools"},
)
_STRINGS = {"type": "array", "minItems": 1, "items": STRING}
EMBED_REQUEST = _obj(
    ("input",),
    model=MODEL,
    input={"anyOf": [STRING, _STRINGS]},
    dimensions=ANY,
    keep_alive=ANY,
)
LEGACY_REQUEST = _obj(("prompt",), model=MODEL, prompt=STRING, keep_alive=ANY)
SHOW_REQUEST = _obj(("model",), model={"type": "string", "minLength": 1}, name=ANY)

_DONE = {"done": {"type": "boolean"}, "done_reason": STRING, "created_at": STRING}
NATIVE_CHAT_ANSWER = _obj(
    ("model", "message", "done"),
    model=STRING,
    message=_obj(("role", "content"), role=STRING, content=STRING),
    **_DONE,
)
GENERATE_ANSWER = _obj(("model", "response", "done"), model=STRING, response=STRING, **_DONE)
_OLLAMA_MODEL = _obj(("name", "model"), name=STRING, model=STRING, details=OBJECT)
MODELS_LIST = _obj(("models",), models={"type": "array", "items": _OLLAMA_MODEL})

NATIVE_CHAT = Doc(
    "Ollama chat (stream defaults to true: newline-delimited JSON)",
    "ollama",
    {"application/json": NATIVE_CHAT_ANSWER, **NDJSON},
    NATIVE_CHAT_REQUEST,
    OLLAMA_ERROR,
    LIFECYCLE,
)
GENERATE = Doc(
    "Ollama generate: system + prompt as a chat (stream defaults to true)",
    "ollama",
    {"application/json": GENERATE_ANSWER, **NDJSON},
    GENERATE_REQUEST,
    OLLAMA_ERROR,
    LIFECYCLE,
)
EMBED = Doc(
    "Ollama embed",
    "ollama",
    {"application/json": _obj(("model", "embeddings"), model=STRING, embeddings={"type": "array"})},
    EMBED_REQUEST,
    OLLAMA_ERROR,
    LIFECYCLE,
)
LEGACY_EMBEDDINGS = Doc(
    "Ollama embeddings (the older single-prompt form)",
    "ollama",
    {"application/json": _obj(("embedding",), embedding={"type": "array"})},
    LEGACY_REQUEST,
    OLLAMA_ERROR,
    LIFECYCLE,
)
TAGS = Doc(
    "Ollama: the aliases (and direct models) the caller may use, as models",
    "ollama",
    {"application/json": MODELS_LIST},
    error=OLLAMA_ERROR,  # a 401's shape, under `auth`
)
SHOW = Doc(
    "Ollama: one alias's description, capabilities and context",
    "ollama",
    {
        "application/json": _obj(
            ("capabilities", "model_info"), capabilities={"type": "array"}, model_info=OBJECT
        )
    },
    SHOW_REQUEST,
    OLLAMA_ERROR,
    ("400", "404", "405", "413"),
)
PS = Doc(
    "Ollama: the models the workers report loaded",
    "ollama",
    {"application/json": MODELS_LIST},
    error=OLLAMA_ERROR,
)
VERSION = Doc(
    "Ollama: the API level this surface speaks",
    "ollama",
    {"application/json": _obj(("version",), version=STRING)},
)
ROOT = Doc("Ollama's liveness answer (`Ollama is running`)", "ollama", {"text/plain": STRING})

# -- Anthropic Messages -----------------------------------------------------------------------------

_BLOCK_FIELDS = ("text", "source", "id", "name", "input", "content", "tool_use_id", "is_error", "thinking")
_BLOCKS = {"type": "array", "items": _obj(("type",), type=STRING, **dict.fromkeys(_BLOCK_FIELDS, ANY))}
_ANTHROPIC_MESSAGE = _obj(
    ("role", "content"),
    role={"enum": ["user", "assistant"]},
    content={"anyOf": [STRING, _BLOCKS]},
)
_MESSAGES_FIELDS: dict[str, Schema] = {
    "model": MODEL,
    "messages": {"type": "array", "minItems": 1, "items": _ANTHROPIC_MESSAGE},
    "system": {"anyOf": [STRING, _BLOCKS, UNSET]},
    "stream": FLAG,
    "tools": {
        "anyOf": [
            {"type": "array", "items": _obj(("name",), name=STRING, description=ANY, input_schema=ANY)},
            UNSET,
        ]
    },
    "tool_choice": {"description": "with `tools`: auto, any, tool (with a name) or none; else ignored"},
    **{name: ANY for name in ("stop_sequences", "temperature", "top_p", "top_k", "thinking", "metadata")},
}
MESSAGES_REQUEST = _obj(
    ("messages", "max_tokens"), max_tokens={"type": "integer", "minimum": 1}, **_MESSAGES_FIELDS
)
COUNT_REQUEST = _obj(("messages",), max_tokens=ANY, **_MESSAGES_FIELDS)
MESSAGES_ANSWER = _obj(
    ("type", "role", "content", "stop_reason", "usage"),
    id=STRING,
    type={"const": "message"},
    role={"const": "assistant"},
    model=STRING,
    content={"type": "array", "items": _obj(("type",), type=STRING)},
    stop_reason={"type": ["string", "null"]},
    usage=_obj(("input_tokens", "output_tokens"), input_tokens=INTEGER, output_tokens=INTEGER),
)
MESSAGES = Doc(
    "Anthropic Messages (stream: true answers Anthropic's server-sent events)",
    "anthropic",
    {"application/json": MESSAGES_ANSWER, **SSE},
    MESSAGES_REQUEST,
    ANTHROPIC_ERROR,
    LIFECYCLE,
)
COUNT_TOKENS = Doc(
    "Anthropic count_tokens: the server's own count where it has a tokenizer (llama-server, vLLM, SGLang, "
    "Anthropic), else the estimate as learned there (X-Interlock-Counted: server or estimate)",
    "anthropic",
    {"application/json": _obj(("input_tokens",), input_tokens=INTEGER)},
    COUNT_REQUEST,
    ANTHROPIC_ERROR,
    PARSED,
)

# -- OpenAI Responses -------------------------------------------------------------------------------

_PART = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"enum": ["input_text", "output_text", "text", "input_image"]}},
    "if": {"properties": {"type": {"const": "input_image"}}},
    "then": {"required": ["image_url"], "properties": {"image_url": STRING}},
    "else": {"properties": {"text": STRING}},
}
_ITEM = {  # an item without a `type` is a message
    "type": "object",
    "properties": {"type": {"enum": ["message", "function_call", "function_call_output", "reasoning"]}},
    "if": {"properties": {"type": {"const": "message"}}},
    "then": {
        "required": ["role", "content"],
        "properties": {
            "role": {"enum": ["user", "assistant", "system", "developer"]},
            "content": {"anyOf": [STRING, {"type": "array", "items": _PART}]},
        },
    },
}
RESPONSES_REQUEST = _obj(
    ("input",),
    model=MODEL,
    input={"anyOf": [STRING, {"type": "array", "minItems": 1, "items": _ITEM}]},
    instructions=ANY,
    stream=FLAG,
    previous_response_id={"type": "null", "description": "refused: the gateway stores no responses"},
    tools={
        "anyOf": [
            {"type": "array", "items": _obj(("type", "name"), type={"const": "function"}, name=STRING)},
            UNSET,
        ]
    },
    tool_choice={"description": "with `tools`: auto, none, required or a function; else ignored"},
    **{name: ANY for name in ("max_output_tokens", "temperature", "top_p", "parallel_tool_calls", "user")},
    reasoning=ANY,
    text=ANY,
)
RESPONSES_ANSWER = _obj(
    ("id", "object", "status", "output"),
    id=STRING,
    object={"const": "response"},
    status=STRING,
    model=STRING,
    output={"type": "array", "items": _obj(("type",), type=STRING)},
    usage=OBJECT,
)
RESPONSES = Doc(
    "OpenAI Responses, stateless (stream: true answers typed server-sent events)",
    "openai",
    {"application/json": RESPONSES_ANSWER, **SSE},
    RESPONSES_REQUEST,
    OPENAI_ERROR,
    LIFECYCLE,
)
