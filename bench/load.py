"""A small HTTP load generator: N concurrent clients (aiohttp, keep-alive) POSTing one JSON body.

Reusable from other benchmarks (``await run_load(...)``, or ``run_wrk(...)``) or on its own:

    .venv/bin/python bench/load.py --url http://127.0.0.1:8080/v1/chat/completions \\
        --model mana/fast-text --concurrency 1 16 --seconds 5 [--stream] [--wrk [--rate 2000]]

Each client sends its next request as soon as the previous answer is read completely (closed loop).
Reports requests per second, latency percentiles and status counts; a warm-up period is not counted.

The aiohttp client costs several hundred µs of CPU per request itself; on a machine with few cores it
competes with what it measures. ``--wrk`` drives the same load with wrk (C, one thread; ``apt-get
install wrk``), which costs far less; ``--rate`` paces it evenly instead (open loop over the
connections, for percentiles at a steady rate).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
import orjson


@dataclass
class LoadResult:
    concurrency: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    # from wrk: its request count and a few percentiles (quantile -> seconds) instead of latencies
    counted: int | None = None
    marks: dict[float, float] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return len(self.latencies) if self.counted is None else self.counted

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile_ms(self, q: float) -> float:
        if self.marks:
            return self.marks[q] * 1000 if q in self.marks else float("nan")
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    def line(self) -> str:
        return (
            f"c={self.concurrency:<3} {self.rps:9.1f} req/s   p50 {self.percentile_ms(0.5):7.2f} ms   "
            f"p90 {self.percentile_ms(0.9):7.2f} ms   p99 {self.percentile_ms(0.99):7.2f} ms   "
            f"statuses {dict(self.statuses)}" + (f"   errors {dict(self.errors)}" if self.errors else "")
        )


def chat_body(model: str, *, stream: bool = False) -> bytes:
    return orjson.dumps(
        {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "stream": stream}
    )


async def run_load(
    url: str, body: bytes, concurrency: int, seconds: float, *, warmup_s: float = 0.5
) -> LoadResult:
    """Drive ``url`` with ``concurrency`` closed-loop clients for ``seconds`` (after ``warmup_s``)."""
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    result = LoadResult(concurrency, seconds)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        measure_from = started + warmup_s
        stop_at = measure_from + seconds

        async def client() -> None:
            while True:
                sent = time.perf_counter()
                if sent >= stop_at:
                    return
                try:
                    async with session.post(url, data=body, headers=headers) as response:
                        await response.read()
                        status = response.status
                except aiohttp.ClientError as exc:
                    if sent >= measure_from:
                        result.errors[type(exc).__name__] += 1
                    continue
                done = time.perf_counter()
                if sent >= measure_from and done <= stop_at:
                    result.latencies.append(done - sent)
                    result.statuses[status] += 1

        await asyncio.gather(*(client() for _ in range(concurrency)))
    return result


WRK_SCRIPT = """\
wrk.method = "POST"
local bodies = {%(bodies)s}
wrk.body = bodies[1]
%(headers)s
if #bodies > 1 then  -- one body after the other, round-robin
  local turn = 0
  request = function()
    turn = turn %% #bodies + 1
    return wrk.format(nil, nil, nil, bodies[turn])
  end
end
local rate = %(rate)r  -- requests a second over all connections; 0: each connection sends at once
if rate > 0 then
  -- even pacing: the n-th request is due at start + n / rate (whichever connection is free takes it);
  -- delay() and wrk's timers are in whole milliseconds, so a send is within about a millisecond of its
  -- slot (at 2,000/s: about two a millisecond), and the schedule never drifts
  local ffi = require("ffi")
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } interlock_timespec;
    int clock_gettime(int clock, interlock_timespec *ts);
  ]]
  local ts = ffi.new("interlock_timespec")
  local function now_ms()
    ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
  local interval, start, n = 1000 / rate, nil, 0
  delay = function()
    local now = now_ms()
    start = start or now
    n = n + 1
    local wait = start + n * interval - now
    if wait <= 0 then return 0 end
    return math.floor(wait + 0.5)
  end
end

