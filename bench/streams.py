"""Many concurrent streams through one `interlock serve` worker: errors, CPU per chunk, RSS, TTFT added.

For each upstream kind (the OpenAI-compatible fake: SSE -> SSE; the Ollama fake: NDJSON -> SSE) and each
N, it starts the fake in its own process (each stream trickles M chunks, R a second), then:

1. ``direct``: N streams straight to the fake (the reference for time to first token);
2. ``interlock``: a fresh `interlock serve` (one worker), N streams through it. The gateway's CPU time
   (utime + stime from /proc/PID/stat) before and after, over the chunks it relayed, gives CPU µs per
   chunk (the per-request work, spread over the stream's chunks, is included); its RSS once all N
   streams are open, less its RSS before, over N, gives memory per open stream;
3. optionally (``--disconnect``) the same N streams with every other client leaving after its first
   chunk: the fake's stream count proves every upstream stream was closed, the health report that
   every slot came back;
4. optionally LiteLLM's proxy (``--litellm PATH``, bench/litellm_setup.sh installs it) in front of the
   OpenAI fake at the same N.
5. optionally (``--before DIR``) the same N streams through `interlock serve` run from another source
   tree (``git archive COMMIT interlock | tar -x -C DIR``), after this tree's run (``--before-first``:
   before it), for a before/after comparison in one sitting;
6. optionally (``--floor``) bench/tcp_relay.py in front of the fake: a byte-for-byte TCP pipe on uvloop,
   one read and one write per chunk and nothing else, the least a Python relay pays per chunk here.

The N clients are one lean asyncio client (httptools, one connection per stream, no keep-alive), started
over ``--ramp-s`` seconds; TTFT is the time from writing the request to the first body piece that
carries content (``"content":"`` and a character: the first token, in SSE and in Ollama's NDJSON alike;
not the first body byte, which a role-only chunk carries directly while the gateway sends its head with
the first chunk that carries content, the point after which a stream no longer falls back). "Added" is
the gateway's percentile less the direct run's.

    .venv/bin/python bench/streams.py                       # N = 100 and 1000, both kinds (~2 min)
    .venv/bin/python bench/streams.py --n 3000 --kinds openai --chunks 60 --rate 5
    .venv/bin/python bench/streams.py --kinds ollama --surface native   # Ollama client -> Ollama worker

Every process shares the machine's cores: on 2 cores the client and the fake take CPU from the gateway
(their CPU is printed too). Compare figures from one run only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httptools
import orjson
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway import start_gateway

from interlock.testing.fake_process import FakeProcess

HERE = Path(__file__).resolve().parent
MODEL = "bench-model"
T = TypeVar("T")

CONFIG = """\
version: 1
server: {{default_alias: bench/openai, alias_namespace: bench/}}  # max_connections: the default
timeouts: {{connect: 5s, first_byte: 60s, total: 3600s}}
providers:
  fake: {{kind: openai, base_url: "{openai_url}", api_key_env: BENCH_KEY}}
  box:
    kind: ollama
    workers:
      - name: box1
        url: "{ollama_url}"
        max_concurrent: {slots}
        model_concurrency: {{"*": {slots}}}
aliases:
  bench/openai: {{description: OpenAI-compatible fake, chain: [fake/{model}]}}
  bench/ollama: {{description: Ollama fake, chain: [box/{model}]}}
"""

LITELLM_CONFIG = """\
model_list:
  - model_name: fast
    litellm_params: {{model: openai/{model}, api_base: "{url}", api_key: sk-fake}}
