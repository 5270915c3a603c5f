"""The drift gate: hard-coded `provider/model` strings in source code, reported as diagnostics.

``scan_into`` walks the given paths, finds tokens for the providers the configuration declares and
adds one IL601 warning per token to the compile context's sink, with the alias to use instead, so
`lint --format github` and `lint --strict` treat them like any other diagnostic. Allowed places: the
config's own files and the `lint.scan_allow` globs (relative to the config's folder).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TextIO

from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import Span
from interlock.compiler.loader import SourceDoc, display_name
from interlock.scan.globs import AllowList
from interlock.scan.matcher import Hit, matcher_for
from interlock.scan.walk import walk

MAX_FILE_BYTES = 8 * 1024 * 1024
"""Larger files are generated bundles or data, not code someone maintains; they are skipped."""

BINARY_PROBE_BYTES = 8192


@dataclass
class ScanStats:
    files: int = 0
    skipped: int = 0  # binary or too large
    hits: int = 0


def scan_into(ctx: CompileContext, config: str, paths: Sequence[str], log: TextIO | None = None) -> ScanStats:
    """Scan ``paths`` for hard-coded models of ``ctx``'s providers; add diagnostics to ``ctx.sink``."""
    matcher = matcher_for(ctx.providers)
    base = os.path.dirname(os.path.abspath(config))
    allow = AllowList.of(ctx.lint.scan_allow)
    own = _identities(doc.path for doc in (*ctx.sources.docs, *ctx.sources.aux))
    hints: dict[str, str] = {}  # token -> alias suggestion: the same few tokens recur across a tree
    stats = ScanStats()
    for root in paths:
        if not os.path.exists(root):
            ctx.sink.add("IL602", Span(root), f"scan path `{root}` does not exist", value=root)
            continue
        if matcher is None:
            continue
        allowed = _allowed_under(base, root, allow)
        for path in walk(root, allowed):
            if allowed(path):
                continue
            try:
                info = os.stat(path)
            except OSError:
                continue  # vanished since the folder was listed
            if (info.st_dev, info.st_ino) in own:
                continue
            data = _read(path, info.st_size)
            if data is None:
                stats.skipped += 1
                continue
            stats.files += 1
            hits = list(matcher.find(data))
            if hits:
                stats.hits += len(hits)
                _report(ctx, display_name(os.path.normpath(path)), data, hits, hints)
    if log is not None:
        where = ", ".join(paths)
        log.write(
            f"scanned {stats.files} file(s) under {where} ({stats.skipped} binary or large skipped): "
            f"{stats.hits} hard-coded model(s)\n"
        )
    return stats


def _identities(paths: Iterable[str]) -> set[tuple[int, int]]:
    """(device, inode) of each existing file: the same file whatever path or link names it."""
    out = set()
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        out.add((info.st_dev, info.st_ino))
    return out


def _allowed_under(base: str, root: str, allow: AllowList) -> Callable[[str], bool]:
    """Whether a path the walker yields under ``root`` is allowed. Paths are made relative to ``base``
    by string operations only: a scan asks this for every file and folder."""
    prefix = PurePath(os.path.relpath(os.path.abspath(root), base)).as_posix()

    def allowed(path: str) -> bool:
        rest = path[len(root) :].lstrip(os.sep).replace(os.sep, "/")
        relative = prefix if not rest else rest if prefix == "." else f"{prefix}/{rest}"
        return allow.allows(relative)

    return allowed


def _read(path: str, size: int) -> bytes | None:
    """The file's bytes, or None for a file that is too large, unreadable or binary."""
    if size > MAX_FILE_BYTES:
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return None if b"\0" in data[:BINARY_PROBE_BYTES] else data


def _report(ctx: CompileContext, file: str, data: bytes, hits: list[Hit], hints: dict[str, str]) -> None:
    # Registering the file lets the text report show the offending line with a caret; like a config
    # line, it is shown through `SourceDoc.excerpt`, which masks credential-looking text on it.
    ctx.sources.aux.append(SourceDoc(file, file, data.decode("utf-8", "replace").splitlines()))
    for hit in hits:
        hint = hints.get(hit.token)
        if hint is None:
            hint = hints[hit.token] = suggest(ctx, hit.token)
        ctx.sink.add(
            "IL601",
            Span(file, hit.line, hit.col),
            f"hard-coded model `{hit.token}` bypasses the aliases",
            value=hit.token,
            hint=hint,
        )


def suggest(ctx: CompileContext, token: str) -> str:
    """Which alias to use instead: those whose chain holds ``token``, first choices first."""
    wanted = {token}
    provider, _, model = token.partition("/")
    known = ctx.providers.get(provider)
    if known is not None and known.section.kind == "ollama":  # Ollama reads `x` as `x:latest`
        wanted |= {f"{provider}/{model}:latest"} if ":" not in model else set()
        wanted |= {f"{provider}/{model.removesuffix(':latest')}"}
    places = []
    for alias, links in ctx.expanded.items():
        chain = [link.candidate for link in links]
        index = next((i for i, candidate in enumerate(chain) if candidate in wanted), None)
        if index is not None:
            places.append((index, alias))
    if not places:
        return "no alias's chain holds this model: add it to one, then use that alias"
    shown = [
        f"`{alias}` ({'first choice' if i == 0 else f'candidate {i + 1}'})" for i, alias in sorted(places)
    ]
    return "use " + " or ".join(shown) + " instead"
