"""YAML sources -> plain data with a position for every key and value, includes merged.

The loader composes the YAML node graph itself (rather than loading it) so that it knows the line and
column of every key and value and can report *every* duplicate key instead of stopping at the first.
Files are read through a ``Reader`` so that the same code compiles a working tree or a git revision.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from interlock.compiler.diagnostics import DiagnosticSink, Span
from interlock.compiler.secrets import redact_text
from interlock.compiler.yaml12 import (
    MERGE,
    MappingNode,
    Node,
    ScalarNode,
    SequenceNode,
    YamlSyntaxError,
    compose,
    scalar,
)

Path = tuple[str | int, ...]
Pos = tuple[int, int, int, int]
"""1-based line, col, end line, end col (exclusive)."""
Reader = Callable[[str], str | None]
"""Returns a file's text, or None when it does not exist. Paths are POSIX, as written by the loader."""

SINGLETON_SECTIONS = ("version", "server", "health", "timeouts", "preflight", "routing", "lint")
NAMED_SECTIONS = ("providers", "models", "aliases")


def read_file(path: str) -> str | None:
    """The default reader: the working tree."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    # Bytes that are not UTF-8 become U+FFFD; `parse_document` reports where.
    return data.decode("utf-8", errors="replace")


@dataclass
class SourceDoc:
    """One parsed file: its data, its text lines, and where each path stands in it."""

    file: str  # display name, as it appears in diagnostics
    path: str  # the path the reader resolves
    lines: list[str]
    data: Any = None
    value_pos: dict[Path, Pos] = field(default_factory=dict)
    key_pos: dict[Path, Pos] = field(default_factory=dict)
    """Positions as plain tuples (a large file has hundreds of thousands); ``span`` makes a Span."""
    secrets: dict[int, list[Span]] = field(default_factory=dict)
    """Where credential values stand, under each line they cover; ``excerpt`` masks them on that line."""

    def span(self, path: Path) -> Span:
        """The value at ``path``, or the closest enclosing value that exists."""
        for end in range(len(path), -1, -1):
            found = self.value_pos.get(path[:end])
            if found is not None:
                return Span(self.file, *found)
        return Span(self.file)

    def key_span(self, path: Path) -> Span:
        """The key of ``path`` (for unknown keys), else the value's span."""
        found = self.key_pos.get(path)
        return Span(self.file, *found) if found is not None else self.span(path)

    def mark_secret(self, path: Path) -> None:
        """Never show the value at ``path`` (the key stays visible)."""
        found = self.value_pos.get(path)
        if found is None:
            return
        span = Span(self.file, *found)
        last = span.end_line if span.end_col > 1 else span.end_line - 1
        for number in range(span.line, max(last, span.line) + 1):
            on_line = self.secrets.setdefault(number, [])
            if span not in on_line:
                on_line.append(span)

    def excerpt(self, number: int, col: int, end_col: int) -> tuple[str, int, int] | None:
        """Line ``number`` with secrets masked, and ``col``/``end_col`` moved to match the masked text."""
        if not 0 < number <= len(self.lines):
            return None
        text = self.lines[number - 1].rstrip().replace("\t", " ")
        cuts: list[tuple[int, int]] = []
        for secret in self.secrets.get(number, ()):
            start = secret.col - 1 if number == secret.line else 0
            end = secret.end_col - 1 if number == secret.end_line else len(text)
            cuts.append((start, max(end, start + 1)))
        masked, position = "", 0
        for start, end in sorted(cuts):
            if start < position:
                continue
            masked += text[position:start] + "***"
            position = end
        masked += text[position:]

        def moved(column: int) -> int:
            original = new = column - 1
            for start, end in cuts:
                if end <= original:
                    new += 3 - (end - start)
                elif start <= original:
                    new -= original - start  # inside a secret: point at its start
            return len(redact_text(masked[:new])) + 1

        return redact_text(masked), moved(col), moved(end_col)


@dataclass
class Entry:
    """One named definition (a provider, alias or model) or a singleton section, and where it stands."""

    name: str
    value: Any
    doc: SourceDoc
    path: Path

    @property
    def span(self) -> Span:
        return self.doc.span(self.path)

    @property
    def key_span(self) -> Span:
        return self.doc.key_span(self.path)


@dataclass
class Sources:
    """All files of one configuration, in include order, with sections merged by name."""

    main: SourceDoc | None
    docs: list[SourceDoc]
    singletons: dict[str, Entry]
    named: dict[str, dict[str, Entry]]
    aux: list[SourceDoc] = field(default_factory=list)
    """Files read on the way that are not configuration (hardware profiles)."""


