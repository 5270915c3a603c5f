"""The runtime's rooms stand in layers: no two rooms import each other around a loop.

A room is a sub-package of ``interlock/runtime/`` (``base``, ``wire``, ``request``...; a module loose at
its root would be a room of its own, and ``test_rooms.py`` allows none). Room A is above room B when a
file of A imports a file of B (type-only imports included, as ``import_cycles.py`` counts them: a
type-only import still ties two rooms together in the reader's head). Files may be free of circles while
their rooms are not: ``wire/anthropic.py`` importing ``upstream/base.py`` while ``upstream/anthropic.py``
imports ``wire/anthropic.py`` is no circle of files, but ``wire`` and ``upstream`` then sit both above
and below each other, and neither can be read first.

An import back up is one (file, imported file) pair that goes from a lower room to a higher one, with
the rooms in the order that has the fewest of them. 0 means the rooms have an order, lowest first, in
which each imports only what stands below it.

The arrows allowed between rooms are written down (``WRITTEN``) and printed, with each room's floor,
into docs/architecture.md: the test fails when the code has an arrow the table lacks, when the table
has one the code lost (so the table only shrinks), or when the page and the table differ. A new arrow
is a decision someone writes here, and a reader sees the floors grow in the diff.

    python tests/runtime/test_layers.py            # the order, lowest first, and every import back up
    python tests/runtime/test_layers.py --table    # the arrows and floors as the code has them, to paste
"""

from __future__ import annotations

import ast
import re
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "interlock" / "runtime"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PREFIX = "interlock.runtime."

# The imports back up that remain, as (importing file, imported file): the test fails when one is added
# (and when one goes, so that this list only shrinks). Empty: the rooms stand in layers.
REMAINING: set[tuple[str, str]] = set()

