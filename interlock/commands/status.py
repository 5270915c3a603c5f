"""`status`: a running gateway's aliases, workers and providers in the terminal, for people and scripts.

Reads ``GET /v1/aliases``, ``GET /v1/health`` and ``GET /v1/metadata`` (the facts of the status page)
and prints plain text tables, or ``--format json``. Plain text rather than `rich`: the output goes to
cron mails, CI logs and `grep` as often as to a terminal, and stays byte-for-byte predictable without
colour codes.

Exit codes: 0 every alias has a healthy candidate; 1 some alias has none; 2 the gateway could not be
reached (or answered something that is not its status).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from interlock.runtime.loaded.tables import worker_label
from interlock.runtime.ops.ui.view import span

DEFAULT_URL = "http://127.0.0.1:8080"


class Unreachable(Exception):
    """The gateway did not answer with its status."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status",
        help="which aliases a running gateway can serve now, and the state of its workers and providers",
    )
    p.add_argument("--url", default=DEFAULT_URL, help=f"the gateway's base URL (default: {DEFAULT_URL})")
    p.add_argument("--format", choices=("text", "json"), default="text", help="(default: text)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the gateway (default: 5)")
    p.add_argument(
        "--api-key-env",
        default="INTERLOCK_API_KEY",
        metavar="VARIABLE",
        help="the variable holding a caller key, for a gateway with `server.auth` on "
        "(default: INTERLOCK_API_KEY; sent only when set)",
    )
    p.set_defaults(handler=run_status)


def run_status(args: argparse.Namespace) -> int:
    url = args.url.rstrip("/")
    try:
        aliases, health, metadata = fetch(url, args.timeout, os.environ.get(args.api_key_env) or None)
    except Unreachable as exc:
        print(f"interlock status: {exc}", file=sys.stderr)
        return 2
    report = summarize(url, aliases, health, metadata)
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(report, time.time()))
    return 0 if report["servable"] else 1


def fetch(
    url: str, timeout_s: float, key: str | None = None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    import httpx

    headers = {"authorization": f"Bearer {key}"} if key else {}
    try:
        with httpx.Client(base_url=url, timeout=timeout_s, trust_env=False, headers=headers) as http:
            answers = [http.get(path) for path in ("/v1/aliases", "/v1/health", "/v1/metadata")]
    except httpx.HTTPError as exc:
        raise Unreachable(f"cannot reach {url}: {exc or type(exc).__name__}") from None
    bodies: list[dict[str, Any]] = []
    for response in answers:
        if response.status_code == 404 and response.request.url.path == "/v1/metadata":
            bodies.append({})  # a gateway from before live metadata: loaded models unknown
            continue
        if response.status_code == 401:
            raise Unreachable(
                f"{response.request.url} answered 401: the gateway needs a caller key; put one in "
                "INTERLOCK_API_KEY (or the variable named by --api-key-env)"
            )
        if response.status_code == 403:  # an operator route, and the key sent is not an operator
            raise Unreachable(
                f"{response.request.url} answered 403: this gateway shows its state to operator keys "
                "only; put a key with `operator: true` in INTERLOCK_API_KEY (or the variable named by "
                "--api-key-env)"
            )
        if response.status_code != 200:
            raise Unreachable(f"{response.request.url} answered {response.status_code}")
        try:
            bodies.append(response.json())
        except ValueError:
            raise Unreachable(
                f"{response.request.url} did not answer JSON; is this an interlock gateway?"
            ) from None
    return bodies[0], bodies[1], bodies[2]


def summarize(
    url: str, aliases: dict[str, Any], health: dict[str, Any], metadata: dict[str, Any]
) -> dict[str, Any]:
    """The report: per alias, whether it can answer and which candidate would answer first."""
    facts = metadata.get("workers", {})
    down = _down_providers(health)
    rows = []
    for alias in aliases.get("data", []):
        candidates = [
            {
                "id": c["id"],
                "healthy": c["healthy"],
                "circuit_open_until": c.get("circuit_open_until"),
                "last_error_class": c.get("last_error_class"),
                "last_success_at": c.get("last_success_at"),
                "provider_down": None if c["healthy"] else down.get(c["provider"]),
            }
            for c in alias["candidates"]
        ]
        first = next((i for i, c in enumerate(candidates) if c["healthy"]), None)
        rows.append(
            {
                "name": alias["name"],
                "servable": first is not None,
                "answers_with": candidates[first]["id"] if first is not None else None,
                "position": first + 1 if first is not None else None,
                "candidates": candidates,
            }
        )
    workers = [
        {
            "name": name,
            "provider": w["provider"],
            "healthy": w["healthy"],
            "slots_in_use": w["slots_in_use"],
            "max_concurrent": w["max_concurrent"],
            "queue_waiting": w["queue_waiting"],
            "max_waiting": w["queue"]["max_waiting"],
            "loaded": facts.get(worker_label(w["provider"], name), {}).get("loaded"),
            "telemetry": w.get("telemetry"),
        }
        for name, w in health.get("workers", {}).items()
    ]
    providers = [
        {"name": name, "kind": p["kind"], "healthy": p["healthy"], "probe": p["probe"]}
        for name, p in health.get("providers", {}).items()
    ]
    unservable = [row["name"] for row in rows if not row["servable"]]
    return {
        "url": url,
        "plan": health.get("plan", {}),
        "ready": health.get("ready"),
        "servable": not unservable,
        "unservable": unservable,
        "aliases": rows,
        "workers": workers,
        "providers": providers,
    }


def _down_providers(health: dict[str, Any]) -> dict[str, str]:
    """Provider -> why every endpoint of it is down (the probe's or the last call's error class)."""
    out = {}
    for name, provider in health.get("providers", {}).items():
        if provider["healthy"]:
            continue
        classes = {
            e.get("last_probe_error_class") or e.get("last_error_class") or "down"
            for e in provider["endpoints"]
        }
        out[name] = ", ".join(sorted(classes))
    return out


# -- text --------------------------------------------------------------------------------------------


def render_text(report: dict[str, Any], now: float) -> str:
    plan = report["plan"]
    lines = [
        f"interlock at {report['url']}: plan {plan.get('content_hash', '?')}, "
        f"{'ready' if report['ready'] else 'starting'}, loaded {_when(plan.get('loaded_at'), now)}"
    ]
    reload = plan.get("last_reload")
    if reload:
        detail = reload["error"] if reload["result"] == "refused" else _changes(reload)
        lines.append(f"last reload: {reload['result']} {_when(reload['at'], now)} ({detail})")
    lines.append("")
    alias_rows = [
        [
            row["name"],
            "yes" if row["servable"] else "NO",
            f"{row['answers_with']} (#{row['position']})" if row["servable"] else "-",
            " > ".join(_candidate(c, now) for c in row["candidates"]),
        ]
        for row in report["aliases"]
    ]
    lines += table(["ALIAS", "SERVABLE", "ANSWERS WITH", "CHAIN"], alias_rows)
    if report["workers"]:
        lines.append("")
        lines += table(
            ["WORKER", "PROVIDER", "STATE", "SLOTS", "QUEUE", "GPU", "LOADED"],
            [
                [
                    w["name"],
                    w["provider"],
                    "up" if w["healthy"] else "DOWN",
                    f"{w['slots_in_use']}/{w['max_concurrent']}",
                    f"{w['queue_waiting']}/{w['max_waiting']}",
                    _gpu(w["telemetry"]),
                    _loaded(w["loaded"]),
                ]
                for w in report["workers"]
            ],
        )
    clouds = [p for p in report["providers"] if p["kind"] != "ollama"]
    if clouds:
        lines.append("")
        lines += table(
            ["PROVIDER", "KIND", "STATE", "PROBE"],
            [
                [p["name"], p["kind"], "up" if p["healthy"] else "DOWN", "on" if p["probe"] else "off"]
                for p in clouds
            ],
        )
    lines.append("")
    total = len(report["aliases"])
    if report["servable"]:
        lines.append(f"ok: all {total} aliases have a healthy candidate")
    else:
        names = ", ".join(report["unservable"])
        lines.append(
            f"FAIL: {len(report['unservable'])} of {total} aliases have no healthy candidate: {names}"
        )
    return "\n".join(lines) + "\n"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns, two spaces apart; the last column is not padded."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    return [
        "  ".join(
            [*(str(cell).ljust(w) for cell, w in zip(row, widths, strict=False)), str(row[-1])]
        ).rstrip()
        for row in [header, *rows]
    ]


