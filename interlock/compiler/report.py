"""Diagnostics -> text (with the source line and a caret), JSON, or GitHub workflow annotations."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from interlock.compiler.codes import Severity
from interlock.compiler.diagnostics import Diagnostic
from interlock.compiler.loader import SourceDoc, Sources

FORMATS = ("text", "json", "github")


def render(diagnostics: Sequence[Diagnostic], fmt: str, sources: Sources | None) -> str:
    """All diagnostics in ``fmt``, sorted by place; empty string when there are none (text/github)."""
    ordered = sorted(diagnostics, key=Diagnostic.sort_key)
    renderer: Callable[[Sequence[Diagnostic], Sources | None], str] = {
        "text": _text,
        "json": _json,
        "github": _github,
    }[fmt]
    return renderer(ordered, sources)


def summary(diagnostics: Sequence[Diagnostic]) -> str:
    errors = sum(1 for d in diagnostics if d.severity is Severity.ERROR)
    warnings = len(diagnostics) - errors
    return f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"


def _text(diagnostics: Sequence[Diagnostic], sources: Sources | None) -> str:
    if not diagnostics:
        return ""
    # one index per report (the first document of a name wins), not a search per diagnostic
    docs = {doc.file: doc for doc in reversed((*sources.docs, *sources.aux))} if sources else {}
    blocks = [_text_block(d, docs) for d in diagnostics]
    return "\n".join(blocks) + f"\n{summary(diagnostics)}\n"


def _text_block(d: Diagnostic, docs: Mapping[str, SourceDoc]) -> str:
    """Header, the source line with the value underlined and labelled with its key path, the hint."""
    lines = [f"{d.span}: {d.severity.value} {d.code} {d.name}: {d.message}"]
    excerpt = _excerpt(docs, d)
    if excerpt is not None:
        text, col, end_col = excerpt
        gutter = str(d.span.line)
        width = max(end_col - col, 1) if d.span.end_line == d.span.line else 1
        label = f" {d.path}" if d.path else ""
        lines.append(f"  {gutter} | {text}")
        lines.append(f"  {' ' * len(gutter)} | {' ' * (max(col, 1) - 1)}{'^' * width}{label}")
    elif d.path:
        lines.append(f"  at: {d.path}")
    if d.hint:
        lines.append(f"  hint: {d.hint}")
    return "\n".join(lines)


def _excerpt(docs: Mapping[str, SourceDoc], d: Diagnostic) -> tuple[str, int, int] | None:
    if d.span.line <= 0:
        return None
    doc = docs.get(d.span.file)
    if doc is None:
        return None
    return doc.excerpt(d.span.line, d.span.col, d.span.end_col or d.span.col + 1)


def _json(diagnostics: Sequence[Diagnostic], sources: Sources | None) -> str:
    rows = [
        {
            "code": d.code,
            "name": d.name,
            "severity": d.severity.value,
            "file": d.span.file,
            "line": d.span.line,
            "col": d.span.col,
            "end_line": d.span.end_line,
            "end_col": d.span.end_col,
            "path": d.path,
            "message": d.message,
            "value": d.value,
            "hint": d.hint,
        }
        for d in diagnostics
    ]
    return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"


def _github(diagnostics: Sequence[Diagnostic], sources: Sources | None) -> str:
    out = []
    for d in diagnostics:
        level = "error" if d.severity is Severity.ERROR else "warning"
        message = d.message + (f" [{d.path}]" if d.path else "") + (f" (hint: {d.hint})" if d.hint else "")
        place = f"file={_escape_property(d.span.file)}"
        if d.span.line > 0:
            place += f",line={d.span.line},col={max(d.span.col, 1)}"
            if d.span.end_line == d.span.line and d.span.end_col > d.span.col:
                place += f",endColumn={d.span.end_col}"
        title = _escape_property(f"{d.code} {d.name}")
        out.append(f"::{level} {place},title={title}::{_escape_data(message)}")
    return "".join(line + "\n" for line in out)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")
