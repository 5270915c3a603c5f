"""YAML sources -> plain data with a position for every key and value, includes merged.

The loader composes the YAML node graph itself (rather than loading it) so that it knows the line and
column of every key and value and can report *every* duplicate key instead of stopping at the first.
Files are read through a ``Reader`` so that the same code compiles a working tree or a git revision.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from interlock.compiler.diagnostics import DiagnosticSink, Span
from interlock.compiler.reading import SourceUnreadable, read_file, within
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
"""Returns a file's text, or None when it does not exist; raises ``SourceUnreadable`` for a path that
exists but is not a readable regular file within the size cap. Paths are POSIX, as written by the loader."""

SINGLETON_SECTIONS = (
    "version",
    "server",
    "health",
    "timeouts",
    "preflight",
    "routing",
    "lint",
    "pricing",
)
NAMED_SECTIONS = ("providers", "models", "aliases", "tenants", "keys")


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
        """Line ``number`` with secrets masked, and ``col``/``end_col`` moved to match the masked text.

        A line longer than ``EXCERPT_WIDTH`` is cut to a window around ``col``, marked with `…` at a cut.
        """
        if not 0 < number <= len(self.lines):
            return None
        line = self.lines[number - 1]
        start, stop = (0, len(line)) if len(line) <= EXCERPT_WIDTH else _window(line, col - 1, end_col - 1)
        text = line[start:stop].rstrip().replace("\t", " ")
        cuts: list[tuple[int, int]] = []
        for secret in self.secrets.get(number, ()):
            first = (secret.col - 1 if number == secret.line else 0) - start
            last = (secret.end_col - 1 if number == secret.end_line else len(line)) - start
            if last > 0 and first < len(text):
                first = max(first, 0)
                cuts.append((first, max(min(last, len(text)), first + 1)))
        masked, position = "", 0
        for first, last in sorted(cuts):
            if first < position:
                continue
            masked += text[position:first] + "***"
            position = last
        masked += text[position:]
        lead = "…" if start > 0 else ""
        tail = "…" if stop < len(line) else ""

        def moved(column: int) -> int:
            original = new = min(max(column - 1 - start, 0), len(text))
            for first, last in cuts:
                if last <= original:
                    new += 3 - (last - first)
                elif first <= original:
                    new -= original - first  # inside a secret: point at its start
            return len(lead) + len(redact_text(masked[:new])) + 1

        return lead + redact_text(masked) + tail, moved(col), moved(end_col)


EXCERPT_WIDTH = 200
"""Longest source line shown whole; a longer one (a minified file) is cut around the column."""


def _window(line: str, col: int, end: int) -> tuple[int, int]:
    """Where to cut ``line`` (0-based, stop exclusive) to show ``col``..``end`` with some context,
    moved to word boundaries where there are any, so masking sees whole tokens."""
    start = max(0, col - EXCERPT_WIDTH // 4)
    stop = min(len(line), start + EXCERPT_WIDTH)
    if start > 0 and not line[start - 1].isspace():
        space = line.find(" ", start, col)
        start = space + 1 if space >= 0 else start
    if stop < len(line) and not line[stop].isspace():
        space = line.rfind(" ", max(col, end) + 1, stop)
        stop = space if space >= 0 else stop
    return start, stop


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
    roots: tuple[str, ...] = ()
    """The folders (real paths) files may be read from: the main file's, then any `--include-root`."""


MAX_INCLUDE_DEPTH = 32
"""Includes nest a level or two; past this the chain is a mistake or an attack (and the loader recurses)."""


@dataclass(frozen=True)
class LoadLimits:
    """What the loader may read besides the main file, and how much of it."""

    include_roots: tuple[str, ...] = ()
    """Folders includes and profiles may come from, besides the main file's folder (and below)."""
    max_values: int = 0
    """Values (scalars, lists, mappings, aliases expanded) in all files together; 0: ``MAX_VALUES``."""


@dataclass
class _Walk:
    """The state of one load: where includes may lead, what was read, what is left of the budget."""

    sink: DiagnosticSink
    reader: Reader
    roots: tuple[str, ...]
    budget: ValueBudget
    docs: list[SourceDoc] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    """Real paths (symlinks resolved) of the files read: a file named two ways is read once."""
    names: dict[str, str] = field(default_factory=dict)
    """Real path -> the path as first written, for messages."""


