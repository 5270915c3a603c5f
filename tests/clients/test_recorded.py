"""Requests recorded from real clients (tests/fixtures/clients/), replayed through the gateway to each
upstream format: each is answered 200 in the client's own shape, and what a target format cannot carry
is named in ``X-Interlock-Dropped``, never refused as a whole.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.clients.conftest import Fakes, tool_results
from tests.e2e.harness import Served

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "clients"
TARGETS = ["cl/claude", "cl/openai", "cl/local"]
PROVIDER_HEADERS = ("anthropic-beta", "anthropic-version", "x-app", "user-agent")


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((RECORDED / name).read_bytes())
    return data


def replay(gateway: Served, record: dict[str, Any], model: str, **changes: Any) -> httpx.Response:
    body = {**copy.deepcopy(record["body"]), "model": model, **changes}
    headers = {k: v for k, v in record["headers"].items() if k.lower() in PROVIDER_HEADERS}
    path = record["path"] + (f"?{record['query']}" if record["query"] else "")
    return gateway.http.post(
        path, content=orjson.dumps(body), headers={**headers, "content-type": "application/json"}
    )


def dropped(response: httpx.Response) -> list[str]:
    return [name.strip() for name in response.headers.get("x-interlock-dropped", "").split(",") if name]


@pytest.mark.parametrize("model", TARGETS)
def test_claude_code_s_first_request(gateway: Served, model: str) -> None:
    response = replay(gateway, recorded("claude-code-2.1.197_v1_messages.json"), model, stream=False)
    assert response.status_code == 200, response.text
    assert response.json()["type"] == "message"
    assert response.json()["model"] == model
    if model != "cl/claude":  # what a chat upstream has no room for is named
        assert {"cache_control", "metadata", "context_management", "output_config"} <= set(dropped(response))


def test_without_the_beta_a_misplaced_system_turn_is_refused_in_anthropic_s_words(gateway: Served) -> None:
    """Claude Code retries without such turns only when the 400 says ``Unexpected role "system"``."""
    record = recorded("claude-code-2.1.197_v1_messages.json")
    record = {**record, "headers": {k: v for k, v in record["headers"].items() if k != "anthropic-beta"}}
    response = replay(gateway, record, "cl/claude", stream=False)
    assert response.status_code == 400
    assert 'Unexpected role "system"' in response.json()["error"]["message"]


CLAUDE_CODE = (  # Claude Code 2.1.337 (`claude -p`, its defaults), recorded by tests/clients/record.py
    "claude-code-2.1.337_v1_messages.json",  # its first request: 12 tools, one deferred
    "claude-code-2.1.337_v1_messages_tool-result.json",  # the turn after its Read tool ran
)
# what a chat upstream has no place for in those requests: every one named, none lost silently
CLAUDE_CODE_DROPPED = {
    "thinking.display",  # {type: adaptive, display: omitted}: adaptive leaves it to the model
    "metadata",
    "context_management",
    "output_config",
    "cache_control",
    "anthropic-beta",  # the betas it asked for: only an Anthropic upstream takes them
}


@pytest.mark.parametrize("model", TARGETS)
@pytest.mark.parametrize("name", CLAUDE_CODE)
def test_claude_code_s_newest_requests(gateway: Served, fakes: Fakes, name: str, model: str) -> None:
    """To an Anthropic upstream as they came (``defer_loading`` too); to a chat upstream, translated:
    the deferred tool stays out of the prompt (as Anthropic keeps it out of the model's), the rest of
    the tools go (``ToolSearch`` among them), and what cannot go is named, exactly."""
    record = recorded(name)
    upstream = {"cl/claude": fakes.claude, "cl/openai": fakes.alpha, "cl/local": fakes.box}[model]
    upstream.clear_requests()
    response = replay(gateway, record, model, stream=False)
    assert response.status_code == 200, response.text
    assert response.json()["type"] == "message"
    (sent,) = [r.body for r in upstream.requests if r.path in CHAT_PATHS]
    tools = record["body"]["tools"]
    deferred = [tool["name"] for tool in tools if tool.get("defer_loading")]
    assert deferred == ["DeferredToolPlaceholder"]
    if model == "cl/claude":
        assert dropped(response) == []
        assert {**sent, "stream": False} == {**record["body"], "model": "claude-fake", "stream": False}
        return
    assert set(dropped(response)) == CLAUDE_CODE_DROPPED
    offered = [name for name, _ in tool_schemas(sent)]
    assert offered == [tool["name"] for tool in tools if not tool.get("defer_loading")]
    assert "ToolSearch" in offered


CODEX = (  # Codex 0.171.0 (`codex exec`, its defaults), recorded by tests/clients/record.py
    "codex-0.171.0_v1_responses.json",  # its first request: 9 tools, a namespace and web_search among them
    "codex-0.171.0_v1_responses_tool-result.json",  # the turn after its exec_command ran
)
CODEX_DROPPED = {
    "tools.web_search",  # a hosted tool: the provider runs it
    "tools.namespace.description",  # multi_agent_v1's own words (its functions go, flattened)
    "include",  # reasoning.encrypted_content: only OpenAI writes it
    "prompt_cache_key",
    "client_metadata",
}


@pytest.mark.parametrize("model", TARGETS)
@pytest.mark.parametrize("name", CODEX)
def test_codex_s_newest_requests(gateway: Served, fakes: Fakes, name: str, model: str) -> None:
    record = recorded(name)
    response = replay(gateway, record, model, stream=False)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed"
    assert set(dropped(response)) == CODEX_DROPPED


CODEX_DEFAULT_TOOLS = [  # what Codex 0.171 adds with its defaults (the recording had them turned off)
    {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "Spawn and steer sub-agents.",
        "tools": [
            {
                "type": "function",
                "name": "spawn_agent",
                "description": "Start a sub-agent.",
                "strict": False,
                "parameters": {
                    "type": "object",
                    "properties": {"task": {"type": "string"}},
                    "required": ["task"],
                },
            }
        ],
    },
    {"type": "web_search", "external_web_access": False},
]


@pytest.mark.parametrize("model", TARGETS)
def test_codex_s_first_request_with_its_default_tools(gateway: Served, fakes: Fakes, model: str) -> None:
    record = recorded("codex-0.171_v1_responses.json")
    tools = [*record["body"]["tools"], *CODEX_DEFAULT_TOOLS]
    fakes.alpha.clear_requests()
    response = replay(gateway, record, model, tools=tools)
    assert response.status_code == 200, response.text
    assert response.text.rstrip().splitlines()[-1].startswith("data: ")
    assert '"type":"response.completed"' in response.text
    assert "tools.web_search" in dropped(response)
    if model == "cl/openai":  # the namespace's function tool went up among the others
        sent = [r.body for r in fakes.alpha.requests if r.model == "gpt-fake"][-1]
        names = [tool["function"]["name"] for tool in sent["tools"]]
        assert "spawn_agent" in names
        assert "exec_command" in names


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_of_a_namespaced_tool_comes_back_with_its_namespace(gateway: Served, stream: bool) -> None:
    """The tool-calling fake calls ``exec_command``; here it is offered only inside a namespace."""
    record = recorded("codex-0.171_v1_responses.json")
    function = next(t for t in record["body"]["tools"] if t["name"] == "exec_command")
    tools = [{"type": "namespace", "name": "shell_v1", "description": "a shell", "tools": [function]}]
    response = replay(gateway, record, "cl/openai-tools", tools=tools, stream=stream)
    assert response.status_code == 200, response.text
    if stream:
        events = [orjson.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        items = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    else:
        items = response.json()["output"]
    calls = [(item["name"], item.get("namespace")) for item in items if item["type"] == "function_call"]
    assert calls == [("exec_command", "shell_v1")]


OPEN_WEBUI = (  # recorded by examples/open_webui/run.sh: a chat in its page, its built-in tools on
    "open-webui-0.12.4_api_chat_builtin-tools.json",  # over its Ollama connection
    "open-webui-0.12.4_v1_chat_completions_builtin-tools.json",  # over its OpenAI connection
)
UPSTREAM_MODELS = {"cl/claude": "claude-fake", "cl/openai": "gpt-fake", "cl/local": "llama3.2:3b"}


def answered_text(response: httpx.Response, path: str) -> str:
    """The text of a streamed answer, in the client's own format: Ollama's NDJSON or OpenAI's SSE."""
    if path == "/api/chat":
        lines = [orjson.loads(line) for line in response.text.splitlines() if line]
        assert lines[-1]["done"] is True
        return "".join(line["message"]["content"] for line in lines)
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(event) for event in events[:-1]]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


