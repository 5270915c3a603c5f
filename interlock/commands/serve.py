"""`serve`: run the gateway on a plan, or on a configuration compiled first (diagnostics and all).

This command may import the compiler (to compile a configuration); ``interlock.runtime`` never does.
Credential variables are read once, at start: a missing one stops the start with a message naming the
variable. SIGHUP reads the file again (recompiling a configuration) and swaps the plan in atomically;
a bad plan is refused, logged and counted, and the old one keeps serving.

With ``--workers N`` this process supervises: it reads (or compiles) the file, keeps a private copy of
the plan it accepted last, and every worker (a replacement too) loads that copy, never the file on
disk; it also owns the host's slot table (``runtime/state/embedded.py``), leased by the workers over a
Unix socket in the same private directory.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from interlock.runtime.base.errors import MIN_SECRET
from interlock.runtime.loaded.plan import PlanError, RuntimePlan, load_plan, read_plan_file
from interlock.schema.plan import RoutingPlan

if TYPE_CHECKING:
    from interlock.runtime.app.server import ServeOptions
    from interlock.runtime.features import Settings
    from interlock.runtime.usage.ledger import Ledger

log = logging.getLogger("interlock")

SHARED_STATE_SCHEMES = ("redis", "rediss")  # what --state-url takes; the others are the runtime's own


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
        "--state-url",
        metavar="URL",
        help="where slots and circuits live: redis://HOST:PORT/DB to share them between replicas "
        "(default: $INTERLOCK_STATE_URL, else this process; with --workers N, the supervisor)",
    )
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
    p.add_argument(
        "--state-dir",
        help="keep learned worker speeds in DIR/speeds.json across restarts (overrides routing.state_file)",
    )
    p.add_argument(
        "--usage-url",
        metavar="URL",
        help="the usage ledger (tokens and money per tenant, key and model; credits): sqlite:PATH, or "
        "postgresql://USER@HOST:PORT/DB shared by replicas (default: $INTERLOCK_USAGE_URL, else "
        "sqlite:DIR/usage.db with --state-dir DIR, else memory only)",
    )
    p.add_argument(
        "--usage-flush-ms",
        type=int,
        default=500,
        metavar="MS",
        help="commit the ledger's debits at least this often; a killed process loses at most this "
        "window of debits (default: 500)",
    )
    p.add_argument(
        "--usage-flush-debits",
        type=int,
        default=256,
        metavar="N",
        help="commit as soon as N debits are waiting, before the interval (default: 256)",
    )
    p.add_argument(
        "--usage-refresh-ms",
        type=int,
        default=5000,
        metavar="MS",
        help="read the balances back from the ledger this often, to see other replicas' and workers' "
        "usage (default: 5000)",
    )
    p.add_argument(
        "--audit-log",
        metavar="PATH",
        help="append an audit log to PATH: one JSON line per request (key id, tenant, alias, candidate, "
        "status, tokens, duration; never prompts, answers or secrets) and per admin action (reloads with "
        "the plan hashes, key and budget changes, refused keys); written by a background task from a "
        "bounded queue that drops and counts rather than block (docs/observability.md)",
    )
    p.add_argument(
        "--otel",
        action="store_true",
        help="trace requests with OpenTelemetry (the `otel` extra): a span per request, one per candidate "
        "tried, W3C traceparent passed upstream; exporter, endpoint and sampler from the standard OTEL_* "
        "variables (OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318)",
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

    def read_first(self) -> dict[str, Any]:
        """The plan's data at start: like ``read``, but a configuration's diagnostics go to stderr."""
        return self.compile(sys.stderr) if self.is_config else read_plan_file(self.path)

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
        return self.load(self.read_first())


class AcceptedPlan:
    """What a ``--workers N`` worker loads: the supervisor's private copy of the plan it accepted last.

    Picklable (it crosses to spawned processes): the copy's path, the credential snapshot, the origin.
    """

    def __init__(self, copy: Path, env: Mapping[str, str], origin: str) -> None:
        self.copy = copy
        self.env = dict(env)
        self.origin = origin

    def __call__(self) -> RuntimePlan:
        return self.load(self.read())

    def read(self) -> dict[str, Any]:
        return read_plan_file(self.copy)

    def load(self, data: dict[str, Any]) -> RuntimePlan:
        return load_plan(data, self.env, origin=self.origin)


class PlanKeeper:
    """The supervisor's side of reloads: read the operator's file, and keep the accepted copy current."""

    def __init__(self, loader: PlanLoader, directory: Path, plan: RuntimePlan, data: dict[str, Any]):
        self.loader = loader
        self.copy = directory / "plan.json"
        self.serving = plan.content_hash
        self._write(data)

    def workers_plan(self) -> AcceptedPlan:
        return AcceptedPlan(self.copy, self.loader.env, self.loader.path)

    def reload(self) -> bool:
        """SIGHUP: accept the file when it loads (True: tell the workers); else log and keep the copy."""
        from interlock.runtime.app.reading import read_in_child
        from interlock.runtime.app.reload import READ_TIMEOUT_S

        try:  # read (compile) in a child process, bounded in time: as a worker's own reload would
            data = asyncio.run(read_in_child(self.loader.read, READ_TIMEOUT_S))
            plan = self.loader.load(data)
        except PlanError as exc:
            return self._refused(str(exc))
        except Exception as exc:  # anything else from reading or compiling: refuse, keep serving
            return self._refused(f"{type(exc).__name__}: {exc}")
        self._write(data)
        log.info("plan accepted for the workers: %s -> %s", self.serving, plan.content_hash)
        self.serving = plan.content_hash
        return True

    def _refused(self, reason: str) -> bool:
        log.error("plan reload refused; the workers keep serving %s: %s", self.serving, reason)
        return False

    def _write(self, data: Mapping[str, Any]) -> None:
        partial = self.copy.with_suffix(".tmp")
        partial.write_bytes(orjson.dumps(data))
        partial.replace(self.copy)


def short_credentials(plan: RoutingPlan, env: Mapping[str, str]) -> list[str]:
    """A warning for each credential the plan reads that is shorter than ``MIN_SECRET`` characters: the
    scrubber replaces such a value in upstream text only where it stands alone (never inside words), so
    a careless upstream could echo it inside a word. Names the variable and the length, never the value."""
    named = [(f"provider {p.name}", p.api_key_env) for p in plan.providers.values()]
    named += [(f"caller key {k.id}", k.key_env) for k in plan.access.keys.values()]
    out = []
    for who, variable in sorted(named, key=lambda pair: pair[0]):
        value = env.get(variable, "") if variable else ""
        if 0 < len(value) < MIN_SECRET:
            out.append(
                f"{who}: the credential in {variable} is {len(value)} characters long; error texts are "
                f"scrubbed of credentials of {MIN_SECRET} or more anywhere, of shorter ones only where they "
                "stand alone"
            )
    return out


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


class StartRefused(Exception):
    """The start stops before serving: ``str()`` follows ``interlock serve: `` on standard error and
    ``status`` is the exit status (2: a flag that cannot be used, 1: a plan, file or address)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def run_serve(args: argparse.Namespace) -> int:
    from interlock.runtime.app.server import configure_logging
    from interlock.runtime.net.fds import raise_open_file_limit

    configure_logging(args.log_level)
    raise_open_file_limit()  # before the plan loads: an unset max_connections is derived from it
    try:
        return _serve(args)
    except StartRefused as exc:
        print(f"interlock serve: {exc}", file=sys.stderr)
        return exc.status


