"""`init`: ask the servers at the given URLs what they are and serve, and write a commented starting
configuration for them (providers, workers and their slots, model facts, one alias per model class).

Nothing is sent anywhere but the URLs given; no credential is read or written, only variable names.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from interlock.commands.files import written
from interlock.discover import Found, discover
from interlock.discover.base import said
from interlock.discover.starter import starter
from interlock.discover.written import UnprovenConfig
from interlock.discover.written import written as proven_text


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "init",
        help="discover your model servers and write a starting configuration for them",
        description=(
            "Probes each URL (Ollama: /api/tags, /api/show, /api/ps; llama-server: /props, /v1/models, "
            "/slots; vLLM, SGLang, LM Studio, any OpenAI-compatible server: /v1/models; an Anthropic-"
            "compatible one: /v1/messages), says what it found, and writes a commented configuration "
            "that `interlock lint --strict` checks and `interlock serve` serves."
        ),
    )
    p.add_argument(
        "--discover",
        action="append",
        metavar="URL",
        required=True,
        help="a server to probe (repeatable), e.g. http://127.0.0.1:11434",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the configuration here (default: stdout)")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="seconds each answer may take, from connecting to its last byte; a server that takes longer "
        "once is asked nothing more (default: 5)",
    )
    p.set_defaults(handler=run_init, parser=p)


def run_init(args: argparse.Namespace) -> int:
    if args.output is not None and os.path.exists(args.output) and not args.force:
        print(
            f"interlock init: {args.output} exists; give another -o, or --force to replace it",
            file=sys.stderr,
        )
        return 2
    results = discover(args.discover, args.timeout)
    found = [r for r in results if isinstance(r, Found)]
    for result in results:
        print(result if isinstance(result, str) else describe(result), file=sys.stderr)
    if not found:
        print("interlock init: no server found; nothing written", file=sys.stderr)
        return 1
    command = "interlock init " + " ".join(f"--discover {url}" for url in args.discover)
    config, variables = starter(found, command)
    try:
        text = proven_text(config)
    except UnprovenConfig as exc:  # a server's text that escaping missed: nothing is written
        print(
            f"interlock init: the configuration does not read back as meant ({exc}); nothing written",
            file=sys.stderr,
        )
        return 1
    if args.output is None:
        sys.stdout.write(text)
        return 0
    if not written(args.output, text, "interlock init"):
        return 1
    aliases = ", ".join(config["aliases"]) or "none"
    print(f"wrote {args.output} (aliases: {aliases})", file=sys.stderr)
    if variables:
        print("set before `interlock serve`: " + ", ".join(variables), file=sys.stderr)
    return 0


def describe(found: Found) -> str:
    """One server in a few lines: what it is, its models (window, capabilities), slots, profile."""
    lines = [f"{said(found.url, 2048)}: {said(found.server)}"]
    if found.slots is not None:
        lines[0] += f", {found.slots} slots"
    if found.profile is not None:
        lines[0] += f", profile {found.profile}"
    if found.needs_key:
        lines[0] += " (it needs a key)"
    for model in found.models:
        facts = [f"{model.context_tokens} tokens" if model.context_tokens else "window unknown"]
        if model.capabilities:
            facts.append(", ".join(model.capabilities))
        if model.loaded:
            facts.append(
                "loaded"
                + ("" if model.on_gpu is None else " on the GPU" if model.on_gpu else " in system memory")
            )
        lines.append(f"  {said(model.name)}: {'; '.join(facts)}")
    lines += [f"  note: {said(note, 500)}" for note in found.notes]
    return "\n".join(lines)
