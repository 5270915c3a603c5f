"""The OpenAI Agents SDK, with its Responses model and its Chat Completions model, through the gateway
to each upstream format: a function tool is called, run by the SDK, and its result goes back up."""

from __future__ import annotations

import pytest
from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.clients.conftest import Fakes, tool_results
from tests.e2e.harness import Served

FORECAST = "sunny-7c2e in Paris"  # what the tool answers: proof it ran and its result went up


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny-7c2e in {city}"


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize(
    ("alias", "fake"),
    [("cl/claude-tools", "claudetools"), ("cl/openai-tools", "alphatools"), ("cl/local-tools", "boxtools")],
    ids=["anthropic", "openai", "ollama"],
)
def test_an_agent_calls_its_tool_and_answers(
    gateway: Served, fakes: Fakes, api: str, alias: str, fake: str
) -> None:
    set_tracing_disabled(True)  # the SDK would send traces to OpenAI
    client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="sk-caller", max_retries=0)
    model: Model = (
        OpenAIResponsesModel(alias, client)
        if api == "responses"
        else OpenAIChatCompletionsModel(alias, client)
    )
    server = getattr(fakes, fake)
    server.clear_requests()
    agent = Agent(name="weather", instructions="Be brief.", tools=[get_weather], model=model)
    result = Runner.run_sync(agent, "What is the weather in Paris?")
    assert str(result.final_output).startswith(f"Hello from {fake}")
    bodies = [r.body for r in server.requests if isinstance(r.body, dict)]
    assert any(FORECAST in text for body in bodies for text in tool_results(body))