"""


# -- the client ------------------------------------------------------------------------------------


CONTENT = re.compile(rb'"content":"[^"]')  # a chunk with a token in it (SSE or NDJSON)


@dataclass
class Outcome:
    """One stream as the client saw it."""

    first_byte_s: float | None = None
    ttft_s: float | None = None  # the first content
    events: int = 0
    status: int = 0
    error: str | None = None
    done: bool = False


class StreamClient(asyncio.Protocol):
    """One POST on its own connection, its streamed answer counted by separator, never parsed."""

    def __init__(self, request: bytes, sep: bytes, end: bytes, leave: bool, outcome: Outcome) -> None:
        self._request = request
        self._sep = sep
        self._end = end
        self._leave = leave
        self._outcome = outcome
        self._parser = httptools.HttpResponseParser(self)
        self._sent = 0.0
        self._last = b""
        self._transport: asyncio.Transport | None = None
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.first: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._sent = time.perf_counter()
        self._transport.write(self._request)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"bad HTTP: {exc}")

    def on_headers_complete(self) -> None:
        self._outcome.status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        outcome = self._outcome
        if outcome.ttft_s is None and CONTENT.search(body) is not None:
            outcome.ttft_s = time.perf_counter() - self._sent
        if outcome.first_byte_s is None:
            outcome.first_byte_s = time.perf_counter() - self._sent
            if not self.first.done():
                self.first.set_result(None)
            if self._leave and self._transport is not None:
                self._transport.abort()  # the client vanishes mid-stream
                outcome.done = True
                if not self.finished.done():
                    self.finished.set_result(None)
                return
        sep = self._sep
        outcome.events += body.count(sep)
        if len(sep) == 2 and self._last[-1:] == sep[:1] and body[:1] == sep[1:]:
            outcome.events += 1  # a separator split between two reads
        self._last = (self._last + body)[-512:]  # the last event whole (an Ollama final line is long)

    def on_message_complete(self) -> None:
        outcome = self._outcome
        if outcome.status != 200:
            self._fail(f"status {outcome.status}")
        elif self._end not in self._last:
            self._fail("stream ended without its last event")
        else:
            outcome.done = True
        if self._transport is not None:
            self._transport.close()
        if not self.finished.done():
            self.finished.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._outcome.done and self._outcome.error is None:
            self._fail("connection lost")

    def _fail(self, why: str) -> None:
        self._outcome.error = why
        for future in (self.first, self.finished):
            if not future.done():
                future.set_result(None)


@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    cpu_s: float = 0.0  # the measured process's CPU during the run
    sys_s: float = 0.0  # of which in the kernel (stime)
    rss_added: int = 0  # bytes, all streams open, less before
    client_cpu_s: float = 0.0
    seconds: float = 0.0

    @property
    def errors(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            if outcome.error is not None:
                counts[outcome.error] = counts.get(outcome.error, 0) + 1
        return counts

    @property
    def events(self) -> int:
        return sum(o.events for o in self.outcomes)

    def ttft_ms(self, q: float) -> float:
        values = sorted(o.ttft_s for o in self.outcomes if o.ttft_s is not None)
        if not values:
            return float("nan")
        return values[min(len(values) - 1, int(q * len(values)))] * 1000


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run with uvloop (as the gateway does), so the client costs as little CPU as it can."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def cpu_times(pid: int) -> tuple[float, float]:
    """``pid``'s user and system CPU seconds (utime, stime from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def http_request(url: str, path: str, body: dict[str, object]) -> tuple[tuple[str, int], bytes]:
    host, port = url.removeprefix("http://").split("/", 1)[0].split(":")
    payload = orjson.dumps(body)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer sk-fake\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    return (host, int(port)), head.encode() + payload


async def drive(
    address: tuple[str, int],
    request: bytes,
    sep: bytes,
    end: bytes,
    n: int,
    ramp_s: float,
    pid: int | None,
    leave_every: int = 0,
) -> Run:
    """N streams, started evenly over ``ramp_s``; ``pid``'s CPU and RSS are measured around them."""
    loop = asyncio.get_running_loop()
    run = Run(outcomes=[Outcome() for _ in range(n)])
    clients: list[StreamClient] = []
    rss0 = rss_bytes(pid) if pid else 0
    user0, sys0 = cpu_times(pid) if pid else (0.0, 0.0)
    own0 = time.process_time()
    started = time.perf_counter()
    gap = ramp_s / n if n else 0.0

    async def connect(index: int) -> None:
        leave = bool(leave_every) and index % leave_every == 0
        outcome = run.outcomes[index]
        try:
            _, client = await loop.create_connection(
                lambda: StreamClient(request, sep, end, leave, outcome), *address
            )
        except OSError as exc:
            outcome.error = f"connect: {exc.strerror or exc}"
            return
        clients.append(client)

    tasks = []
    for index in range(n):
        tasks.append(loop.create_task(connect(index)))
        target = started + gap * (index + 1)
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
    await asyncio.gather(*tasks)
    await asyncio.gather(*(c.first for c in clients))
    if pid:
        run.rss_added = rss_bytes(pid) - rss0
    await asyncio.gather(*(c.finished for c in clients))
    run.seconds = time.perf_counter() - started
    if pid:
        user1, sys1 = cpu_times(pid)
        run.sys_s = sys1 - sys0
        run.cpu_s = user1 - user0 + run.sys_s
    run.client_cpu_s = time.process_time() - own0
    return run


