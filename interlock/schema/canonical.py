"""Canonical JSON for plans: sorted keys, two-space indent, trailing newline, a content hash.

Shared by the compiler (writing) and the runtime (verifying) so both agree on the bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import orjson


def canonical_json(data: Any) -> str:
    """The on-disk form: stable for identical content, readable in a diff."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def content_hash(data: dict[str, Any]) -> str:
    """``sha256:<hex>`` over the compact canonical form of everything but ``content_hash`` itself."""
    body = {key: value for key, value in data.items() if key != "content_hash"}
    compact = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(compact.encode("utf-8")).hexdigest()


def has_content_hash(data: Mapping[str, Any], expected: object) -> bool:
    """Whether ``expected`` is ``content_hash(data)``, in about a sixth of the time on a big plan.

    orjson writes the same compact, key-sorted bytes as ``json.dumps`` for strings, integers, booleans,
    nulls, lists and objects; it writes floats with an exponent differently (``1e16`` for ``1e+16``) and
    refuses what it cannot hold (a huge integer). So its bytes' hash is tried first, and the definition
    decides whenever that does not match. (A hash made from orjson's bytes where they differ would pass
    too; the compiler never writes one.)
    """
    body = {key: value for key, value in data.items() if key != "content_hash"}
    try:
        compact = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson refuses it (a huge integer, a non-string key): the definition decides
        compact = b""
    if compact and "sha256:" + hashlib.sha256(compact).hexdigest() == expected:
        return True
    return content_hash(dict(data)) == expected
