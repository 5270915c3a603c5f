"""Find `<provider>/<model>` tokens in file contents, for the providers a configuration declares.

A token starts at a declared provider name that no name-, path- or URL-character precedes (so
`https://host/ollama/x`, `src/ollama/x`, `@google/genai` and `my-groq/x` do not count), continues with
model characters `[A-Za-z0-9_.:/-]` and ends at its last letter or digit. A token whose last segment
has a common file extension (`google/protobuf/any.proto`) names a file, not a model. A line holding
``interlock: allow-model`` is skipped. Matching runs on bytes, and a file that holds no `<provider>/`
at all is passed over with a substring search before any regular expression runs.
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

_BEFORE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-/@:\\") | frozenset(
    range(0x80, 0x100)
)
"""A token may not follow one of these bytes (a name, a path, a URL, a scoped package, non-ASCII text)."""

_MODEL = rb"[A-Za-z0-9][A-Za-z0-9_.:/\-]*"  # `_` too: Ollama tags such as `7b-instruct-q4_K_M`


@dataclass(frozen=True, slots=True)
class Hit:
    """One hard-coded model: 1-based line and column (in characters) and the token."""

    line: int
    col: int
    token: str


@dataclass(frozen=True)
class Matcher:
    """Finds the tokens of a fixed set of providers; built once per scan."""

    needles: tuple[bytes, ...]  # `ollama/`, ...: a file holding none of them is skipped without the regex
    pattern: re.Pattern[bytes]

    def find(self, data: bytes) -> Iterator[Hit]:
        """Every token in ``data``, in order."""
        if not any(needle in data for needle in self.needles):
            return
        line, line_start = 1, 0
        for match in self.pattern.finditer(data):
            start = match.start()
            if start and data[start - 1] in _BEFORE:
                continue
            token = match.group().rstrip(b"._:/-")
            if _FILE_NAME.search(token):
                continue
            line += data.count(b"\n", line_start, start)
            line_start = data.rfind(b"\n", 0, start) + 1
            line_end = data.find(b"\n", start)
            if PRAGMA in data[line_start : len(data) if line_end < 0 else line_end]:
                continue
            col = len(data[line_start:start].decode("utf-8", "replace")) + 1
            yield Hit(line, col, token.decode("utf-8", "replace"))


def matcher_for(providers: Iterable[str]) -> Matcher | None:
    """The matcher for ``providers``; None when there are none."""
    names = sorted({p for p in providers if p}, key=lambda p: (-len(p), p))
    if not names:
        return None
    needles = tuple(name.encode("utf-8") + b"/" for name in names)
    alternatives = b"|".join(re.escape(needle) for needle in needles)
    return Matcher(needles, re.compile(rb"(?:" + alternatives + rb")" + _MODEL))
