"""CPU per request of the request translation at the provider border, beside another revision's.

Builds the upstream request for a few typical bodies (Ollama: the router's early ``refusal`` look, then
``wire.ollama.chat_request``; OpenAI-compatible: the body copy with ``model`` replaced and Ollama-native
fields stripped) and prints µs per call for this checkout and for ``--against`` (a git revision,
default ``main``), with their ratio.

    .venv/bin/python bench/translation.py [--against main] [--calls 50000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from interlock.runtime.wire import ollama as ollama_wire
from interlock.runtime.wire import openai_chat

ROOT = Path(__file__).resolve().parents[1]
HI = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there, how are you?"}]
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
BODIES: dict[str, dict[str, Any]] = {
    "plain": {"model": "mana/chat", "messages": HI},
    "sampling": {"model": "mana/chat", "messages": HI, "temperature": 0.2, "top_p": 0.9, "max_tokens": 200},
    "tools": {"model": "mana/chat", "messages": HI, "tools": [TOOL], "tool_choice": "auto", "stream": True},
    "litellm": {"model": "mana/chat", "messages": HI, "top_k": 40, "min_p": 0.05, "num_ctx": 8192, "seed": 7},
}


def _reference(revision: str, *paths: str) -> types.ModuleType | None:
    """The first of ``paths`` (under interlock/runtime/) that ``revision`` has, loaded as a module."""
    for path in paths:
        path = f"interlock/runtime/{path}.py"
        shown = subprocess.run(
            ["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True, text=True
        )
        if shown.returncode == 0:
            break
    else:
        return None
    name = path.rsplit("/", 1)[-1].removesuffix(".py")
    module = types.ModuleType(f"reference_{name}")
    exec(compile(shown.stdout, f"{revision}:{path}", "exec"), module.__dict__)
    return module


def _ollama(body: Mapping[str, Any]) -> dict[str, Any]:
    """What this checkout does per request for an Ollama candidate: the router's early look, then
    the translation."""
    ollama_wire.refusal("chat", body)
    return ollama_wire.chat_request(body, "llama3.2:3b", False)


def _openai_payload(*modules: types.ModuleType | None) -> Callable[[Mapping[str, Any], str], dict[str, Any]]:
    """The revision's OpenAI request builder: ``wire.openai_chat.upstream_request``, before that the
    adapter's ``_payload``."""
    for module, name in zip(modules, ("upstream_request", "_payload"), strict=True):
        payload = getattr(module, name, None)
        if payload is not None:
            return payload  # type: ignore[no-any-return]

    def copy(body: Mapping[str, Any], model: str) -> dict[str, Any]:  # before _payload existed
        out = dict(body)
        out["model"] = model
        return out

    return copy


def _pair_us(here: Callable[[], Any], there: Callable[[], Any], calls: int) -> tuple[float, float]:
    """µs per call of each, the least disturbed of seven interleaved runs (a busy machine drifts)."""
    best = [float("inf"), float("inf")]
    for _ in range(7):
        for slot, fn in enumerate((here, there)):
            started = time.perf_counter()
            for _ in range(calls):
                fn()
            best[slot] = min(best[slot], time.perf_counter() - started)
    return best[0] / calls * 1e6, best[1] / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", default="main")
    parser.add_argument("--calls", type=int, default=50_000)
    args = parser.parse_args()
    ref_wire, ref_chat, ref_openai = (
        _reference(args.against, "upstream/ollama_wire", "wire/ollama"),  # ollama_wire until it moved
        _reference(args.against, "wire/openai_chat"),
        _reference(args.against, "upstream/openai"),
    )
    if ref_wire is None or ref_openai is None:
        sys.exit(f"cannot read the adapters at {args.against!r}")
    ref_payload = _openai_payload(ref_chat, ref_openai)
    print(f"{'body':<10} {'upstream':<8} {'this µs':>9} {args.against + ' µs':>12} {'ratio':>6}")
    for name, body in BODIES.items():
        for kind, here, there in (
            (
                "ollama",
                lambda b=body: _ollama(b),
                lambda b=body: ref_wire.chat_request(b, "llama3.2:3b", False),
            ),
            (
                "openai",
                lambda b=body: openai_chat.upstream_request(b, "gpt-4o-mini"),
                lambda b=body: ref_payload(b, "gpt-4o-mini"),
            ),
        ):
            mine, theirs = _pair_us(here, there, args.calls)
            print(f"{name:<10} {kind:<8} {mine:>9.2f} {theirs:>12.2f} {mine / theirs:>6.2f}")


if __name__ == "__main__":
    main()