@pytest.mark.parametrize("model", TARGETS)
@pytest.mark.parametrize("name", OPEN_WEBUI)
def test_open_webui_s_chat_with_its_built_in_tools(
    gateway: Served, fakes: Fakes, name: str, model: str
) -> None:
    """Open WebUI sends its 36 built-in tools (~25 kB of schemas) with every chat from its page: each
    upstream format is asked with all of them and the answer streams back in Open WebUI's format."""
    record = recorded(name)
    assert len(record["body"]["tools"]) == 36
    upstream = {"cl/claude": fakes.claude, "cl/openai": fakes.alpha, "cl/local": fakes.box}[model]
    upstream.clear_requests()
    response = replay(gateway, record, model)
    assert response.status_code == 200, response.text
    assert (
        answered_text(response, record["path"])
        == f"Hello from {upstream.name}, model {UPSTREAM_MODELS[model]}."
    )
    (sent,) = [r.body for r in upstream.requests if r.path in CHAT_PATHS]
    assert tool_schemas(sent) == tool_schemas(record["body"])  # every tool, its schema as Open WebUI wrote it
    assert dropped(response) == []  # every field Open WebUI sends has a place in every format


CHAT_PATHS = ("/v1/messages", "/v1/chat/completions", "/api/chat")
OPEN_WEBUI_TOOL_RESULTS = (  # the turn after the upstream called get_current_timestamp, which Open WebUI ran
    "open-webui-0.12.4_api_chat_builtin-tools_tool-result.json",  # Ollama's shape: arguments an object
    "open-webui-0.12.4_v1_chat_completions_builtin-tools_tool-result.json",  # OpenAI's: a JSON string
)