def load_sources(main_path: str, sink: DiagnosticSink, reader: Reader = read_file) -> Sources:
    """Read ``main_path`` and everything it includes; merge sections, reporting duplicates."""
    docs: list[SourceDoc] = []
    _load_tree(_normalise(main_path), sink, reader, docs, stack=(), seen=set(), include_span=None)
    singletons: dict[str, Entry] = {}
    named: dict[str, dict[str, Entry]] = {section: {} for section in NAMED_SECTIONS}
    for doc in docs:
        if not isinstance(doc.data, dict):
            continue
        for section, value in doc.data.items():
            if section in NAMED_SECTIONS and isinstance(value, dict):
                for name, body in value.items():
                    _merge_named(named[section], Entry(str(name), body, doc, (section, name)), sink)
            elif section in SINGLETON_SECTIONS:
                entry = Entry(section, value, doc, (section,))
                first = singletons.get(section)
                if first is None:
                    singletons[section] = entry
                else:
                    sink.add(
                        "IL007",
                        entry.key_span,
                        f"section `{section}` is defined in more than one file; sections are not merged",
                        path=section,
                        hint=f"first defined at {first.key_span}; keep one of them",
                    )
    return Sources(docs[0] if docs else None, docs, singletons, named)


def _merge_named(into: dict[str, Entry], entry: Entry, sink: DiagnosticSink) -> None:
    first = into.get(entry.name)
    if first is None:
        into[entry.name] = entry
        return
    section = entry.path[0]
    what = {"providers": "provider", "aliases": "alias", "models": "model facts for"}.get(
        str(section), section
    )
    sink.add(
        "IL007",
        entry.key_span,
        f"{what} `{entry.name}` is defined twice; a later file may not override an earlier one",
        path=f"{section}.{entry.name}",
        value=entry.name,
        hint=f"first defined at {first.key_span}; rename one or delete one",
    )


def _normalise(path: str) -> str:
    return PurePosixPath(os.path.normpath(path)).as_posix()


def display_name(path: str) -> str:
    """Paths under the working directory are shown relative to it, others as given."""
    if not os.path.isabs(path):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _load_tree(
    path: str,
    sink: DiagnosticSink,
    reader: Reader,
    docs: list[SourceDoc],
    stack: tuple[str, ...],
    seen: set[str],
    include_span: Span | None,
    include_path: str = "",
) -> None:
    if path in stack:
        cycle = " -> ".join((*stack[stack.index(path) :], path))
        assert include_span is not None
        sink.add(
            "IL006",
            include_span,
            f"include cycle: {cycle}",
            path=include_path,
            value=path,
            hint="remove one of these includes; a file included from two places is read once anyway",
        )
        return
    if path in seen:
        return  # included twice (diamond): load once, its definitions count once
    text = reader(path)
    if text is None:
        span = include_span or Span(display_name(path))
        what = "included file" if include_span else "configuration file"
        sink.add(
            "IL005",
            span,
            f"{what} `{path}` does not exist",
            path=include_path,
            value=path,
            hint="an include is relative to the file that names it" if include_span else None,
        )
        return
    seen.add(path)
    doc = parse_document(path, text, sink)
    docs.append(doc)
    includes = doc.data.get("include") if isinstance(doc.data, dict) else None
    if not isinstance(includes, list):
        return  # a non-list include is reported by the shape pass
    base = PurePosixPath(path).parent
    for index, item in enumerate(includes):
        if not isinstance(item, str):
            continue
        target = _normalise((base / item).as_posix())
        span = doc.span(("include", index))
        _load_tree(target, sink, reader, docs, (*stack, path), seen, span, f"include[{index}]")


def parse_document(path: str, text: str, sink: DiagnosticSink) -> SourceDoc:
    """Compose one YAML document and convert it to plain data with positions."""
    doc = SourceDoc(display_name(path), path, text.splitlines())
    if "\ufffd" in text:
        line = next(n for n, row in enumerate(doc.lines, start=1) if "\ufffd" in row)
        col = doc.lines[line - 1].index("\ufffd") + 1
        sink.add(
            "IL001",
            Span(doc.file, line, col),
            "the file is not valid UTF-8 text",
            hint="save the file as UTF-8",
        )
        return doc
    try:
        node = compose(text)
    except YamlSyntaxError as exc:
        span = Span(doc.file, exc.line, exc.col) if exc.line else Span(doc.file)
        at = doc.lines[exc.line - 1][exc.col - 1 : exc.col] if 0 < exc.line <= len(doc.lines) else ""
        hint = "indent with spaces, not tabs" if at == "\t" else _yaml_hint(exc.problem)
        sink.add("IL001", span, f"YAML syntax error: {exc.problem}", hint=hint)
        return doc
    if node is None:
        doc.data = {}
        return doc
    try:
        budget = max(MIN_VALUES, VALUES_PER_CHAR * len(text))
        doc.data = _Converter(doc, sink, budget).convert(node, ())
    except _Unconvertible as exc:
        sink.add("IL001", exc.span, f"YAML syntax error: {exc.problem}", hint=exc.hint)
        doc.data = None
    return doc


