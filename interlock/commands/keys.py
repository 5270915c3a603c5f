"""`keys add`: make a caller key, print it once, and print the `keys:` entry (its hash) for the config."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from interlock.apikeys import KEY_ID, hash_key, new_key


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("keys", help="make caller API keys (`keys add --tenant T --id ID`)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser(
        "add",
        help="generate a key: the key itself is printed once (to stderr), the config entry to stdout",
        description=(
            "Generates a 256-bit key `il-<id>.<secret>`. The key is printed once, on standard error, "
            "and is not stored anywhere; standard output gets the YAML entry to paste under `keys:` "
            "(its salted HMAC-SHA256 hash, never the key)."
        ),
    )
    add.add_argument("--tenant", required=True, help="the tenant the key belongs to (under `tenants:`)")
    add.add_argument("--id", dest="key_id", required=True, help="the key's id, e.g. `ci-bot` (shown in logs)")
    add.add_argument(
        "--operator",
        action="store_true",
        help="the key may read the whole fleet's state (`/ui`, `/v1/health`; docs/access.md, Routes)",
    )
    add.set_defaults(handler=run_add, parser=add)


def run_add(args: argparse.Namespace) -> int:
    if not KEY_ID.match(args.key_id):
        args.parser.error(
            f"--id: `{args.key_id}` is not a key id (letters, digits, `-` and `_`, at most 64, "
            "starting with a letter or digit)"
        )
    if not args.tenant.strip():
        args.parser.error("--tenant: give the tenant's name")
    key = new_key(args.key_id)
    print(f"key for {args.key_id} (shown once, store it now): {key}", file=sys.stderr)
    print(f"  {args.key_id}:")
    print(f"    tenant: {args.tenant}")
    print(f'    hash: "{hash_key(key)}"')
    if args.operator:
        print("    operator: true")
    return 0
