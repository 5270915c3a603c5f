"""Anthropic Messages, the client side's request: a Messages request as the internal (Chat-shaped) form,
and the names of what that form cannot carry (``X-Interlock-Dropped``).

``system`` becomes the first message; content blocks map one to one (``text`` -> text parts, ``image`` ->
an ``image_url`` part, an assistant's ``tool_use`` -> ``tool_calls``, a user's ``tool_result`` -> a
``tool`` message placed before the rest of that turn, ``thinking`` -> the turn's ``reasoning_content``,
the field llama-server and vLLM read back into the prompt); ``role: "system"`` turns inside ``messages``
stay system turns where they stand; ``tools`` -> function tools (``strict`` kept; ``defer_loading: true``
ones left out, as Anthropic leaves them out of the model's prompt, until a ``tool_reference`` in a tool
result loads them); ``tool_choice`` -> auto/required/named/none (``disable_parallel_tool_use`` ->
``parallel_tool_calls: false``); ``thinking``'s type -> ``think``. Named, never silently lost:
``cache_control``, top-level fields the form has no place for (``metadata``, ``output_config``,
``context_management``, ...), server tools (``tools.web_search_20250305``), other keys of a tool
(``tools.input_examples``), of ``thinking`` (``thinking.display``, ``thinking.budget_tokens``), of
``tool_choice`` and of a content block (``text.citations``), ``redacted_thinking`` blocks, and tool-result
parts a ``tool`` message cannot hold (``tool_result.image``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.runtime.base.asgi import json_type
from interlock.runtime.base.errors import InvalidRequest
from interlock.runtime.wire.anthropic_caller import openai_call, source_url, text_of
from interlock.runtime.wire.openai_chat import NO_EXTRAS


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
                _name(f"{kind}.{key}", dropped)


def _result_text(content: Any, dropped: list[str]) -> str:
    """A ``tool_result``'s content as the text a ``tool`` message holds: its text parts; a
    ``tool_reference`` (tool search) loads its tool (``_loaded``) and says nothing; any other part
    (an image, a document) has no place in a tool message and is named (``tool_result.image``)."""
    if isinstance(content, list):
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in ("text", "tool_reference"):
                _name(f"tool_result.{kind}", dropped)
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
            _name("redacted_thinking", dropped)  # encrypted: only Anthropic reads it
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
            _name(f"tools.{kind}", dropped)
            continue
        for key in tool:
            if key not in _TOOL_READ:
                _name(f"tools.{key}", dropped)
        if tool.get("defer_loading") is True and tool["name"] not in loaded:
            continue
        function: dict[str, Any] = {"name": tool["name"], "parameters": tool.get("input_schema") or {}}
        if tool.get("description"):
            function["description"] = tool["description"]
        if isinstance(tool.get("strict"), bool):
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


def _name(name: str, dropped: list[str]) -> None:
    """``name`` in ``dropped``, once."""
    if name not in dropped:
        dropped.append(name)


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
            _name(f"thinking.{key}", dropped)


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
                        _name(f"tool_choice.{key}", dropped)
    _think(body.get("thinking"), internal, dropped)
    for key, value in body.items():
        if key not in _READ and value is not None:
            dropped.append(key)
    if _cache_marks(body):
        dropped.append("cache_control")
    return internal, dropped, NO_EXTRAS
