"""Diagnostics: every problem the compiler finds, collected and reported at once.

A diagnostic has a stable code (documented in ``codes.py`` and the README), a severity, a source span,
the key path, the offending value (never a credential) and a hint. Passes append to a
``DiagnosticSink``; nothing raises mid-compile except ``CompileError`` at the very end.

Exception tree::

    CompileError          one or more error-severity diagnostics; ``.diagnostics`` holds all of them
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from interlock.compiler.codes import CODES, Severity
from interlock.compiler.secrets import redact_text


@dataclass(frozen=True, slots=True)
class Span:
    """A place in a source file; line and col are 1-based. ``line == 0`` means the whole file.

    ``end_line``/``end_col`` (exclusive, 1-based) mark where the node ends; 0 when unknown.
    """

    file: str
    line: int = 0
    col: int = 0
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    span: Span
    message: str
    path: str = ""
    value: str | None = None
    hint: str | None = None

    @property
    def name(self) -> str:
        return CODES[self.code].name

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.span.file, self.span.line, self.span.col, self.code, self.message)


@dataclass
class DiagnosticSink:
    """Collects diagnostics (passes call ``add``); the same diagnostic added twice is kept once."""

    items: list[Diagnostic] = field(default_factory=list)
    _seen: set[Diagnostic] = field(default_factory=set, repr=False)

    def add(
        self,
        code: str,
        span: Span,
        message: str,
        *,
        path: str = "",
        value: object = None,
        hint: str | None = None,
    ) -> None:
        info = CODES[code]  # KeyError here means an undocumented code: a bug, fail loudly.
        # Passes never put a credential into these; the redaction is a second line of defence. The key
        # path too: a key-shaped string used as a mapping key is part of it.
        shown = None if value is None else _show(visible(value if isinstance(value, str) else repr(value)))
        diagnostic = Diagnostic(
            code,
            info.severity,
            span,
            visible(message),
            visible(path),
            shown,
            None if hint is None else visible(hint),
        )
        if diagnostic not in self._seen:  # e.g. one profile file checked for each worker that uses it
            self._seen.add(diagnostic)
            self.items.append(diagnostic)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.WARNING]

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.items, key=Diagnostic.sort_key)


class CompileError(Exception):
    """The sources have errors; ``diagnostics`` holds every diagnostic found (warnings too)."""

    def __init__(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        count = sum(1 for d in self.diagnostics if d.severity is Severity.ERROR)
        super().__init__(f"{count} error(s) in the configuration")


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """``"did you mean `groq`?"`` for the closest choice, or None."""
    match = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return f"did you mean `{match[0]}`?" if match else None


CONTROL_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""C0 and C1 controls (CR, LF, tab, NUL...), DEL and Unicode line breaks: never shown raw, never in a name."""


def visible(text: str) -> str:
    """``text`` as a person may be shown it: credentials masked, control characters escaped (a CR in a
    name must not rewrite a terminal line or split an annotation)."""
    return CONTROL_CHARS.sub(_escape, redact_text(text))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _show(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."