def load_sources(
    main_path: str, sink: DiagnosticSink, reader: Reader = read_file, limits: LoadLimits | None = None
) -> Sources:
    """Read ``main_path`` and everything it includes; merge sections, reporting duplicates."""
    limits = limits or LoadLimits()
    main = _normalise(main_path)
    roots = tuple(
        os.path.realpath(folder) for folder in (os.path.dirname(main) or ".", *limits.include_roots)
    )
    walk = _Walk(sink, reader, roots, ValueBudget(limits.max_values or MAX_VALUES))
    _load_tree(walk, main, stack=(), include_span=None)
    docs = walk.docs
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
    return Sources(docs[0] if docs else None, docs, singletons, named, roots=roots)


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
    walk: _Walk, path: str, stack: tuple[str, ...], include_span: Span | None, include_path: str = ""
) -> None:
    sink = walk.sink
    identity = os.path.realpath(path)
    if identity in stack:
        cycle = " -> ".join((*(walk.names[i] for i in stack[stack.index(identity) :]), path))
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
    if identity in walk.seen:
        return  # included twice (diamond, or two spellings of one file): load once, count once
    if include_span is not None and not _include_allowed(walk, path, stack, include_span, include_path):
        return
    what = "included file" if include_span else "configuration file"
    span = include_span or Span(display_name(path))
    try:
        text = walk.reader(path)
    except SourceUnreadable as exc:
        sink.add(
            "IL011", span, f"{what} `{path}` {exc.problem}", path=include_path, value=path, hint=exc.hint
        )
        return
    if text is None:
        sink.add(
            "IL005",
            span,
            f"{what} `{path}` does not exist",
            path=include_path,
            value=path,
            hint="an include is relative to the file that names it" if include_span else None,
        )
        return
    walk.seen.add(identity)
    walk.names[identity] = path
    doc = parse_document(path, text, sink, walk.budget)
    walk.docs.append(doc)
    includes = doc.data.get("include") if isinstance(doc.data, dict) else None
    if not isinstance(includes, list):
        return  # a non-list include is reported by the shape pass
    base = PurePosixPath(path).parent
    for index, item in enumerate(includes):
        if not isinstance(item, str):
            continue
        target = _normalise((base / item).as_posix())
        span = doc.span(("include", index))
        _load_tree(walk, target, (*stack, identity), span, f"include[{index}]")


def _include_allowed(walk: _Walk, path: str, stack: tuple[str, ...], span: Span, where: str) -> bool:
    """An include stays inside the allowed folders and nests at most ``MAX_INCLUDE_DEPTH`` deep."""
    if len(stack) > MAX_INCLUDE_DEPTH:
        walk.sink.add(
            "IL012",
            span,
            f"includes nest more than {MAX_INCLUDE_DEPTH} levels deep; `{path}` is not read",
            path=where,
            value=path,
            hint="include the files from the main file (or one level below) instead of in a chain",
        )
        return False
    if within(path, walk.roots):
        return True
    walk.sink.add(
        "IL010",
        span,
        f"included file `{path}` is outside the configuration's folder `{display_name(walk.roots[0])}`",
        path=where,
        value=path,
        hint="keep includes inside the main file's folder tree (symbolic links resolved), "
        "or allow another folder with `--include-root DIR`",
    )
    return False


def parse_document(
    path: str, text: str, sink: DiagnosticSink, budget: ValueBudget | None = None
) -> SourceDoc:
    """Compose one YAML document and convert it to plain data with positions.

    ``budget`` counts values across the files of one load (a fresh ``MAX_VALUES`` when not given).
    """
    doc = SourceDoc(display_name(path), path, split_lines(text))
    bad = _UNPRINTABLE.search(text)
    if bad is not None:
        _report_unprintable(doc, bad.group(), sink)
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
        doc.data = _Converter(doc, sink, budget or ValueBudget(MAX_VALUES)).convert(node, ())
    except _Unconvertible as exc:
        sink.add("IL001", exc.span, f"YAML syntax error: {exc.problem}", hint=exc.hint)
        doc.data = None
    return doc


