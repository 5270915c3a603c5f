"""What each client needs to talk to a gateway through one alias: one renderer per client, one table.

A renderer is given what the gateway says about the alias (``AliasFacts``: its context window, as
``POST /api/show`` reports it) and returns the text to paste: shell ``export`` lines, a Codex
``config.toml`` part, Open WebUI's connection settings, a LiteLLM ``model_list`` entry. The caller key
is never printed: only the variable that holds it.

The output ceiling: a plan declares no per-model output limit. The gateway lowers a limit that does
not fit after the prompt (``preflight.max_tokens: ceiling``, the default) or refuses it (``strict``:
``context_too_small``); either way a client that plans its output and its compaction on 32,000 tokens
in an 8,192-token window is wrong about what it gets. So where a client has a setting for it, its
ceiling is its own default capped at a quarter of the window (``output_ceiling``): a prompt of three
quarters of the window still fits it.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass

NO_KEY = "interlock-no-key"  # what a client that insists on a key sends to a gateway with auth off


@dataclass(frozen=True, slots=True)
class AliasFacts:
    url: str  # the gateway's base URL, without a trailing slash
    alias: str
    context_tokens: int | None  # the alias's window as the gateway reports it; None: unknown
    key_env: str | None  # the variable holding the caller key; None: the gateway needs none

    def output_ceiling(self, client_default: int) -> int:
        if self.context_tokens is None:
            return client_default
        return max(1, min(client_default, self.context_tokens // 4))

    @property
    def key(self) -> str:
        """The key as a shell word: the variable's expansion, or the placeholder."""
        return f'"${{{self.key_env}}}"' if self.key_env else NO_KEY


Render = Callable[[AliasFacts], str]

CLAUDE_CODE_OUTPUT = 32_000  # Claude Code's max_tokens for a model it does not know
SDK_OUTPUT = 4_096  # what the examples pass as max_tokens (the Anthropic SDK requires one)


def _exports(pairs: Mapping[str, str | int]) -> str:
    out = []
    for name, value in pairs.items():
        shown = value if isinstance(value, str) and value.startswith('"$') else shlex.quote(str(value))
        out.append(f"export {name}={shown}")
    return "\n".join(out) + "\n"


def _head(client: str, facts: AliasFacts) -> str:
    window = f"{facts.context_tokens} tokens" if facts.context_tokens is not None else "unknown"
    text = f"# {client} -> interlock at {facts.url}, alias `{facts.alias}` (context window: {window})\n"
    if facts.key_env is None:
        text += "# the gateway took a request without a caller key: any key will do\n"
    return text