# -- the parts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    fake: str  # FakeProcess kind
    direct_path: str
    direct_sep: bytes
    direct_end: bytes
    alias: str

    def direct_body(self) -> dict[str, object]:
        return {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}], "stream": True}


KINDS = {
    "openai": Kind("openai", "openai", "/v1/chat/completions", b"\n\n", b"[DONE]", "bench/openai"),
    "ollama": Kind("ollama", "ollama", "/api/chat", b"\n", b'"done":true', "bench/ollama"),
}


@contextmanager
def litellm_proxy(executable: Path, folder: Path, fake_url: str) -> Iterator[tuple[str, int]]:
    from compare import litellm_process

    config = folder / "litellm.yaml"
    config.write_text(LITELLM_CONFIG.format(url=fake_url, model=MODEL))
    with litellm_process(executable, config, folder, 120) as running:
        yield running


def py_spy(folder: Path, pid: int, name: str) -> subprocess.Popen[bytes]:
    """py-spy sampling the gateway during its run; collapsed stacks into ``folder/<name>.txt``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{name}.txt"
    command = ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "--native"]
    command += ["-o", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextmanager
def tcp_relay(fake_url: str) -> Iterator[tuple[tuple[str, int], int]]:
    """bench/tcp_relay.py in front of the fake: the floor of a Python relay (one read, one write)."""
    upstream = fake_url.removeprefix("http://").split("/", 1)[0]
    command = [sys.executable, str(HERE / "tcp_relay.py"), upstream]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[-1])
        yield ("127.0.0.1", port), proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def health(url: str) -> dict[str, object]:
    with urllib.request.urlopen(f"{url}/v1/health", timeout=10) as response:
        report: dict[str, object] = orjson.loads(response.read())
        return report


def wait_for(check: object, timeout_s: float) -> float | None:
    """Seconds until ``check()`` held, or None past ``timeout_s``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if check():  # type: ignore[operator]
            return time.monotonic() - started
        time.sleep(0.02)
    return None


def per_chunk_us(run: Run) -> float:
    return run.cpu_s / run.events * 1e6 if run.events else float("nan")


def line(label: str, run: Run, reference: Run | None, n: int, floor: Run | None = None) -> str:
    errors = run.errors
    text = f"  {label:<10} errors {sum(errors.values()):>4}"
    text += f"   TTFT p50 {run.ttft_ms(0.5):7.2f} ms  p99 {run.ttft_ms(0.99):7.2f} ms"
    if reference is not None:
        text += (
            f"   added p50 {run.ttft_ms(0.5) - reference.ttft_ms(0.5):+6.2f} ms"
            f"  p99 {run.ttft_ms(0.99) - reference.ttft_ms(0.99):+6.2f} ms"
        )
        if run.events:
            text += f"   CPU {per_chunk_us(run):5.1f} µs/chunk"
            text += f" (sys {run.sys_s / run.events * 1e6:4.1f}; {run.events} chunks)"
            if floor is not None and floor.events:
                text += f" = {per_chunk_us(run) / per_chunk_us(floor):.2f}x the floor"
        text += f"   RSS {run.rss_added / n / 1024:6.1f} KiB/stream"
    text += f"   client CPU {run.client_cpu_s:.1f} s"
    if errors:
        text += f"   {errors}"
    return text


