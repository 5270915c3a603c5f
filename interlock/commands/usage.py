"""`usage`: what each tenant, key and model used, read from the usage ledger (SQLite file or PostgreSQL).

Reads the ledger's rows (one per day, tenant, key and model; ``runtime/usage``) from ``--since`` on and
sums them per tenant, key and model. It reads what the gateways have committed: a running gateway's last
``--usage-flush-ms`` of debits may not be there yet. Plain text, or ``--format json`` for scripts.

Exit codes: 0 printed (an empty ledger too); 1 the ledger cannot be read (no file, server unreachable);
2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from typing import Any

from interlock.runtime.usage import open_store, store_url
from interlock.runtime.usage.base import Tally, UsageStoreError

_DAYS = re.compile(r"(\d{1,4})d")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
COLUMNS = ("TENANT", "KEY", "MODEL", "REQUESTS", "PROMPT", "COMPLETION", "COST", "ESTIMATED")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "usage", help="tokens and money used per tenant, key and model, from the usage ledger"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--usage-url",
        metavar="URL",
        help="the ledger: sqlite:PATH or postgresql://... (default: $INTERLOCK_USAGE_URL)",
    )
    where.add_argument("--state-dir", metavar="DIR", help="the gateway's --state-dir (reads DIR/usage.db)")
    p.add_argument("--tenant", metavar="T", help="only this tenant's keys")
    p.add_argument(
        "--since",
        default="month",
        metavar="WHEN",
        help="YYYY-MM-DD, Nd (the last N days, today included), month (this calendar month, UTC: "
        "the budget window) or all (default: month)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="(default: text)")
    p.set_defaults(handler=run_usage, parser=p)


def since_day(text: str, now: float) -> str | None:
    """The first day (UTC) that ``--since`` includes; None for all; ``ValueError`` when unreadable."""
    if text == "all":
        return None
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    if text == "month":
        return today[:8] + "01"
    if _DATE.fullmatch(text) and _is_date(text):
        return text
    days = _DAYS.fullmatch(text)
    if days and int(days.group(1)) >= 1:
        return time.strftime("%Y-%m-%d", time.gmtime(now - (int(days.group(1)) - 1) * 86400))
    raise ValueError(f"--since {text!r}: use YYYY-MM-DD, Nd (N >= 1), month or all")


def _is_date(text: str) -> bool:
    try:
        time.strptime(text, "%Y-%m-%d")
    except ValueError:
        return False
    return True


def run_usage(args: argparse.Namespace) -> int:
    url = args.usage_url or (None if args.state_dir else os.environ.get("INTERLOCK_USAGE_URL") or None)
    if url is None and args.state_dir is None:
        args.parser.error("say where the ledger is: --usage-url URL, --state-dir DIR or $INTERLOCK_USAGE_URL")
    url = store_url(url, args.state_dir)
    try:
        since = since_day(args.since, time.time())
        store = open_store(url)
    except ValueError as exc:
        args.parser.error(str(exc))
    if url.startswith("memory:"):
        args.parser.error("memory: is a gateway's own memory; give the SQLite file or PostgreSQL URL")
    missing = store.missing()  # reading must not create an empty ledger
    if missing is not None:
        print(f"interlock usage: {missing}", file=sys.stderr)
        return 1
    try:
        rows = asyncio.run(_read(store, since, args.tenant))
    except UsageStoreError as exc:
        print(f"interlock usage: {exc}", file=sys.stderr)
        return 1
    report = summarize(rows, since, args.tenant)
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(report))
    return 0


async def _read(store: Any, since: str | None, tenant: str | None) -> list[tuple[tuple[str, ...], Tally]]:
    try:
        await store.open()
        rows: list[tuple[tuple[str, ...], Tally]] = await store.rows(since, tenant)
        return rows
    finally:
        await store.close()


def summarize(
    rows: list[tuple[tuple[str, ...], Tally]], since: str | None, tenant: str | None
) -> dict[str, Any]:
    """Rows summed per (tenant, key, model) over the days, sorted; and the total."""
    sums: dict[tuple[str, str, str], Tally] = {}
    total = Tally()
    for (_day, t, key_id, model), tally in rows:
        sums.setdefault((t, key_id, model), Tally()).add(tally)
        total.add(tally)
    return {
        "since": since,
        "tenant": tenant,
        "rows": [
            {"tenant": t, "key_id": key_id, "model": model, **_counters(tally)}
            for (t, key_id, model), tally in sorted(sums.items())
        ],
        "total": _counters(total),
    }


def _counters(tally: Tally) -> dict[str, Any]:
    return {
        "requests": tally.requests,
        "prompt_tokens": tally.prompt_tokens,
        "completion_tokens": tally.completion_tokens,
        "cost": tally.cost_micros / 1_000_000,
        "estimated": tally.estimated,
    }


def render_text(report: dict[str, Any]) -> str:
    since = report["since"] or "the beginning"
    who = f", tenant {report['tenant']}" if report["tenant"] else ""
    lines = [f"usage since {since} (UTC){who}"]
    if not report["rows"]:
        return "\n".join([*lines, "no usage recorded", ""])
    table = [list(COLUMNS)]
    for row in [*report["rows"], {"tenant": "total", "key_id": "", "model": "", **report["total"]}]:
        table.append(
            [
                row["tenant"],
                row["key_id"],
                row["model"],
                str(row["requests"]),
                str(row["prompt_tokens"]),
                str(row["completion_tokens"]),
                f"{row['cost']:.6f}",
                str(row["estimated"]),
            ]
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    for line in table:
        cells = [
            c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"