# The arrows between rooms: each room, then the rooms it may import (a line that starts with spaces goes on
# the line above): all the arrows there are, none more. The layer table of docs/architecture.md.
WRITTEN = """
app: base books features fleet guards loaded net ops request state surfaces upstream usage wire
base:
books: base loaded state upstream wire
features: base books fleet guards loaded request state surfaces upstream usage
fleet: base books loaded state telemetry upstream wire
guards: base books fleet loaded state wire
loaded: base net wire
net: base wire
ops: base books fleet loaded request state surfaces usage wire
request: base books fleet guards loaded state surfaces upstream usage wire
state: base loaded
surfaces: base books loaded wire
telemetry: base loaded net
upstream: base net wire
usage: base books loaded state
wire: base
"""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(RUNTIME.parent.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(module: str) -> str:
    return module.removeprefix(PREFIX).split(".", 1)[0]


def file_imports() -> set[tuple[str, str]]:
    """Every (module, imported module) pair inside the runtime, type-only imports included."""
    paths = {module_name(p): p for p in sorted(RUNTIME.rglob("*.py"))}

    def target(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name if name.startswith(PREFIX) else None

    pairs = set()
    for mod, path in paths.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names]
            for name in names:
                t = target(name)
                if t and t != mod:
                    pairs.add((mod, t))
    return pairs


def parse(written: str) -> dict[str, frozenset[str]]:
    rooms: dict[str, list[str]] = {}
    last = ""
    for line in written.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith(" "):
            rooms[last] += line.split()
            continue
        last, _, below = line.partition(":")
        rooms[last] = below.split()
    return {r: frozenset(below) for r, below in sorted(rooms.items())}


def written(allowed: dict[str, frozenset[str]]) -> str:
    """``WRITTEN`` for these arrows, lines under 100 characters."""
    lines = []
    for r, below in allowed.items():
        line = f"{r}:"
        for b in sorted(below):
            if len(line) + len(b) > 98:
                lines.append(line)
                line = "   "
            line += f" {b}"
        lines.append(line)
    return "\n".join(lines)


def arrows(pairs: set[tuple[str, str]]) -> dict[str, frozenset[str]]:
    """Room -> the rooms it imports (every room, those that import nothing too)."""
    found: dict[str, set[str]] = {}
    for a, b in pairs:
        found.setdefault(room(a), set())
        found.setdefault(room(b), set())
        if room(a) != room(b):
            found[room(a)].add(room(b))
    return {r: frozenset(found[r]) for r in sorted(found)}


def floors(allowed: dict[str, frozenset[str]]) -> dict[str, int]:
    """Each room's floor: 1 for a room that imports no other, else one above the highest it imports."""

    @cache
    def floor(r: str) -> int:
        return 1 + max((floor(b) for b in allowed[r]), default=0)

    return {r: floor(r) for r in allowed}


def table(allowed: dict[str, frozenset[str]]) -> str:
    """The arrows as the markdown table docs/architecture.md prints, lowest floor first."""
    level = floors(allowed)

    def name(r: str) -> str:
        return f"`{r}/`" if (RUNTIME / r).is_dir() else f"`{r}.py`"

    rows = ["| floor | room | imports the rooms |", "| --- | --- | --- |"]
    for r in sorted(allowed, key=lambda r: (level[r], r)):
        below = ", ".join(sorted(allowed[r], key=lambda b: (level[b], b))) or "(none)"
        rows.append(f"| {level[r]} | {name(r)} | {below} |")
    return "\n".join(rows)


DOC_TABLE = re.compile(r"<!-- layer table: start -->\n(.*?)\n<!-- layer table: end -->", re.S)


def layers(pairs: set[tuple[str, str]]) -> tuple[list[str], list[tuple[str, str]]]:
    """The rooms in an order with the fewest imports back up found, lowest first, and those imports.

    Rooms that import nothing back up have one order and no import back up. Around a loop the fewest
    is hard to find exactly (25 rooms stood in one loop once), so: start from the rooms by how many
    they reach, then move one room at a time to wherever it has the fewest, until no move helps."""
    between = [(a, b) for a, b in pairs if room(a) != room(b)]
    weight: dict[tuple[str, str], int] = {}
    for a, b in between:
        weight[room(a), room(b)] = weight.get((room(a), room(b)), 0) + 1
    rooms = sorted({r for edge in weight for r in edge})
    reach = {r: {r} for r in rooms}
    for _ in rooms:
        for a, b in weight:
            reach[a] |= reach[b]

    def cost(order: list[str]) -> int:
        rank = {r: i for i, r in enumerate(order)}
        return sum(n for (a, b), n in weight.items() if rank[a] < rank[b])

    order = sorted(rooms, key=lambda r: (len(reach[r]), r))
    best = cost(order)
    moved = True
    while moved:
        moved = False
        for r in list(order):
            rest = [s for s in order if s != r]
            for i in range(len(order)):
                trial = [*rest[:i], r, *rest[i:]]
                if (c := cost(trial)) < best:
                    order, best, moved = trial, c, True
    rank = {r: i for i, r in enumerate(order)}
    return order, sorted((a, b) for a, b in between if rank[room(a)] < rank[room(b)])


def test_no_two_rooms_import_each_other_around_a_loop() -> None:
    order, back = layers(file_imports())
    assert {"base", "wire", "upstream", "loaded", "books", "request", "app"} <= set(order)
    assert {(a.removeprefix(PREFIX), b.removeprefix(PREFIX)) for a, b in back} == REMAINING


def test_the_rooms_import_only_what_the_written_table_allows() -> None:
    found, allowed = arrows(file_imports()), parse(WRITTEN)
    assert set(found) == set(allowed), "a room came or went: add or take out its line in WRITTEN"
    extra = sorted((r, b) for r in found for b in found[r] - allowed[r])
    lost = sorted((r, b) for r in found for b in allowed[r] - found[r])
    assert extra == [], f"arrows the table does not allow (a new floor? name a Protocol below): {extra}"
    assert lost == [], f"arrows the code no longer has: take them out of WRITTEN: {lost}"


def test_the_runtime_stands_on_at_most_twelve_floors_in_at_most_eighteen_rooms() -> None:
    """Issue 41's bound: a reader climbs at most 12 floors from ``base/`` to ``app/`` (was 20, in 42
    rooms); a room more, or a floor more, is a change to argue for here."""
    allowed = parse(WRITTEN)
    assert max(floors(allowed).values()) <= 12
    assert len(allowed) <= 18


def test_docs_architecture_prints_the_written_table() -> None:
    printed = DOC_TABLE.search(ARCHITECTURE.read_text(encoding="utf-8"))
    assert printed is not None, "docs/architecture.md lost its layer table"
    assert printed.group(1) == table(parse(WRITTEN)), "paste `python tests/runtime/test_layers.py --table`"


def test_the_counter_finds_the_fewest_imports_back_up_around_a_loop() -> None:
    """Files free of circles, rooms in one: ``a`` imports ``b`` twice, ``b`` imports ``a`` once; the
    order puts ``b`` lowest and the one import of ``b`` back up to ``a`` is what it reports."""
    r = PREFIX
    pairs = {(f"{r}a.x", f"{r}b.y"), (f"{r}a.z", f"{r}b.y"), (f"{r}b.w", f"{r}a.v"), (f"{r}c", f"{r}a.x")}
    pairs |= {(f"{r}a.x", f"{r}a.z")}  # inside a room: never back up
    assert layers(pairs) == (["b", "a", "c"], [(f"{r}b.w", f"{r}a.v")])
    assert layers(pairs - {(f"{r}b.w", f"{r}a.v")}) == (["b", "a", "c"], [])


if __name__ == "__main__" and sys.argv[1:] == ["--table"]:
    found = arrows(file_imports())
    print(written(found), end="\n\n")
    print(f"<!-- layer table: start -->\n{table(found)}\n<!-- layer table: end -->")
elif __name__ == "__main__":
    order, back = layers(file_imports())
    print("rooms, lowest first:", " ".join(order))
    for a, b in back:
        print(f"  back up: {a.removeprefix(PREFIX)} -> {b.removeprefix(PREFIX)}")
    print(f"{len(back)} import(s) back up")
