"""The optional mypyc build: ``INTERLOCK_MYPYC=1 pip install .`` compiles the request path's modules.

A hatchling build hook (``[tool.hatch.build.hooks.custom]`` in pyproject.toml). Without
``INTERLOCK_MYPYC`` it does nothing: the wheel is the pure-Python one, and ``pip install -e ".[dev]"``
neither needs nor installs a compiler or mypy. With ``INTERLOCK_MYPYC=1`` a (non-editable) wheel build
asks for mypy, setuptools and the project's own dependencies in its build environment (mypyc
type-checks the modules as ``mypy --strict`` does), compiles ``MODULES`` into C extensions beside their
``.py`` files, and tags the wheel for this Python and platform. When it cannot (no C compiler, no
Python headers, or mypyc refusing a module someone changed), it says why and builds the pure wheel;
``INTERLOCK_MYPYC=require`` makes that an error instead. An editable install stays pure: a compiled
module would shadow the ``.py`` file being edited. What it measures: docs/benchmarks.md ("mypyc").
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# The modules that run per request (../shared/tools/request_files.py), and the adapters and surfaces
# that subclass their classes. Left out, each for what mypyc refuses (docs/benchmarks.md):
#   runtime/router.py: ``continue`` inside ``try``/``finally`` (the candidate walk) is unimplemented;
#   runtime/record.py, runtime/services.py, runtime/metrics.py: their dataclasses' fields are annotated
#     with types imported under TYPE_CHECKING, which a compiled dataclass looks up at import (KeyError);
#   runtime/serving/connections.py: the same, on a subclass of uvicorn's protocol;
#   runtime/server.py: its Supervisor is subclassed by a test.
MODULES = (
    "interlock/runtime/access.py",
    "interlock/runtime/app.py",
    "interlock/runtime/asgi.py",
    "interlock/runtime/fleet/facts.py",
    "interlock/runtime/fleet/fit.py",
    "interlock/runtime/fleet/prefix.py",
    "interlock/runtime/guards/calibration.py",
    "interlock/runtime/guards/capability.py",
    "interlock/runtime/guards/context.py",
    "interlock/runtime/guards/health.py",
    "interlock/runtime/guards/needs.py",
    "interlock/runtime/guards/preflight.py",
    "interlock/runtime/health.py",
    "interlock/runtime/journal.py",
    "interlock/runtime/learned.py",
    "interlock/runtime/lifecycle.py",
    "interlock/runtime/resolve.py",
    "interlock/runtime/serving/cork.py",
    "interlock/runtime/surfaces/anthropic.py",
    "interlock/runtime/surfaces/base.py",
    "interlock/runtime/surfaces/ollama.py",
    "interlock/runtime/surfaces/openai.py",
    "interlock/runtime/surfaces/responses.py",
    "interlock/runtime/upstream/anthropic.py",
    "interlock/runtime/upstream/base.py",
    "interlock/runtime/upstream/client.py",
    "interlock/runtime/upstream/exchange.py",
    "interlock/runtime/upstream/http1.py",
    "interlock/runtime/upstream/ollama.py",
    "interlock/runtime/upstream/openai.py",
    "interlock/runtime/usage/base.py",
    "interlock/runtime/usage/ledger.py",
    "interlock/runtime/usage/memory.py",
    "interlock/runtime/usage/metering.py",
    "interlock/runtime/usage/postgres.py",
    "interlock/runtime/usage/sqlite.py",
    "interlock/runtime/wire/anthropic.py",
    "interlock/runtime/wire/base.py",
    "interlock/runtime/wire/fields.py",
    "interlock/runtime/wire/openai_chat.py",
    "interlock/runtime/wire/openai_responses.py",
    "interlock/runtime/wire/sse.py",
)
# the mypy whose mypyc compiled and passed the tests (docs/benchmarks.md); the generated C carries
# mypyc's runtime, so the installed wheel needs neither mypy nor mypy_extensions
MYPY = "mypy==2.4.1"
GROUP = "interlock_native"  # the shared library's name: interlock_native__mypyc.<tag>.so


def wanted() -> str:
    """``""`` (a pure build), ``"1"`` (compile, or fall back to pure) or ``"require"`` (compile or fail)."""
    value = os.environ.get("INTERLOCK_MYPYC", "").strip().lower()
    return "" if value in ("", "0", "no", "false", "off") else value


def missing_toolchain() -> str | None:
    """Why nothing can be compiled here (no C compiler, no Python.h), or None."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(os.environ.get("CC", compiler).split()[0]) is None:
        return f"no C compiler ({compiler!r} is not on PATH)"
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not include.exists():
        return f"no Python headers ({include} is missing: the python3-dev package)"
    return None


def compile_modules(root: Path, work: Path) -> list[tuple[Path, str]]:
    """mypyc ``MODULES`` (those that exist) under ``work``; the built extensions and their wheel paths."""
    from mypyc.build import mypycify  # the build environment's, asked for by ``dependencies``
    from setuptools import Distribution
    from setuptools.command.build_ext import build_ext

    modules = [path for path in MODULES if (root / path).is_file()]
    for path in sorted(set(MODULES) - set(modules)):
        print(f"INTERLOCK_MYPYC: {path} is gone; not compiled", file=sys.stderr)
    here = Path.cwd()
    os.chdir(root)  # mypyc names modules by their paths, and reads pyproject.toml's [tool.mypy]
    try:
        extensions = mypycify(
            [*modules, f"--cache-dir={work / 'mypy'}"], target_dir=str(work / "c"), group_name=GROUP
        )
        command = build_ext(Distribution({"name": "interlock", "ext_modules": extensions}))
        command.build_lib = str(work / "lib")
        command.build_temp = str(work / "obj")
        command.parallel = os.cpu_count() or 1
        command.ensure_finalized()
        command.run()
    finally:
        os.chdir(here)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return [(path, path.relative_to(work / "lib").as_posix()) for path in (work / "lib").rglob(f"*{suffix}")]


class MypycHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compiles ``MODULES`` into a platform wheel when ``INTERLOCK_MYPYC`` asks for it."""

    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        if not wanted() or self.target_name != "wheel":
            return []
        return [MYPY, "setuptools>=69", "types-PyYAML>=6.0", *self.metadata.core.dependencies]

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        mode = wanted()
        if not mode or self.target_name != "wheel":
            return
        if version == "editable":
            self.app.display_warning("INTERLOCK_MYPYC: an editable install stays pure Python")
            return
        why = missing_toolchain()
        self._work = Path(tempfile.mkdtemp(prefix="interlock-mypyc-"))
        try:
            if why is not None:
                raise RuntimeError(why)
            built = compile_modules(Path(self.root), self._work)
        except (Exception, SystemExit) as exc:  # mypyc exits on a type error
            if mode == "require":
                raise RuntimeError(f"INTERLOCK_MYPYC=require: the mypyc build failed: {exc}") from exc
            self.app.display_warning(f"INTERLOCK_MYPYC: not compiled ({exc}); building the pure wheel")
            return
        for path, target in built:
            build_data["force_include"][str(path)] = target
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        self.app.display_info(f"INTERLOCK_MYPYC: {len(built) - 1} modules compiled")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        work = getattr(self, "_work", None)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
