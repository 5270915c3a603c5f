"""Instructions per relayed stream chunk: `interlock serve` under valgrind's callgrind, load-independent.

CPU time per chunk (bench/streams.py) moves by a third from run to run on a shared machine; the
instructions the gateway's process executes do not (the kernel's work, the system calls, is not
counted: it is the same for any relay that reads and writes once per chunk, bench/tcp_relay.py's floor
included). One gateway runs under callgrind (from this tree, or ``--before DIR``: another source tree,
``git archive COMMIT interlock | tar -x -C DIR``); after a warm-up, the counters are zeroed and K
streams of the OpenAI fake are relayed, long ones (M chunks) and then short ones (``max_tokens``: S
chunks), each batch dumped on its own:

- per chunk, marginal: (long - short) / (K * (M - S)): what one more chunk costs, the relay alone;
- per chunk at M: long / (K * (M + 3)), as bench/streams.py counts it (the per-request work spread over
  the stream's events: its role and finish chunks and ``[DONE]`` included);
- per stream: what is left of a short stream once its chunks are paid.

The fake trickles the chunks (``--rate``) so that each arrives in a read of its own, as in
bench/streams.py, even with the gateway ~50x slower under valgrind.

    .venv/bin/python bench/stream_instructions.py [--streams 10] [--chunks 100] [--before DIR]
    .venv/bin/python bench/stream_instructions.py --surface anthropic   # the translated stream
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway import launched, serve_command
from streams import HERE, MODEL, drive, http_request, run_async

from interlock.testing.fake_process import FakeProcess

# not probed: a probe round (every 30 s) landing in the idle batch or not moved the idle rate that is
# subtracted from the batches by a quarter, and with it the per-chunk figure by several per cent
CONFIG = """\
version: 1
server: {{default_alias: bench/openai, alias_namespace: bench/}}
timeouts: {{connect: 60s, first_byte: 600s, total: 3600s}}
providers:
  fake: {{kind: openai, base_url: "{url}", api_key_env: BENCH_KEY, probe: false}}
aliases:
  bench/openai: {{description: OpenAI-compatible fake, chain: [fake/{model}]}}
"""

SURFACES = {  # path, event separator, last event
    "openai": ("/v1/chat/completions", b"\n\n", b"[DONE]"),
    "anthropic": ("/v1/messages", b"\n\n", b"message_stop"),
}


def served(
    config: Path | None, source: Path | None, folder: Path, upstream: str
) -> tuple[subprocess.Popen[bytes], str]:
    """`interlock serve` under callgrind, returned once it answers its health route; with no
    ``config``, bench/tcp_relay.py in front of ``upstream`` (the floor)."""
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/callgrind.out.%p"]
    if config is None:
        env, cwd = {**os.environ}, None
        command += [sys.executable, str(HERE / "tcp_relay.py"), upstream]
    else:
        serve, env, cwd = serve_command(config, source)
        command += serve
    env["PYTHONHASHSEED"] = "0"
    proc, first, _log = launched(command, env, cwd, wait_s=30)
    if config is None:  # "relaying on PORT": listening already
        return proc, f"http://127.0.0.1:{first[2]}"
    url = first[2]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/v1/health", timeout=30):
                return proc, url
        except OSError:
            time.sleep(1)
    proc.kill()
    raise RuntimeError("interlock serve under valgrind never became ready")


def control(pid: int, *flags: str) -> None:
    subprocess.run(["callgrind_control", *flags, str(pid)], check=True, capture_output=True)


def dumped(folder: Path, pid: int, before: set[Path]) -> int:
    """The instruction total of the dump that appeared since ``before`` (its ``totals:`` line)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        new = set(folder.glob(f"callgrind.out.{pid}*")) - before
        for path in new:
            for text in path.read_text(errors="replace").splitlines():
                if text.startswith(("totals:", "summary:")):
                    return int(text.split()[1])
        time.sleep(0.5)
    raise RuntimeError("no callgrind dump")


