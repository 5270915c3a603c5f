"""The telemetry sidecar: serves this host's nvidia-smi and memory readings as the telemetry document.

Run it on a GPU box next to Ollama and point the worker's ``telemetry.url`` at it::

    interlock telemetry-sidecar --host 0.0.0.0 --port 9400
    python -m interlock.runtime.telemetry.sidecar --host 0.0.0.0 --port 9400   # the same

``GET /telemetry`` reads every source afresh (one read at a time; a scrape waits for the one running)
and answers the document of ``document.py``: every GPU nvidia-smi reports (or only ``--gpu``), this
host's memory (unified on macOS), and ``errors`` for the sources it could not read. It uses the
standard library's HTTP server only, and shows no serial numbers, UUIDs or process names.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from interlock.runtime.base.clock import iso_utc
from interlock.runtime.telemetry import document
from interlock.runtime.telemetry.host_memory import read_host_memory
from interlock.runtime.telemetry.nvidia_smi import COMMAND, query_gpus
from interlock.runtime.telemetry.readings import GpuReading, HostMemory
from interlock.runtime.telemetry.source_errors import TelemetryError

PATH = "/telemetry"


class Readings:
    """Reads the sources one request at a time."""

    def __init__(
        self,
        *,
        gpu: int | None,
        nvidia_smi: bool,
        host_memory: bool,
        timeout_s: float,
        command: str = COMMAND,
    ) -> None:
        self.gpu, self.nvidia_smi, self.host_memory, self.timeout_s = gpu, nvidia_smi, host_memory, timeout_s
        self.command = command
        self._lock = threading.Lock()

    def document(self) -> dict[str, Any]:
        with self._lock:
            gpus: list[GpuReading] = []
            host: HostMemory | None = None
            errors: dict[str, str] = {}
            if self.nvidia_smi:
                try:
                    gpus = query_gpus(self.gpu, self.timeout_s, command=self.command)
                except TelemetryError as exc:
                    errors["nvidia_smi"] = exc.error_class
            if self.host_memory:
                try:
                    host = read_host_memory(self.timeout_s)
                except TelemetryError as exc:
                    errors["host_memory"] = exc.error_class
            return document.build(gpus, host, errors, iso_utc(time.time()) or "")


def make_server(host: str, port: int, readings: Readings) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        server_version = "interlock-telemetry-sidecar"

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != PATH:
                self._send(404, {"error": f"not found; the document is at {PATH}"})
                return
            self._send(200, readings.document())

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = orjson.dumps(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # the base class's signature
            return  # quiet: a scrape every few seconds is not news

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9400, help="port (default: 9400; 0 picks a free one)")
    parser.add_argument("--gpu", type=int, default=None, help="report only this GPU index (default: all)")
    parser.add_argument("--nvidia-smi", default=COMMAND, help="the executable (default: nvidia-smi on PATH)")
    parser.add_argument("--no-nvidia-smi", action="store_true", help="do not run nvidia-smi (Apple, CPU)")
    parser.add_argument("--no-host-memory", action="store_true", help="do not read the host's memory")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per source (default: 3)")


def run(args: argparse.Namespace) -> int:
    readings = Readings(
        gpu=args.gpu,
        nvidia_smi=not args.no_nvidia_smi,
        host_memory=not args.no_host_memory,
        timeout_s=args.timeout,
        command=args.nvidia_smi,
    )
    try:
        server = make_server(args.host, args.port, readings)
    except OSError as exc:
        print(
            f"interlock telemetry-sidecar: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr
        )
        return 1
    port = server.server_address[1]
    print(f"interlock telemetry-sidecar serving http://{args.host}:{port}{PATH}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m interlock.runtime.telemetry.sidecar", description=__doc__
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
