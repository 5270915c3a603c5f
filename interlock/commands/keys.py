"""`keys add`: make a caller key, print it once, and print the `keys:` entry (its hash) for the config."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from interlock.common.apikeys import KEY_ID, hash_key, new_key


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
    add.add_argument(
        "--write",
        metavar="CONFIG",
        help="add the entry to CONFIG's `keys:` (and the tenant to `tenants:` if it is missing) instead "
        "of printing it; the file's comments, order and style are kept",
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
    if args.write is not None:
        return _write(args)
    key = new_key(args.key_id)
    print(f"key for {args.key_id} (shown once, store it now): {key}", file=sys.stderr)
    print(f"  {args.key_id}:")
    print(f"    tenant: {args.tenant}")
    print(f'    hash: "{hash_key(key)}"')
    if args.operator:
        print("    operator: true")
    return 0


def _write(args: argparse.Namespace) -> int:
    """Add the key's entry to the configuration file itself, in a round trip (nothing else changes)."""
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    from interlock.commands.files import OutputError, write_atomically
    from interlock.commands.yamlfile import ConfigEditError, dump, load

    path: str = args.write
    try:
        with open(path, encoding="utf-8") as handle:
            yaml, data = load(handle.read())
    except OSError as exc:
        print(f"interlock keys add: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except ConfigEditError as exc:
        print(f"interlock keys add: {path}: {exc}", file=sys.stderr)
        return 1
    if not isinstance(data, CommentedMap):
        print(f"interlock keys add: {path} is not a configuration (a mapping at the top)", file=sys.stderr)
        return 1
    for section in ("tenants", "keys"):
        if data.get(section) is None:
            data[section] = CommentedMap()
    if args.key_id in data["keys"]:
        print(f"interlock keys add: {path} already has a key `{args.key_id}`", file=sys.stderr)
        return 1
    if args.tenant not in data["tenants"]:
        data["tenants"][args.tenant] = CommentedMap()
    key = new_key(args.key_id)
    entry = CommentedMap()
    entry["tenant"] = args.tenant
    entry["hash"] = DoubleQuotedScalarString(hash_key(key))
    if args.operator:
        entry["operator"] = True
    data["keys"][args.key_id] = entry
    try:
        write_atomically(path, dump(yaml, data))
    except OutputError as exc:
        print(f"interlock keys add: {exc}", file=sys.stderr)
        return 1
    print(f"key for {args.key_id} (shown once, store it now): {key}", file=sys.stderr)
    print(f"added key `{args.key_id}` (tenant `{args.tenant}`) to {path}")
    return 0
