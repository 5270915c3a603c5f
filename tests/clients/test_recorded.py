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

from tests.clients.conftest import Fakes
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


@pytest.mark.parametrize("model", TARGETS)
def test_open_webui_s_chat_with_its_built_in_tools(gateway: Served, model: str) -> None:
    """Open WebUI sends ~36 tool schemas (26 kB) with every chat when its built-in tools are on."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"builtin_tool_{n}",
                "description": "An Open WebUI built-in tool. " * 20,
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "what to look up " * 5}},
                    "required": ["query"],
                },
            },
        }
        for n in range(36)
    ]
    record = recorded("open-webui-0.12.4_api_chat.json")
    assert len(orjson.dumps(tools)) > 26_000
    response = replay(gateway, record, model, tools=tools)
    assert response.status_code == 200, response.text
    assert response.json()["done"] is True


@pytest.mark.parametrize("model", TARGETS)
def test_the_agents_sdk_s_request(gateway: Served, model: str) -> None:
    response = replay(gateway, recorded("openai-agents-0.24_v1_responses.json"), model)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed"
