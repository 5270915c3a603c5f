"""Instructions per request of the whole served gateway, by valgrind's callgrind: a count that does not
move with the machine's load, for deciding a cut before timing it.

Starts the nginx upstream of bench/compare.py (one fixed chat completion), then ``interlock serve`` (one
worker, one provider, not probed) under ``valgrind --tool=callgrind --instr-atstart=no``; sends
``--warmup`` requests, switches instrumentation on (``callgrind_control -i on``), sends ``--requests``
more over ``--concurrency``
keep-alive connections (a small client of raw sockets in this process), dumps the counts and prints
the instructions per request: everything the gateway process ran in user space (the interpreter,
uvloop, httptools, orjson, libc), not the kernel. With ``--base DIR`` the same is done for another
checkout (``git worktree add DIR COMMIT``), so a before/after comes from one run; ``--top N`` lists the
functions that cost the most (inclusive of what they call is not shown: self instructions).

    .venv/bin/python bench/served_instructions.py [--requests 2000] [--concurrency 1 16] [--base DIR]

Needs valgrind and nginx (bench/peers.sh installs nginx).
"""

from __future__ import annotations

import argparse
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import nginx_program, upstream_server
from gateway import serve_command
from load import chat_body

# one healthy provider, not probed: a probe (every 30 s) landing in the counted window would add
# thousands of instructions per request to one run and not to another
CONFIG = """\
version: 1
server: {{default_alias: bench/chat, alias_namespace: bench/}}
providers:
  fake: {{kind: openai, base_url: "{url}", api_key_env: BENCH_KEY, probe: false}}
aliases:
  bench/chat: {{description: one healthy candidate, chain: [fake/bench-model]}}
"""


def request_bytes(host: str, port: int) -> bytes:
    body = chat_body("bench/chat")
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer bench\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def drive(host: str, port: int, requests: int, concurrency: int, timeout_s: float = 600.0) -> None:
    """``requests`` requests over ``concurrency`` keep-alive connections, each waiting for its answer."""
    data = request_bytes(host, port)
    selector = selectors.DefaultSelector()
    buffers: dict[socket.socket, bytearray] = {}
    sent = done = 0
    for _ in range(min(concurrency, requests)):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        buffers[sock] = bytearray()
        sock.sendall(data)
        sent += 1
    deadline = time.monotonic() + timeout_s
    while done < requests:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {done} of {requests} answers in {timeout_s} s")
        for key, _ in selector.select(1.0):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("the gateway closed a connection")
            buffer = buffers[sock]
            buffer += chunk
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                continue
            match = re.search(rb"(?i)content-length: *(\d+)", bytes(buffer[:end]))
            if match is None:
                raise RuntimeError(f"an answer without a length: {bytes(buffer[:end])!r}")
            whole = end + 4 + int(match.group(1))
            if len(buffer) < whole:
                continue
            if not buffer.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"not a 200: {bytes(buffer[:whole])!r}")
            del buffer[:whole]
            done += 1
            if sent < requests:
                sock.sendall(data)
                sent += 1
    for sock in buffers:
        selector.unregister(sock)
        sock.close()


def control(pid: int, *options: str) -> None:
    subprocess.run(["callgrind_control", *options, str(pid)], check=True, capture_output=True, timeout=120)


def totals(path: Path) -> int:
    """The dump's total (callgrind_annotate's sum: with instrumentation toggled, the dump's own
    ``summary:`` line says 0)."""
    result = subprocess.run(["callgrind_annotate", str(path)], capture_output=True, text=True, check=True)
    match = re.search(r"^\s*([\d,]+) +(?:\(100\.0%\) +)?PROGRAM TOTALS", result.stdout, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no totals in {path}")
    return int(match.group(1).replace(",", ""))


def top(path: Path, n: int) -> str:
    result = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(path)], capture_output=True, text=True, check=True
    )
    lines = [line for line in result.stdout.splitlines() if re.match(r"\s*[\d,]+ \(", line)]
    return "\n".join(lines[:n])


def measure(
    name: str, config: Path, source: Path | None, args: argparse.Namespace, folder: Path
) -> dict[int, int]:
    serve, env, cwd = serve_command(config, source)
    env["PYTHONHASHSEED"] = "0"
    out = folder / f"{name}.callgrind"
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}.%p", *serve]
    log = open(folder / f"{name}.log", "wb")  # noqa: SIM115 - kept open while it runs
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=env, cwd=cwd)
    assert proc.stdout is not None
    results: dict[int, int] = {}
    try:
        first = proc.stdout.readline().decode().split()
        if len(first) < 3:
            raise RuntimeError(f"{name}: interlock serve did not start; see {folder / f'{name}.log'}")
        host, port = first[2].split("//")[1].rsplit(":", 1)
        for concurrency in args.concurrency:
            drive(host, int(port), args.warmup, concurrency)
            control(proc.pid, "-z")
            control(proc.pid, "-i", "on")
            drive(host, int(port), args.requests, concurrency)
            control(proc.pid, "-i", "off")
            control(proc.pid, "-d")
            dumps = sorted(folder.glob(f"{name}.callgrind.{proc.pid}.*"), key=lambda p: p.stat().st_mtime)
            dump = dumps[-1]
            results[concurrency] = totals(dump)
            print(
                f"{name:6} c={concurrency:<3} {results[concurrency] / args.requests:12,.0f}"
                " instructions/request",
                flush=True,
            )
            if args.top:
                print(top(dump, args.top), flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--base", type=Path, default=None, help="also measure this checkout")
    parser.add_argument("--top", type=int, default=0, help="list the N costliest functions (self)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the dumps in this folder")
    args = parser.parse_args()
    program = nginx_program()
    if program is None:
        raise SystemExit("nginx is not installed (bench/peers.sh)")
    with tempfile.TemporaryDirectory() as temp:
        folder = args.keep or Path(temp)
        folder.mkdir(parents=True, exist_ok=True)
        with upstream_server(program, folder) as (url, _):
            config = folder / "bench.yaml"
            config.write_text(CONFIG.format(url=url))
            figures = {"this": measure("this", config, None, args, folder)}
            if args.base is not None:
                figures["base"] = measure("base", config, args.base, args, folder)
        if args.base is not None:
            for concurrency in args.concurrency:
                this, base = figures["this"][concurrency], figures["base"][concurrency]
                print(
                    f"c={concurrency:<3} base {base / args.requests:,.0f} -> this {this / args.requests:,.0f}"
                    f" instructions/request ({(this - base) / base:+.1%})"
                )


if __name__ == "__main__":
    main()