_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
"""The line breaks of YAML 1.1 (libyaml's): ``str.splitlines`` also breaks at form feeds and other
control characters, which would put every position after one on the wrong line."""
_UNPRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters a YAML stream may not hold: C0/C1 controls but tab and breaks, DEL, surrogates (which
stand for bytes that are not UTF-8: ``FileReader`` decodes with ``surrogateescape``), U+FFFE/U+FFFF."""


def split_lines(text: str) -> list[str]:
    """``text`` cut at the line breaks YAML positions count (no empty last line after a final break)."""
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _report_unprintable(doc: SourceDoc, char: str, sink: DiagnosticSink) -> None:
    """IL001 at the first character a YAML file may not hold; its line is shown with it replaced."""
    number = next(n for n, row in enumerate(doc.lines, start=1) if _UNPRINTABLE.search(row))
    row = doc.lines[number - 1]
    found = _UNPRINTABLE.search(row)
    assert found is not None
    col = found.start() + 1
    doc.lines = [_UNPRINTABLE.sub("\ufffd", line) for line in doc.lines]  # printable in any excerpt
    if "\udc80" <= char <= "\udcff":
        sink.add(
            "IL001",
            Span(doc.file, number, col),
            "the file is not valid UTF-8 text",
            hint="save the file as UTF-8",
        )
        return
    name = _CONTROL_NAMES.get(char, "a control character")
    sink.add(
        "IL001",
        Span(doc.file, number, col),
        f"the file holds {name} (U+{ord(char):04X}), which YAML does not allow",
        hint="delete it: YAML text may hold tabs and line breaks, but no other control characters",
    )


_CONTROL_NAMES = {"\x00": "a NUL character", "\x0c": "a form feed", "\x1b": "an escape character"}


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
MAX_VALUES = 500_000
"""Aliases of aliases multiply values without bound (363 bytes made a million), so conversion stops past
this many values in all files of one load together, whatever their size. A configuration of 10,000
aliases holds about 65,000 (bench/compile_bench.py)."""


@dataclass
class ValueBudget:
    """Values left to convert, shared by every file of one load."""

    limit: int
    left: int = -1

    def __post_init__(self) -> None:
        if self.left < 0:
            self.left = self.limit


class _Unconvertible(Exception):
    """Well-formed YAML that cannot become plain data: a self-containing alias, or absurd nesting."""

    def __init__(self, span: Span, problem: str, hint: str) -> None:
        super().__init__(problem)
        self.span, self.problem, self.hint = span, problem, hint


@dataclass
class _Converter:
    doc: SourceDoc
    sink: DiagnosticSink
    budget: ValueBudget
    active: set[int] = field(default_factory=set)

    def _span(self, node: Node) -> Span:
        return Span(self.doc.file, *_pos(node))

    def convert(self, node: Node, path: Path) -> Any:
        start, end = node.start_mark, node.end_mark
        self.doc.value_pos[path] = (start.line + 1, start.column + 1, end.line + 1, end.column + 1)
        self.budget.left -= 1
        if self.budget.left < 0:
            raise _Unconvertible(
                self._span(node),
                f"the configuration holds more than {self.budget.limit:,} values (aliases expanded)",
                "an alias (`*name`) copies its anchor's whole value; do not nest them in each other",
            )
        if isinstance(node, ScalarNode):
            return _scalar(self.doc, node)
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
            key = _key(self.doc, key_node)
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
                key = _key(self.doc, key_node)
                if key not in result:
                    self.doc.key_pos[(*path, key)] = _pos(key_node)
                    result[key] = self.convert(value_node, (*path, key))
        return result


def _pos(node: Node) -> Pos:
    start, end = node.start_mark, node.end_mark
    return (start.line + 1, start.column + 1, end.line + 1, end.column + 1)


def _scalar(doc: SourceDoc, node: ScalarNode) -> Any:
    try:
        return scalar(node)
    except ValueError as exc:  # an integer past Python's digit limit
        raise _Unconvertible(
            Span(doc.file, *_pos(node)), str(exc), "write a number a configuration can use"
        ) from exc


def _key(doc: SourceDoc, node: Node) -> str | int:
    """Mapping keys are names: text, or whole numbers (which the schema then rejects by name)."""
    if not isinstance(node, ScalarNode):
        return "<complex key>"
    value = _scalar(doc, node)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return value if isinstance(value, str) else str(node.value)


def dotted(path: Path) -> str:
    """The key path as messages show it: ``("aliases", "a", "chain", 2)`` -> ``aliases.a.chain[2]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