@pytest.mark.parametrize("model", TARGETS)
@pytest.mark.parametrize("name", OPEN_WEBUI_TOOL_RESULTS)
def test_open_webui_s_tool_result_turn(gateway: Served, fakes: Fakes, name: str, model: str) -> None:
    """Open WebUI sends the tool's result back with the call it answers: each upstream format gets the
    call and the result paired (Anthropic: the ``tool_use`` id the ``tool_result`` names)."""
    record = recorded(name)
    result = record["body"]["messages"][-1]
    assert result["role"] == "tool"
    upstream = {"cl/claude": fakes.claude, "cl/openai": fakes.alpha, "cl/local": fakes.box}[model]
    upstream.clear_requests()
    response = replay(gateway, record, model)
    assert response.status_code == 200, response.text
    assert (
        answered_text(response, record["path"])
        == f"Hello from {upstream.name}, model {UPSTREAM_MODELS[model]}."
    )
    (sent,) = [r.body for r in upstream.requests if r.path in CHAT_PATHS]
    assert tool_results(sent) == [result["content"]]
    assert called(sent) == [("get_current_timestamp", {})]
    assert paired(sent)
    assert dropped(response) == []


def paired(body: dict[str, Any]) -> bool:
    """Whether each tool result names the call it answers: by id (Anthropic's ``tool_use_id``, OpenAI's
    ``tool_call_id``) or, in Ollama's shape, by the tool's name (``tool_name``)."""
    messages = body["messages"]
    blocks = [b for m in messages if isinstance(m.get("content"), list) for b in m["content"]]
    if any(b.get("type") == "tool_use" for b in blocks):
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        return uses == [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    calls = [call for m in messages for call in m.get("tool_calls") or ()]
    results = [m for m in messages if m["role"] == "tool"]
    if "tool_name" in results[0]:
        return [c["function"]["name"] for c in calls] == [r["tool_name"] for r in results]
    return [c["id"] for c in calls] == [r["tool_call_id"] for r in results]


def called(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The tool calls a request's conversation holds, (name, arguments as an object), in any format."""
    calls: list[tuple[str, Any]] = []
    for message in body["messages"]:
        for call in message.get("tool_calls") or ():
            arguments = call["function"]["arguments"]
            calls.append(
                (
                    call["function"]["name"],
                    orjson.loads(arguments) if isinstance(arguments, str) else arguments,
                )
            )
        for block in message["content"] if isinstance(message.get("content"), list) else ():
            if block.get("type") == "tool_use":
                calls.append((block["name"], block["input"]))
    return calls


def tool_schemas(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The tools a request offers, (name, parameter schema) in order, from Anthropic's shape or OpenAI's
    (which Ollama's is)."""
    return [
        (tool["name"], tool["input_schema"])
        if "input_schema" in tool
        else (tool["function"]["name"], tool["function"]["parameters"])
        for tool in body.get("tools") or ()
    ]


@pytest.mark.parametrize("model", TARGETS)
def test_the_agents_sdk_s_request(gateway: Served, model: str) -> None:
    response = replay(gateway, recorded("openai-agents-0.24_v1_responses.json"), model)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed"