def claude_code(facts: AliasFacts) -> str:
    models = ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL")
    pairs: dict[str, str | int] = {"ANTHROPIC_BASE_URL": facts.url, "ANTHROPIC_API_KEY": facts.key}
    pairs.update(
        dict.fromkeys((*models, "ANTHROPIC_DEFAULT_HAIKU_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"), facts.alias)
    )
    text = _head("Claude Code", facts)
    text += "# every model Claude Code picks (main, background, subagents) is the alias\n"
    if facts.context_tokens is not None:
        if facts.alias.startswith("claude-"):
            text += "# Claude Code ignores CLAUDE_CODE_MAX_CONTEXT_TOKENS for a name starting `claude-`\n"
        pairs["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] = (
            facts.context_tokens
        )  # the window of a model it does not know
        pairs["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = facts.context_tokens  # compact within it
    pairs["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = facts.output_ceiling(CLAUDE_CODE_OUTPUT)
    return text + _exports(pairs)


def codex(facts: AliasFacts) -> str:
    key_env = facts.key_env or "INTERLOCK_API_KEY"
    text = _head("Codex", facts)
    text += f"# in ~/.codex/config.toml (or $CODEX_HOME/config.toml); the key is read from ${key_env}\n"
    if facts.key_env is None:
        text += f"# export {key_env}={NO_KEY}\n"
    lines = [f"model = {_toml(facts.alias)}", 'model_provider = "interlock"']
    if facts.context_tokens is not None:
        lines.append(f"model_context_window = {facts.context_tokens}")
        lines.append(f"model_auto_compact_token_limit = {facts.context_tokens * 9 // 10}")
    lines += [
        "",
        "[model_providers.interlock]",
        'name = "interlock"',
        f"base_url = {_toml(facts.url + '/v1')}",
        'wire_api = "responses"',
        f"env_key = {_toml(key_env)}",
    ]
    return text + "\n".join(lines) + "\n"


def open_webui(facts: AliasFacts) -> str:
    text = _head("Open WebUI", facts)
    text += "# both connections at the gateway (the Ollama one shows the alias's window)\n"
    pairs: dict[str, str | int] = {
        "OLLAMA_BASE_URL": facts.url,
        "OPENAI_API_BASE_URL": facts.url + "/v1",
        "OPENAI_API_KEY": facts.key,
    }
    text += _exports(pairs)
    if facts.context_tokens is not None:
        text += (
            f"# in Workspace > Models > {facts.alias} > Advanced Params: "
            f"num_ctx (Ollama) = {facts.context_tokens}, max_tokens = {facts.output_ceiling(SDK_OUTPUT)}\n"
        )
    return text


def openai_sdk(facts: AliasFacts) -> str:
    text = _head("OpenAI SDK", facts)
    text += _exports({"OPENAI_BASE_URL": facts.url + "/v1", "OPENAI_API_KEY": facts.key})
    ceiling = facts.output_ceiling(SDK_OUTPUT)
    return text + f'# client.chat.completions.create(model="{facts.alias}", max_tokens={ceiling}, ...)\n'


def anthropic_sdk(facts: AliasFacts) -> str:
    text = _head("Anthropic SDK", facts)
    text += _exports({"ANTHROPIC_BASE_URL": facts.url, "ANTHROPIC_API_KEY": facts.key})
    ceiling = facts.output_ceiling(SDK_OUTPUT)
    return text + f'# client.messages.create(model="{facts.alias}", max_tokens={ceiling}, ...)\n'


def agents_sdk(facts: AliasFacts) -> str:
    text = _head("OpenAI Agents SDK", facts)
    text += "# tracing off: the SDK would send each run's traces to OpenAI\n"
    pairs: dict[str, str | int] = {
        "OPENAI_BASE_URL": facts.url + "/v1",
        "OPENAI_API_KEY": facts.key,
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    ceiling = facts.output_ceiling(SDK_OUTPUT)
    text += _exports(pairs)
    model = facts.alias
    if "/" in model:  # the SDK reads `co/` of `co/local` as a provider prefix; `openai/` is its own
        text += "# `openai/` in front: the SDK takes what comes before the first `/` for a provider\n"
        model = f"openai/{model}"
    return text + f'# Agent(..., model="{model}", model_settings=ModelSettings(max_tokens={ceiling}))\n'


def litellm(facts: AliasFacts) -> str:
    text = _head("LiteLLM", facts)
    key = f"os.environ/{facts.key_env}" if facts.key_env else NO_KEY
    text += "# the LiteLLM proxy's config.yaml (or litellm.Router(model_list=...))\n"
    lines = [
        "model_list:",
        f"  - model_name: {_yaml(facts.alias)}",
        "    litellm_params:",
        f"      model: {_yaml('openai/' + facts.alias)}",
        f"      api_base: {_yaml(facts.url + '/v1')}",
        f"      api_key: {_yaml(key)}",
    ]
    if facts.context_tokens is not None:
        lines += [
            "    model_info:",
            f"      max_input_tokens: {facts.context_tokens}",
            f"      max_output_tokens: {facts.output_ceiling(SDK_OUTPUT)}",
        ]
    return text + "\n".join(lines) + "\n"


def _toml(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _yaml(value: str) -> str:
    return _toml(value)  # a double-quoted YAML scalar escapes as a TOML basic string does


CLIENTS: Mapping[str, Render] = {
    "claude-code": claude_code,
    "codex": codex,
    "open-webui": open_webui,
    "openai-sdk": openai_sdk,
    "anthropic-sdk": anthropic_sdk,
    "agents-sdk": agents_sdk,
    "litellm": litellm,
}