def measure(kind: Kind, n: int, args: argparse.Namespace, folder: Path) -> None:
    words = " ".join(["tok"] * args.chunks)
    fake_args = ["--no-record", "--reply", words, "--chunks", str(args.chunks)]
    fake_args += ["--chunk-delay-s", f"{1 / args.rate:g}"]
    if kind.fake == "ollama":
        fake_args += ["--model", f"{MODEL}=completion"]
    with FakeProcess(kind.fake, *fake_args) as fake:
        other = FakeProcess("ollama" if kind.fake == "openai" else "openai", "--no-record").start()
        try:
            urls = {kind.fake: fake.base_url, other.kind: other.base_url}
            config = folder / f"{kind.name}-{n}.yaml"
            config.write_text(
                CONFIG.format(
                    openai_url=urls["openai"],
                    ollama_url=urls["ollama"],
                    model=MODEL,
                    slots=max(n, 1),
                )
            )
            address, request = http_request(fake.url, kind.direct_path, kind.direct_body())
            run_async(drive(address, request, kind.direct_sep, kind.direct_end, min(n, 20), 0.2, None))
            direct = run_async(
                drive(address, request, kind.direct_sep, kind.direct_end, n, args.ramp_s, fake.pid)
            )
            fake_cpu_direct = direct.cpu_s
            print(f"{kind.name} N={n}  ({args.chunks} chunks at {args.rate:g}/s each)", flush=True)
            print(line("direct", direct, None, n) + f"   fake CPU {fake_cpu_direct:.1f} s", flush=True)
            body: dict[str, object] = {
                "model": kind.alias,
                "messages": [{"role": "user", "content": "Say hello."}],
            }
            body["stream"] = True
            rows: list[tuple[str, Path | None]] = [("interlock", None)]
            if args.before is not None:  # the same run from another tree, next to this one
                rows.append(("before", args.before))
                if args.before_first:
                    rows.reverse()
            per_chunk: dict[str, list[float]] = {}
            ratios: dict[str, list[float]] = {}
            for round_ in range(args.rounds):  # interleaved: drift on the machine hits every row alike
                if args.rounds > 1:
                    print(f"  round {round_ + 1} (load average {os.getloadavg()[0]:.2f})", flush=True)
                floor = None
                if args.floor:  # first, so each row of the round is set against it
                    floor = relayed(fake, kind, n, args, direct)
                    per_chunk.setdefault("tcp relay", []).append(per_chunk_us(floor))
                for label, source in rows:
                    through = gateway_run(config, source, kind, body, n, args, fake, direct, floor, label)
                    per_chunk.setdefault(label, []).append(per_chunk_us(through))
                    if floor is not None:
                        ratios.setdefault(label, []).append(per_chunk_us(through) / per_chunk_us(floor))
            if args.rounds > 1:
                for label, values in per_chunk.items():
                    text = f"  median {label:<10} CPU {statistics.median(values):5.1f} µs/chunk"
                    if label in ratios:
                        text += f" = {statistics.median(ratios[label]):.2f}x the floor (median of rounds)"
                    print(text, flush=True)
            if args.litellm and kind.name == "openai":
                with litellm_proxy(args.litellm, folder, fake.base_url) as (lite_url, lite_pid):
                    body = {"model": "fast", "messages": [{"role": "user", "content": "Say hello."}]}
                    body["stream"] = True
                    address, request = http_request(lite_url, "/v1/chat/completions", body)
                    run_async(drive(address, request, b"\n\n", b"[DONE]", min(n, 5), 0.2, None))
                    lite = run_async(drive(address, request, b"\n\n", b"[DONE]", n, args.ramp_s, lite_pid))
                    print(line("LiteLLM", lite, direct, n), flush=True)
        finally:
            other.stop()


def relayed(fake: FakeProcess, kind: Kind, n: int, args: argparse.Namespace, direct: Run) -> Run:
    """The floor: N streams through bench/tcp_relay.py, a byte pipe in front of the fake."""
    with tcp_relay(fake.url) as (relay_address, relay_pid):
        _, request = http_request(fake.url, kind.direct_path, kind.direct_body())
        sep, end = kind.direct_sep, kind.direct_end
        piped = run_async(drive(relay_address, request, sep, end, n, args.ramp_s, relay_pid))
    print(line("tcp relay", piped, direct, n), flush=True)
    return piped


