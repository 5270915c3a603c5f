"""`serve`: run the gateway on a plan, or on a configuration compiled first (diagnostics and all).

This command may import the compiler (to compile a configuration); ``interlock.runtime`` never does.
Credential variables are read once, at start: a missing one stops the start with a message naming the
variable. SIGHUP reads the file again (recompiling a configuration) and swaps the plan in atomically;
a bad plan is refused, logged and counted, and the old one keeps serving.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from interlock.runtime.plan import PlanError, RuntimePlan, load_plan, read_plan_file

log = logging.getLogger("interlock")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve a routing plan (or a configuration, compiled first) as an OpenAI-compatible gateway",
    )
    p.add_argument(
        "plan", metavar="PLAN_OR_CONFIG", help="a compiled plan (.json) or a configuration (.yaml)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default: 8080; 0 picks a free one)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default: 1)")
    p.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error"), help="(default: info)"
    )
    p.add_argument(
        "--access-log",
        nargs="?",
        const="text",
        choices=("text", "json"),
        help="log every request to stderr: `json` one JSON object a line (docs/operations.md), "
        "`text` (or no value) uvicorn's line; off by default",
    )
    p.set_defaults(handler=run_serve)


class PlanLoader:
    """Reads the plan file, or compiles the configuration, and builds the runtime tables.

    Holds the credential snapshot taken once at start; picklable, so worker processes get the same.
    """

    def __init__(self, path: str, env: Mapping[str, str]) -> None:
        self.path = path
        self.env = dict(env)
        self.is_config = is_config(path)

    def __call__(self) -> RuntimePlan:
        return self.load(self.read())

    def read(self) -> dict[str, Any]:
        """The plan's JSON data: the file read, or the configuration compiled (a reload runs this in a
        child process: ``runtime.reload``)."""
        return self.compile(None) if self.is_config else read_plan_file(self.path)

    def load(self, data: dict[str, Any]) -> RuntimePlan:
        return load_plan(data, self.env, origin=self.path)

    def compile(self, diagnostics: Any) -> dict[str, Any]:
        """Compile the configuration; ``diagnostics`` (a stream) gets every diagnostic when given."""
        from interlock.compiler import compile_config
        from interlock.compiler.report import render

        ctx = compile_config(self.path)
        text = render(ctx.sink.items, "text", ctx.sources)
        if diagnostics is not None and text:
            diagnostics.write(text)
        if ctx.plan is None or ctx.sink.errors:
            if diagnostics is not None:
                raise PlanError(f"{self.path} does not compile (see the diagnostics above)")
            errors = render(ctx.sink.errors, "text", ctx.sources).strip()
            raise PlanError(f"{self.path} does not compile:\n{errors}")
        data: dict[str, Any] = ctx.plan.model_dump(mode="json")
        return data

    def first(self) -> RuntimePlan:
        """The plan at start: like a reload, but a configuration's diagnostics go to stderr."""
        if not self.is_config:
            return self()
        return load_plan(self.compile(sys.stderr), self.env, origin=self.path)


def is_config(path: str) -> bool:
    suffix = Path(path).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return True
    if suffix == ".json":
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(64).lstrip()
    except OSError:
        return False
    return not head.startswith(b"{")


def run_serve(args: argparse.Namespace) -> int:
    from interlock.runtime.app import Gateway
    from interlock.runtime.server import ServeOptions, Supervisor, bind, configure_logging, run, url_of

    configure_logging(args.log_level)
    if args.workers < 1:
        print("interlock serve: --workers must be at least 1", file=sys.stderr)
        return 2
    loader = PlanLoader(args.plan, os.environ)  # credentials: read once, here
    try:
        plan = loader.first()
    except PlanError as exc:
        print(f"interlock serve: {exc}", file=sys.stderr)
        return 1
    options = ServeOptions(
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        access_log=args.access_log,
    )
    try:
        sock = bind(options.host, options.port)
    except OSError as exc:
        print(
            f"interlock serve: cannot listen on {options.host}:{options.port}: {exc.strerror}",
            file=sys.stderr,
        )
        return 1
    print(
        f"interlock serving {url_of(sock)} (plan {plan.content_hash}, {_count(len(plan.aliases), 'alias')}, "
        f"{_count(options.workers, 'process')})",
        flush=True,
    )
    if options.workers == 1:
        run(Gateway(plan, source=loader, access_log=_access_log(options)), sock, options)
        return 0
    return Supervisor(options.workers, worker_main, (loader, sock, options)).run()


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}es" if noun.endswith("s") else f"{n} {noun}s"


def worker_main(loader: PlanLoader, sock: socket.socket, options: Any) -> None:
    """One worker process: its own plan tables, health state and upstream client."""
    from interlock.runtime.app import Gateway
    from interlock.runtime.server import configure_logging, run

    configure_logging(options.log_level)
    run(Gateway(loader(), source=loader, access_log=_access_log(options)), sock, options)


def _access_log(options: Any) -> BinaryIO | None:
    """Where the JSON access log goes: this process's standard error, or nowhere."""
    return sys.stderr.buffer if options.access_log == "json" else None
