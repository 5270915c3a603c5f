"""Canonical JSON for plans: sorted keys, two-space indent, trailing newline, a content hash.

Shared by the compiler (writing) and the runtime (verifying) so both agree on the bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(data: Any) -> str:
    """The on-disk form: stable for identical content, readable in a diff."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def content_hash(data: dict[str, Any]) -> str:
    """``sha256:<hex>`` over the compact canonical form of everything but ``content_hash`` itself."""
    body = {key: value for key, value in data.items() if key != "content_hash"}
    compact = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(compact.encode("utf-8")).hexdigest()
