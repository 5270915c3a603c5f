"""A copy of the base test configuration that a test edits as data and compiles."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from interlock.compiler import compile_config
from interlock.schema.plan import RoutingPlan

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BASE = FIXTURES / "base"
FILES = ("config.yaml", "aliases.yaml", "profiles/lab.yaml")


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.width = 4096
    return yaml


@dataclass
class ConfigTree:
    """The base configuration copied to ``root``; ``data[file]`` is editable, ``save()`` writes it back."""

    root: Path
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def copy(cls, root: Path) -> ConfigTree:
        shutil.copytree(BASE, root)
        tree = cls(root)
        for name in FILES:
            tree.data[name] = _yaml().load((root / name).read_text(encoding="utf-8"))
        return tree

    @property
    def config(self) -> Any:
        return self.data["config.yaml"]

    @property
    def aliases(self) -> Any:
        return self.data["aliases.yaml"]["aliases"]

    @property
    def profile(self) -> Any:
        return self.data["profiles/lab.yaml"]

    def provider(self, name: str) -> Any:
        return self.config["providers"][name]

    def worker(self, provider: str, name: str) -> Any:
        return next(w for w in self.provider(provider)["workers"] if w["name"] == name)

    def save(self) -> ConfigTree:
        for name, data in self.data.items():
            with (self.root / name).open("w", encoding="utf-8") as handle:
                _yaml().dump(data, handle)
        return self

    @property
    def path(self) -> str:
        return str(self.root / "config.yaml")


def compile_plan(path: str) -> RoutingPlan:
    ctx = compile_config(path)
    assert [d for d in ctx.sink.errors] == []
    assert ctx.plan is not None
    return ctx.plan
