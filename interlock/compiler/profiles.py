"""Hardware profiles: a built-in preset by name, or a profile file by path (relative to the config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from interlock.common.resources import builtin_profiles
from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import Span, did_you_mean
from interlock.compiler.loader import SourceDoc, display_name, parse_document
from interlock.compiler.reading import SourceUnreadable, read_file, within
from interlock.compiler.validate import salvage
from interlock.schema.config import ProfileFile


@dataclass
class LoadedProfile:
    profile: ProfileFile
    doc: SourceDoc


@dataclass
class ProfileCache:
    """Each profile is read and checked once per compile, however many workers name it."""

    loaded: dict[str, LoadedProfile | None] = field(default_factory=dict)

    def get(
        self, ctx: CompileContext, name: str, config_path: str, span: Span, where: str
    ) -> LoadedProfile | None:
        key = name if not is_path(name) else f"{config_path}:{name}"
        if key not in self.loaded:
            self.loaded[key] = load_profile(ctx, name, config_path, span, where)
        return self.loaded[key]


def is_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name


def load_profile(
    ctx: CompileContext, name: str, config_path: str, span: Span, where: str
) -> LoadedProfile | None:
    """Built-in presets are looked up by name; anything shaped like a path is read through the reader."""
    presets = builtin_profiles()
    if name in presets:
        path, text = presets[name].as_posix(), read_file(presets[name].as_posix())
    elif is_path(name):
        path = (PurePosixPath(config_path).parent / name).as_posix()
        text = _read(ctx, path, name, span, where)
    else:
        ctx.sink.add(
            "IL208",
            span,
            f"unknown hardware profile `{name}`",
            path=where,
            value=name,
            hint=did_you_mean(name, presets)
            or f"built-in profiles: {', '.join(presets)}; or a path such as `profiles/mybox.yaml`",
        )
        return None
    if text is None:
        return None
    doc = parse_document(path, text, ctx.sink)
    ctx.sources.aux.append(doc)
    if doc.data is None:
        return None  # YAML syntax error, reported
    result = salvage(ProfileFile, doc.data, doc, (), ctx.sink)
    if not isinstance(result.value, ProfileFile):
        return None
    return LoadedProfile(result.value, doc)


def _read(ctx: CompileContext, path: str, name: str, span: Span, where: str) -> str | None:
    """The profile file's text, or None once reported: the same bounds as an include (inside the
    allowed folders, a regular file within the size cap)."""
    roots = ctx.sources.roots
    if roots and not within(path, roots):
        ctx.sink.add(
            "IL010",
            span,
            f"hardware profile file `{path}` is outside the configuration's folder "
            f"`{display_name(roots[0])}`",
            path=where,
            value=name,
            hint="keep profile files inside the main file's folder tree, or allow another folder with "
            "`--include-root DIR`",
        )
        return None
    try:
        text = ctx.options.reader(path)
    except SourceUnreadable as exc:
        ctx.sink.add(
            "IL011",
            span,
            f"hardware profile file `{path}` {exc.problem}",
            path=where,
            value=name,
            hint=exc.hint,
        )
        return None
    if text is None:
        ctx.sink.add(
            "IL208",
            span,
            f"hardware profile file `{path}` does not exist",
            path=where,
            value=name,
            hint="a path is relative to the file that names it; built-in profiles: "
            + ", ".join(builtin_profiles()),
        )
    return text