def _serve(args: argparse.Namespace) -> int:
    """Check the flags, load the plan and bind, then serve: in this process, or as the supervisor of
    ``--workers N``."""
    from interlock.commands.gateway import build_gateway
    from interlock.runtime.app.server import run, url_of
    from interlock.runtime.state import open_backend

    if args.workers < 1:
        raise StartRefused("--workers must be at least 1", 2)
    _check_switches(os.environ)
    _check_state_url(args)
    usage_url = usage_store_url(args)
    if usage_url is None:
        return 2
    loader = PlanLoader(args.plan, os.environ)  # credentials: read once, here
    try:
        data = loader.read_first()
        plan = loader.load(data)
    except PlanError as exc:
        raise StartRefused(str(exc), 1) from exc
    for warning in short_credentials(plan.source, os.environ):
        print(f"interlock serve: warning: {warning}", file=sys.stderr)
    options = _options(args, usage_url)
    _check_audit_log(options)
    _check_tracing(options)
    sock = _bind(options)
    print(
        f"interlock serving {url_of(sock)} (plan {plan.content_hash}, {_count(len(plan.aliases), 'alias')}, "
        f"{_count(options.workers, 'process')})",
        flush=True,
    )
    if options.workers == 1:
        gateway = build_gateway(
            plan,
            source=loader,
            slots=open_backend(args.state_url),
            access_log=_access_log(options),
            state_dir=options.state_dir,
            ledger=open_ledger(options),
            settings=_settings(options),
        )
        run(gateway, sock, options)
        return 0
    return supervise(loader, plan, data, sock, options, args.state_url)


