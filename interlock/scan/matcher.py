"""Find `<provider>/<model>` tokens in file contents, for the providers a configuration declares.

A token starts at a declared provider name that no name-, path- or URL-character precedes (so
`https://host/ollama/x`, `src/ollama/x`, `@google/genai` and `my-groq/x` do not count), continues with
model characters `[A-Za-z0-9_.:/-]` and ends at its last letter or digit. A token whose last segment
has a common file extension (`google/protobuf/any.proto`) names a file, not a model. A line holding
``interlock: allow-model`` is skipped. Matching runs on bytes: files need no decoding unless they hit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

PRAGMA = b"interlock: allow-model"

_FILE_NAME = re.compile(
    rb"[^/]\.(?:c|cc|cfg|cjs|cpp|cs|css|csv|go|h|hpp|html|ini|java|jpe?g|js|json|jsx|kt|lock|md|mjs|mts|"
    rb"php|png|proto|py|rb|rs|scss|sh|sql|svg|toml|ts|tsx|txt|vue|xml|ya?ml)$",
    re.IGNORECASE,
)
"""A token ending like this names a file (`google/protobuf/any.proto`), not a model."""

_BEFORE = rb"A-Za-z0-9_.\-/@:\\\x80-\xff"  # a token may not follow one of these bytes
_MODEL = rb"[A-Za-z0-9][A-Za-z0-9_.:/\-]*"  # `_` too: Ollama tags such as `7b-instruct-q4_K_M`


@dataclass(frozen=True, slots=True)
class Hit:
    """One hard-coded model: 1-based line and column (in characters) and the token."""

    line: int
    col: int
    token: str


def compile_pattern(providers: Iterable[str]) -> re.Pattern[bytes] | None:
    """The token pattern for ``providers``; None when there are none."""
    names = sorted({p for p in providers if p}, key=lambda p: (-len(p), p))
    if not names:
        return None
    alternatives = b"|".join(re.escape(name.encode("utf-8")) for name in names)
    return re.compile(rb"(?<![" + _BEFORE + rb"])(?:" + alternatives + rb")/" + _MODEL)


def find(pattern: re.Pattern[bytes], data: bytes) -> Iterator[Hit]:
    """Every token in ``data``, in order."""
    line, line_start = 1, 0
    for match in pattern.finditer(data):
        token = match.group().rstrip(b"._:/-")
        if _FILE_NAME.search(token):
            continue
        start = match.start()
        line += data.count(b"\n", line_start, start)
        line_start = data.rfind(b"\n", 0, start) + 1
        line_end = data.find(b"\n", start)
        if PRAGMA in data[line_start : len(data) if line_end < 0 else line_end]:
            continue
        col = len(data[line_start:start].decode("utf-8", "replace")) + 1
        yield Hit(line, col, token.decode("utf-8", "replace"))
