"""How often the real CLIs end the agent tier's tasks (tests/inference/test_agents.py), measured.

    python bench/agent_tasks.py [--runs 8] [--tasks claude-hi,claude-session,codex-hi,codex-session]
        [--own-prompts] [--model smollm2] [--repeat-penalty P] [--run-s 90] [--words "say hi|say hi again"]

A real llama-server (``AGENT_SERVER``, as the tier runs it) with `interlock serve` in front, set up as
`init` and `connect` print (``tests/inference/agents.py``), and the real Claude Code and Codex run
``--runs`` times per task, each run in a new working folder, with the tier's fixed prompt
(``CLAUDE_LEAN``, ``CODEX_LEAN``) or, with ``--own-prompts``, each CLI's own. A task: ``hi`` (the first
words) or ``session`` (the first words, then the second with ``--continue`` / ``exec resume --last``).
A run ended when the CLI exited 0 with the model's words in one request within ``--run-s`` seconds (a
failure bound: a run that does not end is counted, not waited for). Each line says the run's seconds,
the gateway's requests, the server's prompt and output tokens and the machine's load; the figures are
in docs/clients.md ("The tier in CI").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.inference import agents  # noqa: E402
from tests.inference.agents import CLAUDE_LEAN, SYSTEM_PROMPT, AgentGateway, AgentRun  # noqa: E402
from tests.inference.llama import AGENT_MODELS, AGENT_SERVER, LlamaServer, Sampling  # noqa: E402


def said(run: AgentRun) -> str | None:
    """The model's words when the run ended as the tier requires (exit 0, words, one request), else None."""
    if run.ran.returncode != 0 or run.counts.requests != 1:
        return None
    events: list[dict[str, Any]] = [
        orjson.loads(line) for line in run.ran.stdout.splitlines() if line.startswith("{")
    ]
    words = [e.get("result") or "" for e in events if e.get("type") == "result" and not e.get("is_error")]
    items = [e["item"] for e in events if e.get("type") == "item.completed"]
    words += [i.get("text") or "" for i in items if i.get("type") == "agent_message"]
    text = " ".join(w.strip() for w in words if w.strip())
    return text or None


def turn(rig: AgentGateway, cli: str, words: str, home: Path, lean: bool, resume: bool) -> AgentRun:
    if cli == "claude":
        args = ["--output-format", "stream-json", "--verbose", *(["--continue"] if resume else [])]
        return rig.claude(rig.connect("claude-code"), words, home, *args, *(CLAUDE_LEAN if lean else ()))
    args = ["--json", *(["resume", "--last"] if resume else [])]
    instructions = SYSTEM_PROMPT if lean else None
    return rig.codex(rig.connect("codex"), words, home, *args, instructions=instructions)


def task(rig: AgentGateway, name: str, number: int, folder: Path, lean: bool, words: list[str]) -> bool:
    cli, kind = name.split("-")
    home = folder / f"{name}-{number}"
    turns = words if kind == "session" else words[:1]
    for index, text in enumerate(turns):
        try:
            run = turn(rig, cli, text, home, lean, resume=index > 0)
        except subprocess.TimeoutExpired:
            print(f"{name} #{number} turn {index + 1}: not ended within {agents.RUN_S} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
            return False
        answer = said(run)
        c = run.counts
        print(
            f"{name} #{number} turn {index + 1}: {'ended' if answer else 'NOT ended'}, exit "
            f"{run.ran.returncode}, {run.seconds:.0f} s, {c.requests:.0f} requests, {c.prompt_tokens:.0f} "
            f"prompt and {c.output_tokens:.0f} output tokens, load {os.getloadavg()[0]:.1f}: "
            f"{(answer or run.ran.stdout[-200:])[:100]!r}",
            flush=True,
        )
        if answer is None:
            return False
    return True


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--tasks", default="claude-hi,claude-session,codex-hi,codex-session")
    parser.add_argument("--own-prompts", action="store_true", help="each CLI's own prompt, not the tier's")
    parser.add_argument("--model", default="smollm2", choices=sorted(AGENT_MODELS))
    parser.add_argument("--repeat-penalty", type=float, help="the server's --repeat-penalty")
    parser.add_argument("--run-s", type=int, default=90, help="a failure bound on one CLI run")
    parser.add_argument("--words", default="say hi|say hi again", help="the two turns' words, |-separated")
    args = parser.parse_args()
    agents.RUN_S = args.run_s
    model = AGENT_MODELS[args.model]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        server = LlamaServer(
            model.path,
            folder / "llama.log",
            **AGENT_SERVER,
            alias=model.alias,
            sampling=Sampling(repeat_penalty=args.repeat_penalty),
        )
        with server, AgentGateway(server, folder) as rig:
            for name in args.tasks.split(","):
                ended = sum(
                    task(rig, name, n, folder, not args.own_prompts, args.words.split("|"))
                    for n in range(args.runs)
                )
                print(f"=> {name}: {ended} of {args.runs} ended", flush=True)


if __name__ == "__main__":
    main()