def _check_switches(env: Mapping[str, str]) -> None:
    """The debugging switches (``INTERLOCK_TRANSPORT``, ``INTERLOCK_SERVER``) name a row of their table:
    a mistyped one stops the start here, not after ``interlock serving`` with a traceback."""
    from interlock.runtime.net.connections import SERVERS
    from interlock.runtime.net.transport import TRANSPORTS

    for variable, table in (("INTERLOCK_TRANSPORT", TRANSPORTS), ("INTERLOCK_SERVER", SERVERS)):
        name = env.get(variable)
        if name and name not in table:
            raise StartRefused(f"{variable}={name!r} is not one of {', '.join(table)}", 2)


def _check_state_url(args: argparse.Namespace) -> None:
    """``--state-url`` (else ``$INTERLOCK_STATE_URL``), into ``args``: a shared store that opens."""
    from interlock.runtime.state import open_backend

    if args.state_url is None:  # e.g. from a Kubernetes Secret: a password stays off the command line
        args.state_url = os.environ.get("INTERLOCK_STATE_URL") or None
    if args.state_url is None:
        return
    scheme = args.state_url.partition(":")[0]
    if scheme not in SHARED_STATE_SCHEMES:
        raise StartRefused(
            f"--state-url: {scheme + ':'!r} is not a shared store; use redis:// or "
            "rediss:// (--workers N shares limits across its processes by itself)",
            2,
        )
    try:
        open_backend(args.state_url)  # checked now, opened in each process that serves
    except ValueError as exc:
        raise StartRefused(f"--state-url: {exc}", 2) from exc


def _options(args: argparse.Namespace, usage_url: str) -> ServeOptions:
    from interlock.runtime.app.server import ServeOptions

    return ServeOptions(
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        access_log=args.access_log,
        state_dir=args.state_dir,
        usage_url=usage_url,
        usage_flush_ms=args.usage_flush_ms,
        usage_flush_debits=args.usage_flush_debits,
        usage_refresh_ms=args.usage_refresh_ms,
        audit_log=args.audit_log,
        otel=args.otel,
    )


def _check_audit_log(options: ServeOptions) -> None:
    """``--audit-log`` opens (a clear error at start); each process that serves opens its own."""
    if options.audit_log is None:
        return
    from interlock.runtime.features.audit import SinkError, open_sink

    try:
        asyncio.run(open_sink(options.audit_log).close())
    except SinkError as exc:
        raise StartRefused(f"--audit-log: {exc}", 1) from exc


def _check_tracing(options: ServeOptions) -> None:
    """``--otel`` can run: a missing package or a bad OTEL_* setting stops the start here (a tracer made
    and shut down; each process that serves makes its own, when the feature table plugs the row in)."""
    if not options.otel:
        return
    from interlock.runtime.features.tracing import TracingUnavailable, open_tracing

    try:
        tracing = open_tracing(os.environ)
    except TracingUnavailable as exc:
        raise StartRefused(f"--otel: {exc}", 1) from exc
    if tracing is not None:
        tracing.provider.shutdown()


