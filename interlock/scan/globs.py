"""`scan_allow` globs -> one compiled matcher over paths relative to the config's folder.

Syntax as in `.gitignore`: `*` and `?` stay within one path segment, `**` spans segments, a pattern
without `/` matches a name at any depth, a trailing `/` or `/**` also matches the folder itself (so the
walker can skip the whole folder).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


def translate(glob: str) -> str:
    """One glob -> a regular expression that must match a whole POSIX path."""
    pattern = glob.strip()
    pattern = pattern.removeprefix("./")
    anchored = pattern.startswith("/")
    pattern = pattern.strip("/") if pattern.endswith("/") else pattern.lstrip("/")
    if glob.rstrip().endswith("/"):
        pattern += "/**"
    out = "" if anchored or "/" in pattern else "(?:.*/)?"
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out += "(?:/.*)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif char == "*":
            out += "[^/]*"
            i += 1
        elif char == "?":
            out += "[^/]"
            i += 1
        elif char == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out += "[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]"
            i = end + 1
        else:
            out += re.escape(char)
            i += 1
    return out


@dataclass(frozen=True)
class AllowList:
    """Paths where hard-coded models may stand."""

    globs: tuple[str, ...]
    regex: re.Pattern[str] | None

    @classmethod
    def of(cls, globs: Iterable[str]) -> AllowList:
        kept = tuple(g for g in globs if g.strip())
        if not kept:
            return cls((), None)
        return cls(kept, re.compile("|".join(f"(?:{translate(g)})" for g in kept)))

    def allows(self, relative: str) -> bool:
        """Whether the POSIX path ``relative`` (to the config's folder) is allowed."""
        return self.regex is not None and self.regex.fullmatch(relative) is not None
