"""What each client needs to talk to a gateway through one alias: one renderer per client, one table.

A renderer is given what the gateway says about the alias (``AliasFacts``: its guaranteed window, the
smallest of its chain, as ``POST /api/show`` reports it) and returns the text to paste: shell ``export``
lines, a Codex ``config.toml`` part, Open WebUI's connection settings, a LiteLLM ``model_list`` entry.
The caller key is never printed: only the variable that holds it. Every text is written for its
grammar and parsed back before it is returned (``grammar``); a coding agent's lines come from running
the agent (``agents``), and a window that cannot hold it is ``Refused``.

The output ceiling of the SDKs: a plan declares no per-model output limit. The gateway lowers a limit
that does not fit after the prompt (``preflight.max_tokens: ceiling``, the default) or refuses it
(``strict``: ``context_too_small``); either way a client that plans its output on 32,000 tokens in an
8,192-token window is wrong about what it gets. So where a client has a setting for it, its ceiling is
its own default capped at a quarter of the window (``AliasFacts.output_ceiling``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from interlock.connect.agents import claude_code, codex
from interlock.connect.alias_facts import NO_KEY, AliasFacts, Refused
from interlock.connect.grammar import Shell, comment, quoted, visible, yaml_document

Render = Callable[[AliasFacts], str]

SDK_OUTPUT = 4_096  # what the examples pass as max_tokens (the Anthropic SDK requires one)


def _head(client: str, facts: AliasFacts) -> Shell:
    shell = Shell()
    shell.comment(f"{client} -> interlock at {facts.url}, alias `{facts.alias}` (window: {facts.window})")
    if facts.key_env is None:
        shell.comment("the gateway took a request without a caller key: any key will do")
    return shell


def open_webui(facts: AliasFacts) -> str:
    shell = _head("Open WebUI", facts)
    shell.comment("both connections at the gateway (the Ollama one shows the alias's window)")
    shell.export("OLLAMA_BASE_URL", facts.url)
    shell.export("OPENAI_API_BASE_URL", facts.url + "/v1")
    shell.export("OPENAI_API_KEY", facts.key)
    if facts.context_tokens is not None:
        shell.comment(
            f"in Workspace > Models > {facts.alias} > Advanced Params: "
            f"num_ctx (Ollama) = {facts.context_tokens}, max_tokens = {facts.output_ceiling(SDK_OUTPUT)}"
        )
    return shell.text()


def _sdk(client: str, facts: AliasFacts, base: tuple[str, str], key: str, call: str) -> str:
    """An SDK's two variables (its base URL and key) and the call to make, capped to the alias."""
    shell = _head(client, facts)
    shell.export(*base)
    shell.export(key, facts.key)
    shell.comment(f"{call}(model={_py(facts.alias)}, max_tokens={facts.output_ceiling(SDK_OUTPUT)}, ...)")
    return shell.text()


def openai_sdk(facts: AliasFacts) -> str:
    base = ("OPENAI_BASE_URL", facts.url + "/v1")
    return _sdk("OpenAI SDK", facts, base, "OPENAI_API_KEY", "client.chat.completions.create")


def anthropic_sdk(facts: AliasFacts) -> str:
    base = ("ANTHROPIC_BASE_URL", facts.url)
    return _sdk("Anthropic SDK", facts, base, "ANTHROPIC_API_KEY", "client.messages.create")


def agents_sdk(facts: AliasFacts) -> str:
    shell = _head("OpenAI Agents SDK", facts)
    shell.comment("tracing off: the SDK would send each run's traces to OpenAI")
    shell.export("OPENAI_BASE_URL", facts.url + "/v1")
    shell.export("OPENAI_API_KEY", facts.key)
    shell.export("OPENAI_AGENTS_DISABLE_TRACING", "1")
    ceiling = facts.output_ceiling(SDK_OUTPUT)
    model = facts.alias
    if "/" in model:  # the SDK reads `co/` of `co/local` as a provider prefix; `openai/` is its own
        shell.comment("`openai/` in front: the SDK takes what comes before the first `/` for a provider")
        model = f"openai/{model}"
    shell.comment(f"Agent(..., model={_py(model)}, model_settings=ModelSettings(max_tokens={ceiling}))")
    return shell.text()


def litellm(facts: AliasFacts) -> str:
    key = f"os.environ/{facts.key_env}" if facts.key_env else NO_KEY
    head = comment(f"LiteLLM -> interlock at {facts.url}, alias `{facts.alias}` (window: {facts.window})")
    head += comment("the LiteLLM proxy's config.yaml (or litellm.Router(model_list=...))")
    params = {"model": "openai/" + facts.alias, "api_base": facts.url + "/v1", "api_key": key}
    entry: dict[str, object] = {"model_name": facts.alias, "litellm_params": params}
    lines = [
        "model_list:",
        f"  - model_name: {quoted(facts.alias)}",
        "    litellm_params:",
        *(f"      {name}: {quoted(value)}" for name, value in params.items()),
    ]
    if facts.context_tokens is not None:
        info = {
            "max_input_tokens": facts.context_tokens,
            "max_output_tokens": facts.output_ceiling(SDK_OUTPUT),
        }
        entry["model_info"] = info
        lines += ["    model_info:", *(f"      {name}: {value}" for name, value in info.items())]
    return yaml_document(head, lines, {"model_list": [entry]})


def _py(text: str) -> str:
    """A Python string literal of ``text`` for a comment (one line whatever it holds)."""
    return visible(json.dumps(text, ensure_ascii=False))


CLIENTS: Mapping[str, Render] = {
    "claude-code": claude_code,
    "codex": codex,
    "open-webui": open_webui,
    "openai-sdk": openai_sdk,
    "anthropic-sdk": anthropic_sdk,
    "agents-sdk": agents_sdk,
    "litellm": litellm,
}

__all__ = ["CLIENTS", "NO_KEY", "AliasFacts", "Refused", "Render"]