def _candidate(c: dict[str, Any], now: float) -> str:
    if c["healthy"]:
        return str(c["id"])
    why = []
    if c["last_error_class"]:
        why.append(c["last_error_class"])
    if c["provider_down"]:
        why.append(f"provider down: {c['provider_down']}")
    if not why:
        why.append("endpoint down")
    if c["circuit_open_until"]:
        why.insert(0, f"open until {_when(c['circuit_open_until'], now)}")
    return f"{c['id']} [{', '.join(why)}]"


def _gpu(telemetry: dict[str, Any] | None) -> str:
    if not telemetry:
        return "-"
    gpu = telemetry.get("gpu") or {}
    parts = []
    if gpu.get("utilization_percent") is not None:
        parts.append(f"{gpu['utilization_percent']:.0f}%")
    used, total = telemetry.get("vram_used_bytes"), telemetry.get("vram_total_bytes")
    if used is not None and total:
        parts.append(f"{used / 2**30:.1f}/{total / 2**30:.1f} GiB")
    if gpu.get("temperature_celsius") is not None:
        parts.append(f"{gpu['temperature_celsius']:.0f}°C")
    return " ".join(parts) or "no readings"


def _loaded(loaded: dict[str, int | None] | None) -> str:
    """``llama3.2:3b (4096 ctx)``; ``none``; ``?`` when the worker did not say (it is down, say)."""
    if loaded is None:
        return "?"
    if not loaded:
        return "none"
    return ", ".join(f"{m} ({ctx} ctx)" if ctx else m for m, ctx in sorted(loaded.items()))


def _changes(reload: dict[str, Any]) -> str:
    n = reload.get("changes_total", len(reload.get("changes") or []))
    return f"{n} routing change{'s' * (n != 1)}"


def _when(iso: str | None, now: float) -> str:
    """``2026-11-30T10:00:00.000Z (3 min ago)``; ``-`` for none."""
    if not iso:
        return "-"
    try:
        age = now - datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return iso
    relative = f"in {span(-age)}" if age < 0 else f"{span(age)} ago"
    return f"{iso} ({relative})"