def batch(
    pid: int, folder: Path, address: tuple[str, int], request: bytes, surface: str, k: int
) -> tuple[int, float]:
    """Zero the counters, relay ``k`` streams at once (none: stay idle ``k`` seconds), dump; returns
    the instructions and the seconds they took."""
    _, sep, end = SURFACES[surface]
    control(pid, "--zero")
    started = time.monotonic()
    before = set(folder.glob(f"callgrind.out.{pid}*"))
    if request:
        run = run_async(drive(address, request, sep, end, k, 1.0, None))
        if run.errors:
            raise RuntimeError(f"stream errors: {run.errors}")
    else:
        time.sleep(k)
    seconds = time.monotonic() - started
    control(pid, "--dump")
    return dumped(folder, pid, before), seconds


def body(surface: str, max_tokens: int | None, model: str = "bench/openai") -> dict[str, object]:
    request: dict[str, object] = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "stream": True,
    }
    if surface == "anthropic":
        request["max_tokens"] = max_tokens or 4096
    elif max_tokens is not None:
        request["max_tokens"] = max_tokens
    return request


def measure(
    args: argparse.Namespace, source: Path | None, fake: FakeProcess, folder: Path, floor: bool
) -> None:
    config = None
    surface = "openai" if floor else args.surface
    model = MODEL if floor else "bench/openai"
    if not floor:
        config = folder / "plan.yaml"
        config.write_text(CONFIG.format(url=fake.base_url, model=MODEL))
    upstream = fake.url.removeprefix("http://").split("/", 1)[0]
    proc, url = served(config, source, folder, upstream)
    try:
        path, sep, end = SURFACES[surface]
        address, long_request = http_request(url, path, body(surface, None, model))
        _, short_request = http_request(url, path, body(surface, args.short, model))
        run_async(drive(address, long_request, sep, end, 2, 0.2, None))  # warm-up
        k, m, s = args.streams, args.chunks, args.short
        idle, idle_s = batch(proc.pid, folder, address, b"", surface, 10)
        long_, long_s = batch(proc.pid, folder, address, long_request, surface, k)
        short, short_s = batch(proc.pid, folder, address, short_request, surface, k)
    finally:
        proc.terminate()
        proc.wait(60)
    per_s = idle / idle_s  # the process's own periodic work (timers, probes): not the streams'
    long_ -= round(per_s * long_s)
    short -= round(per_s * short_s)
    marginal = (long_ - short) / (k * (m - s))
    label = "tcp relay (floor)" if floor else "this tree" if source is None else str(source)
    print(
        f"  {label:<24} per chunk {marginal:9,.0f}   per chunk at M={m} {long_ / (k * (m + 3)):9,.0f}"
        f"   per stream {short / k - s * marginal:11,.0f}   (instructions; idle {per_s:,.0f} a second)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=10, help="streams per batch (K)")
    parser.add_argument("--chunks", type=int, default=100, help="content chunks of a long stream (M)")
    parser.add_argument("--short", type=int, default=10, help="content chunks of a short stream (S)")
    parser.add_argument("--rate", type=float, default=5.0, help="chunks per second per stream")
    parser.add_argument("--surface", choices=sorted(SURFACES), default="openai")
    parser.add_argument("--before", type=Path, default=None, help="also: this source tree, after")
    parser.add_argument("--floor", action="store_true", help="also: bench/tcp_relay.py, first")
    parser.add_argument("--keep", type=Path, default=None, help="keep the dumps here (callgrind_annotate)")
    args = parser.parse_args()
    words = " ".join(["tok"] * args.chunks)
    fake_args = ["--no-record", "--reply", words, "--chunks", str(args.chunks)]
    fake_args += ["--chunk-delay-s", f"{1 / args.rate:g}"]
    print(
        f"{args.surface} caller, OpenAI fake: {args.streams} streams of {args.chunks} and of {args.short}"
        f" chunks at {args.rate:g}/s, gateway under callgrind",
        flush=True,
    )
    with FakeProcess("openai", *fake_args) as fake, tempfile.TemporaryDirectory() as name:
        folder = Path(name) if args.keep is None else args.keep
        folder.mkdir(parents=True, exist_ok=True)
        if args.floor:
            measure(args, None, fake, folder, floor=True)
        for source in (None, args.before) if args.before is not None else (None,):
            measure(args, source, fake, folder, floor=False)


if __name__ == "__main__":
    main()