def _bind(options: ServeOptions) -> socket.socket:
    from interlock.runtime.app.server import bind

    try:
        return bind(options.host, options.port)
    except OSError as exc:
        raise StartRefused(f"cannot listen on {options.host}:{options.port}: {exc.strerror}", 1) from exc


def supervise(
    loader: PlanLoader,
    plan: RuntimePlan,
    data: dict[str, Any],
    sock: socket.socket,
    options: Any,
    state_url: str | None,
) -> int:
    """``--workers N``: a private directory for the accepted plan and the slot server, then the workers."""
    from interlock.runtime.app.server import Supervisor
    from interlock.runtime.state.embedded import SlotServer

    directory = Path(tempfile.mkdtemp(prefix="interlock-"))  # mode 0700: this user's only
    try:
        keeper = PlanKeeper(loader, directory, plan, data)
        slots = SlotServer(str(directory / "slots.sock")) if state_url is None else None
        if slots is not None:
            try:
                slots.start()
            except OSError as exc:
                print(
                    f"interlock serve: cannot start the slot server at {slots.path}: {exc}", file=sys.stderr
                )
                return 1
        try:
            url = f"unix:{slots.path}" if slots is not None else state_url
            args = (keeper.workers_plan(), sock, options, url)
            return Supervisor(options.workers, worker_main, args, reload=keeper.reload).run()
        finally:
            if slots is not None:
                slots.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}es" if noun.endswith("s") else f"{n} {noun}s"


def worker_main(source: AcceptedPlan, sock: socket.socket, options: Any, state_url: str | None) -> None:
    """One worker process: its own plan tables, health state and upstream client; the host's slots."""
    from interlock.commands.gateway import build_gateway
    from interlock.runtime.app.server import configure_logging, run
    from interlock.runtime.state import open_backend

    configure_logging(options.log_level)
    gateway = build_gateway(
        source(),
        source=source,
        slots=open_backend(state_url),
        access_log=_access_log(options),
        state_dir=options.state_dir,
        ledger=open_ledger(options),
        settings=_settings(options),
    )
    run(gateway, sock, options)


def usage_store_url(args: argparse.Namespace) -> str | None:
    """The usage ledger's URL (flag, environment, state directory, memory), checked; None after
    printing why it cannot be used."""
    from interlock.runtime.usage import open_store, store_url

    given = args.usage_url or os.environ.get("INTERLOCK_USAGE_URL") or None  # a password stays off argv
    url = store_url(given, args.state_dir)
    if min(args.usage_flush_ms, args.usage_flush_debits, args.usage_refresh_ms) < 1:
        print("interlock serve: the --usage-* numbers must be at least 1", file=sys.stderr)
        return None
    try:
        open_store(url)  # checked now, opened in each process that serves
    except ValueError as exc:
        print(f"interlock serve: --usage-url: {exc}", file=sys.stderr)
        return None
    return url


def open_ledger(options: Any) -> Ledger:
    """This process's usage ledger, on the store the options name."""
    from interlock.runtime.usage import open_store
    from interlock.runtime.usage.ledger import Ledger, LedgerSettings

    settings = LedgerSettings(
        flush_s=options.usage_flush_ms / 1000,
        flush_debits=options.usage_flush_debits,
        refresh_s=options.usage_refresh_ms / 1000,
    )
    return Ledger(open_store(options.usage_url), settings)


def _settings(options: Any) -> Settings:
    """The serve settings the feature table reads: ``--audit-log`` and ``--otel`` (its ``OTEL_*``
    variables), each a row plugged in by the process that serves."""
    from interlock.runtime.features import Settings

    return Settings(audit_log=options.audit_log, otel=options.otel, environ=os.environ)


def _access_log(options: Any) -> BinaryIO | None:
    """Where the JSON access log goes: this process's standard error, or nowhere."""
    return sys.stderr.buffer if options.access_log == "json" else None