def _yaml_hint(problem: str) -> str | None:
    if "tab" in problem:
        return "indent with spaces, not tabs"
    if "mapping values are not allowed" in problem:
        return "quote values that contain `: `, or fix the indentation of this line"
    if "another document" in problem or "expected a single document" in problem:
        return "a configuration file holds one document: remove the extra `---`"
    if "found undefined alias" in problem:
        return "define the anchor (`&name`) before using it (`*name`)"
    return None


MAX_DEPTH = 100
"""Deeper nesting than any configuration needs; the converter (and the passes after it) recurse."""
MIN_VALUES, VALUES_PER_CHAR = 100_000, 10
"""Without aliases a file holds fewer values than characters; aliases of aliases can multiply them
without bound (363 bytes made a million), so conversion stops past this many."""


class _Unconvertible(Exception):
    """Well-formed YAML that cannot become plain data: a self-containing alias, or absurd nesting."""

    def __init__(self, span: Span, problem: str, hint: str) -> None:
        super().__init__(problem)
        self.span, self.problem, self.hint = span, problem, hint


@dataclass
class _Converter:
    doc: SourceDoc
    sink: DiagnosticSink
    budget: int
    """Values left to convert."""
    active: set[int] = field(default_factory=set)

    def _span(self, node: Node) -> Span:
        return Span(self.doc.file, *_pos(node))

    def convert(self, node: Node, path: Path) -> Any:
        start, end = node.start_mark, node.end_mark
        self.doc.value_pos[path] = (start.line + 1, start.column + 1, end.line + 1, end.column + 1)
        self.budget -= 1
        if self.budget < 0:
            raise _Unconvertible(
                self._span(node),
                "aliases expand to too many values",
                "an alias (`*name`) copies its anchor's whole value; do not nest them in each other",
            )
        if isinstance(node, ScalarNode):
            return scalar(node)
        if id(node) in self.active:
            raise _Unconvertible(
                self._span(node),
                "an alias refers to the node that contains it",
                "anchors (`&name`) may be reused (`*name`) only outside their own value",
            )
        if len(path) >= MAX_DEPTH:
            raise _Unconvertible(
                self._span(node),
                f"values are nested more than {MAX_DEPTH} levels deep",
                "a configuration nests a few levels; look for a run of unclosed `[` or `{`",
            )
        self.active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self._mapping(node, path)
            if isinstance(node, SequenceNode):
                return [self.convert(item, (*path, index)) for index, item in enumerate(node.value)]
            return None
        finally:
            self.active.discard(id(node))

    def _mapping(self, node: MappingNode, path: Path) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == MERGE:
                merges.extend(value_node.value if isinstance(value_node, SequenceNode) else [value_node])
                continue
            key = _key(key_node)
            if key in result:
                first = Span(self.doc.file, *self.doc.key_pos[(*path, key)])
                self.sink.add(
                    "IL002",
                    self._span(key_node),
                    f"duplicate key `{key}` in `{dotted(path) or 'the file'}`",
                    path=dotted((*path, key)),
                    value=str(key),
                    hint=f"first defined at {first}; YAML would keep only one of them",
                )
                continue
            self.doc.key_pos[(*path, key)] = _pos(key_node)
            result[key] = self.convert(value_node, (*path, key))
        for source in merges:  # `<<: *anchor`: keys written here win over merged ones
            if not isinstance(source, MappingNode):
                continue
            for key_node, value_node in source.value:
                key = _key(key_node)
                if key not in result:
                    self.doc.key_pos[(*path, key)] = _pos(key_node)
                    result[key] = self.convert(value_node, (*path, key))
        return result


def _pos(node: Node) -> Pos:
    start, end = node.start_mark, node.end_mark
    return (start.line + 1, start.column + 1, end.line + 1, end.column + 1)


def _key(node: Node) -> str | int:
    """Mapping keys are names: text, or whole numbers (which the schema then rejects by name)."""
    if not isinstance(node, ScalarNode):
        return "<complex key>"
    value = scalar(node)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return value if isinstance(value, str) else str(node.value)


def dotted(path: Path) -> str:
    """The key path as messages show it: ``("aliases", "a", "chain", 2)`` -> ``aliases.a.chain[2]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