done = function(summary, latency, requests)
  -- wrk "corrects" its histogram for coordinated omission: every latency n >= 2e (e = its run time
  -- divided by requests per connection) is also counted at n - e, n - 2e, ... while above e. Undone
  -- here, so the percentiles are of the latencies measured: orig[m] = final[m] - final[m + e], m > e.
  local connections = %(connections)d
  local per = math.floor(summary.requests / connections)
  local e = 0
  if per > 0 then e = math.floor(summary.duration / per) end
  local bins, values = {}, {}
  local i = 1
  while true do
    local value, count = latency(i)  -- the i-th filled bin; past the last: value 0
    if value == 0 then break end
    bins[value] = count
    values[#values + 1] = value
    i = i + 1
  end
  local measured, total = {}, 0
  for _, value in ipairs(values) do
    local count = bins[value]
    if e > 0 and value > e then count = count - (bins[value + e] or 0) end
    measured[value] = count
    total = total + count
  end
  local marks, quantiles, q, seen = {}, {0.5, 0.9, 0.99, 0.999}, 1, 0
  for _, value in ipairs(values) do
    seen = seen + measured[value]
    while q <= #quantiles and seen >= quantiles[q] * total do
      marks[#marks + 1] = string.format('"%%g": %%d', quantiles[q], value)
      q = q + 1
    end
  end
  local e_ = summary.errors
  io.write(string.format(
    'INTERLOCK {"requests": %%d, "measured": %%d, "duration_us": %%d, "max_us": %%d, "non2xx": %%d, ' ..
    '"connect": %%d, "read": %%d, "write": %%d, "timeout": %%d, "us": {%%s}}\\n',
    summary.requests, total, summary.duration, latency.max, e_.status, e_.connect, e_.read, e_.write,
    e_.timeout, table.concat(marks, ", ")))
end
"""


def wrk_script(bodies: list[bytes], connections: int, headers: dict[str, str], rate: float = 0.0) -> str:
    """wrk's Lua: POST ``bodies`` in turn with ``headers``, paced evenly at ``rate`` when given, and a
    ``done`` that prints the measured (uncorrected) percentiles as one JSON line."""
    lines = "\n".join(f"wrk.headers[{_lua(name)}] = {_lua(value)}" for name, value in headers.items())
    listed = ", ".join(f"[==[{body.decode()}]==]" for body in bodies)
    return WRK_SCRIPT % {"bodies": listed, "headers": lines, "rate": float(rate), "connections": connections}


def _lua(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run_wrk(
    url: str,
    body: bytes,
    concurrency: int,
    seconds: float,
    *,
    headers: dict[str, str] | None = None,
    rate: float = 0.0,
    bodies: list[bytes] | None = None,
    threads: int = 1,
) -> LoadResult:
    """The same load with wrk (``threads`` threads): closed loop, or paced evenly at ``rate`` requests a
    second over ``concurrency`` connections (one thread: the pacing is per thread); ``bodies``: sent in
    turn instead of ``body``. Latencies are the p50/p90/p99/p99.9 as measured (wrk's own correction
    for coordinated omission undone, see WRK_SCRIPT), so a stall shows at the percentile it hit."""
    import json
    import subprocess
    import tempfile

    sent = {"Content-Type": "application/json", "Authorization": "Bearer bench", **(headers or {})}
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as handle:
        handle.write(wrk_script(bodies or [body], concurrency, sent, rate / threads))  # each paces its share
        handle.flush()
        command = ["wrk", f"-t{threads}", f"-c{concurrency}", f"-d{seconds:g}s", "-s", handle.name, url]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        out = done.stdout + done.stderr
    line = next((x for x in out.splitlines() if x.startswith("INTERLOCK ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no report (its script failed?):\n{out}")
    report = json.loads(line.removeprefix("INTERLOCK "))
    result = LoadResult(concurrency, report["duration_us"] / 1e6)
    bad = report["non2xx"]
    result.statuses[200] = report["requests"] - bad
    if bad:
        result.statuses[0] = bad  # wrk does not say which status
    for kind in ("connect", "read", "write", "timeout"):  # e.g. answers slower than wrk's 2 s timeout
        if report[kind]:
            result.errors[f"wrk {kind}"] += report[kind]
    result.counted = report["requests"]
    result.marks = {float(q): us / 1e6 for q, us in report["us"].items()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default="bench")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--wrk", action="store_true", help="drive the load with wrk instead of aiohttp")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="with --wrk: pace evenly at this many requests a second"
    )
    args = parser.parse_args()
    body = chat_body(args.model, stream=args.stream)
    for concurrency in args.concurrency:
        if args.wrk:
            result = run_wrk(args.url, body, concurrency, args.seconds, rate=args.rate)
        else:
            result = asyncio.run(run_load(args.url, body, concurrency, args.seconds))
        print(result.line(), flush=True)


if __name__ == "__main__":
    main()
