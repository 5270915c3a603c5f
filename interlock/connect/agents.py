"""The coding agents' settings (Claude Code, Codex): what each version checked accepts, from running it.

Each agent has a prompt of its own before any work (its system prompt and tools) and rules of its own
about the window; the figures below were measured by running the released CLI against
`interlock serve` on loopback (docs/clients.md says how), and the lines printed say which versions
were checked. A window that cannot hold the agent is refused with the numbers, not printed.

Claude Code (2.1.337, the newest on npm, checked; 2.1.197 takes the same lines):

- ``CLAUDE_CODE_MAX_CONTEXT_TOKENS`` is the window it takes for a model name it does not know (any
  name not starting ``claude-``); without it, it assumes a window of its own and says so.
- ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` is not printed: 2.1.337 raises any value under 100,000 to 100,000.
- Before sending, it refuses its own request ("Prompt is too long") when its count of the prompt plus
  ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` is over the window: its first request ("say hi", an empty folder)
  counts about 6,300 tokens by its own count (with 8,192 it sent at 1,925 output tokens and refused at
  1,937).
- After an answer it compacts (or, with nothing to compact, refuses) once the server's count of the
  conversation (the answer's ``usage``) passes the window less the output less about 3,000 tokens
  (8,192 with 1,024 output: it went on at 4,000 and compacted at 4,200; 16,384: on at 12,000,
  compacted at 12,700). Its first request counts 4,116 tokens by llama-server with SmolLM2's chat
  template, so with 1,024 output on 8,192 every turn compacted again: the loop seen with the window set.

So its output ceiling is its default (32,000), at most a quarter of the window, and at most what
leaves its own prompt and the compaction reserve room (the window less 6,300 less 3,000), but never
under 512; a window under 6,300 + 512 + 1,024 (for the work itself) is refused.

Codex (0.171.0, the newest, checked): ``model_context_window`` and ``model_auto_compact_token_limit``
(90 % of the window) for a model it does not know; it has no key for an output ceiling. Its provider
is told ``supports_websockets = false`` (it would first try ``GET /v1/responses`` as a WebSocket, which
the gateway refuses) and gets no ``env_key`` when the gateway needs no key (Codex exits "Missing
environment variable" when the named one is unset). Its first request counts 4,556 tokens by
llama-server (SmolLM2, `bench/context_estimate.py`); with 1,024 for the answer and 512 for the work,
a window under 6,092 is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from interlock.connect.alias_facts import NO_KEY, AliasFacts, Refused
from interlock.connect.grammar import Shell, comment, toml


@dataclass(frozen=True, slots=True)
class Agent:
    """What one coding agent needs of a window, as measured on the versions checked."""

    name: str
    checked: str  # the versions whose behaviour the figures come from, as printed
    own_prompt: int  # tokens of its first request before any work (by the count that decides)
    output_floor: int  # the least output ceiling printed
    work_room: int  # tokens left for the work itself in the smallest window accepted

    def minimum_window(self) -> int:
        return self.own_prompt + self.output_floor + self.work_room

    def check(self, facts: AliasFacts) -> None:
        """Refused when the alias's window cannot hold the agent's own prompt, an answer and some work."""
        window = facts.context_tokens
        if window is None or window >= self.minimum_window():
            return
        raise Refused(
            f"alias `{facts.alias}` guarantees a window of {window:,} tokens; {self.name} "
            f"({self.checked}) needs at least {self.minimum_window():,}: its own prompt is about "
            f"{self.own_prompt:,} tokens before any work, plus {self.output_floor:,} for an answer and "
            f"{self.work_room:,} for the work. Give the alias's models a larger window (llama-server "
            "`--ctx-size` per slot, Ollama `num_ctx`) or use a client with a smaller prompt"
        )


CLAUDE_CODE = Agent("Claude Code", "2.1.197 to 2.1.337", 6_300, 512, 1_024)
CLAUDE_CODE_OUTPUT = 32_000  # Claude Code's max_tokens for a model it does not know
CLAUDE_CODE_COMPACT_RESERVE = 3_000  # it compacts this far under (window - output), by the server's count
CODEX = Agent("Codex", "0.171.0", 4_556, 1_024, 512)
CODEX_COMPACT_PERCENT = 90


def claude_code_output(window: int | None) -> int:
    """Claude Code's ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` for a window (its own default when unknown)."""
    if window is None:
        return CLAUDE_CODE_OUTPUT
    room = window - CLAUDE_CODE.own_prompt - CLAUDE_CODE_COMPACT_RESERVE
    return max(CLAUDE_CODE.output_floor, min(CLAUDE_CODE_OUTPUT, window // 4, room))


def claude_code(facts: AliasFacts) -> str:
    CLAUDE_CODE.check(facts)
    shell = Shell()
    shell.comment(*_head("Claude Code", CLAUDE_CODE, facts))
    if facts.key_env is None:
        shell.comment("the gateway took a request without a caller key: any key will do")
    shell.comment("every model Claude Code picks (main, background, subagents) is the alias")
    shell.export("ANTHROPIC_BASE_URL", facts.url)
    shell.export("ANTHROPIC_API_KEY", facts.key)
    for name in (
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "CLAUDE_CODE_SUBAGENT_MODEL",
    ):
        shell.export(name, facts.alias)
    if facts.context_tokens is not None:
        if facts.alias.startswith("claude-"):
            shell.comment("Claude Code ignores CLAUDE_CODE_MAX_CONTEXT_TOKENS for a name starting `claude-`")
        shell.comment(
            "its window, and its max_tokens: room for its own prompt (~6,300 tokens) and for compacting"
        )
        shell.export("CLAUDE_CODE_MAX_CONTEXT_TOKENS", facts.context_tokens)
    shell.export("CLAUDE_CODE_MAX_OUTPUT_TOKENS", facts.capped(claude_code_output(facts.context_tokens)))
    return shell.text()


def codex(facts: AliasFacts) -> str:
    CODEX.check(facts)
    head = comment(*_head("Codex", CODEX, facts))
    head += comment("in ~/.codex/config.toml (or $CODEX_HOME/config.toml)")
    if facts.key_env is None:
        head += comment("the gateway took a request without a caller key: none is sent")
    else:
        head += comment(f"the caller key is read from ${facts.key_env}")
    root: dict[str, str | int] = {"model": facts.alias, "model_provider": "interlock"}
    if facts.context_tokens is not None:
        root["model_context_window"] = facts.context_tokens
        root["model_auto_compact_token_limit"] = facts.context_tokens * CODEX_COMPACT_PERCENT // 100
    provider: dict[str, str | bool] = {
        "name": "interlock",
        "base_url": facts.url + "/v1",
        "wire_api": "responses",
        "supports_websockets": False,  # the gateway serves Responses over HTTP only
    }
    if facts.key_env is not None:
        provider["env_key"] = facts.key_env
    return toml(head, root, {"model_providers.interlock": provider})


def _head(client: str, agent: Agent, facts: AliasFacts) -> tuple[str, str]:
    return (
        f"{client} -> interlock at {facts.url}, alias `{facts.alias}` (guaranteed window: {facts.window})",
        f"checked with {client} {agent.checked}",
    )


__all__ = ["CLAUDE_CODE", "CODEX", "NO_KEY", "claude_code", "claude_code_output", "codex"]