def gateway_run(
    config: Path,
    source: Path | None,
    kind: Kind,
    body: dict[str, object],
    n: int,
    args: argparse.Namespace,
    fake: FakeProcess,
    direct: Run,
    floor: Run | None,
    label: str,
) -> Run:
    """N streams through a fresh `interlock serve` (from ``source``, else this tree)."""
    proc, url = start_gateway(config, 1, source=source)
    try:
        native = args.surface == "native"  # the client speaks the upstream's own format
        path = kind.direct_path if native else "/v1/chat/completions"
        sep, end = (kind.direct_sep, kind.direct_end) if native else (b"\n\n", b"[DONE]")
        address, request = http_request(url, path, body)
        run_async(drive(address, request, sep, end, min(n, 20), 0.2, None))  # warm-up
        profile = args.py_spy is not None and source is None
        spy = py_spy(args.py_spy, proc.pid, f"{kind.name}-{n}") if profile else None
        through = run_async(drive(address, request, sep, end, n, args.ramp_s, proc.pid))
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
            spy.wait(30)
        print(line(label, through, direct, n, floor), flush=True)
        if args.disconnect and source is None:
            disconnects(fake, url, address, request, n, args, proc.pid, kind)
    finally:
        proc.terminate()
        proc.wait(10)
    return through


def disconnects(
    fake: FakeProcess,
    url: str,
    address: tuple[str, int],
    request: bytes,
    n: int,
    args: argparse.Namespace,
    pid: int,
    kind: Kind,
) -> None:
    before = fake.streams()
    run = run_async(drive(address, request, b"\n\n", b"[DONE]", n, args.ramp_s, pid, leave_every=2))
    left = len(range(0, n, 2))
    started = time.monotonic()

    def settled() -> bool:
        now = fake.streams()
        return now["cut"] - before["cut"] >= left and now["open"] == 0

    closed_s = wait_for(settled, 30)
    slots_s = None
    if kind.name == "ollama":
        slots_s = wait_for(
            lambda: health(url)["workers"]["box1"]["slots_in_use"] == 0,  # type: ignore[index]
            max(1.0, 30 - (time.monotonic() - started)),
        )
    now = fake.streams()
    print(
        f"  disconnect {left} of {n} clients left after their first chunk: errors among the stayers "
        f"{sum(run.errors.values())}; upstream streams cut {now['cut'] - before['cut']}, open {now['open']}"
        + (f", all closed {closed_s:.2f} s after the run" if closed_s is not None else ", NOT all closed")
        + (
            ""
            if kind.name != "ollama"
            else (f"; slots back {slots_s:.2f} s after" if slots_s is not None else "; slots NOT all back")
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, nargs="+", default=[100, 1000], help="concurrent streams")
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=["openai", "ollama"])
    parser.add_argument("--chunks", type=int, default=100, help="content chunks per stream (M)")
    parser.add_argument("--rate", type=float, default=10.0, help="chunks per second per stream (R)")
    parser.add_argument("--ramp-s", type=float, default=5.0, help="start the N streams over this long")
    parser.add_argument("--disconnect", action="store_true", help="also: every other client leaves early")
    parser.add_argument(
        "--py-spy", type=Path, default=None, help="folder: profile each gateway run (py-spy --native)"
    )
    parser.add_argument("--litellm", type=Path, default=None, help="LiteLLM's `litellm` executable")
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM out")
    parser.add_argument(
        "--before", type=Path, default=None, help="also serve from this source tree (a `before` row)"
    )
    parser.add_argument("--before-first", action="store_true", help="run the `before` row first")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also: bench/tcp_relay.py, a byte pipe; each row's CPU per chunk is then shown as a ratio to it",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="interleaved rounds (floor, interlock, before): medians",
    )
    parser.add_argument(
        "--surface",
        choices=("openai", "native"),
        default="openai",
        help="what the clients speak to the gateway: OpenAI chat, or the upstream's own format (same-format)",
    )
    args = parser.parse_args()
    if args.litellm is not None and not args.litellm.exists():
        parser.error(f"--litellm {args.litellm}: no such file (bench/litellm_setup.sh installs LiteLLM)")
    if args.no_litellm:
        args.litellm = None
    elif args.litellm is None and (HERE / ".litellm-venv" / "bin" / "litellm").exists():
        args.litellm = HERE / ".litellm-venv" / "bin" / "litellm"

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 2 * max(args.n) + 256
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(needed, soft)), hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    print(
        f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; open-file limit {soft} "
        f"(needs ~{needed} here and in the gateway)",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as folder:
        for kind in args.kinds:
            for n in args.n:
                measure(KINDS[kind], n, args, Path(folder))


if __name__ == "__main__":
    main()
