"""The plan depends on what the configuration says, not on how it is written.

Comments, key order, flow vs block style, quoting, duration spelling and the order of includes (whose
files define different names) must all give the same bytes and the same content hash.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from interlock.commands.build import plan_text
from interlock.compiler import CompileOptions, compile_config
from interlock.compiler.diagnostics import DiagnosticSink
from interlock.compiler.loader import parse_document
from tests.conftest import FIXTURES

BASE = FIXTURES / "determinism"
FILES = ("main.yaml", "providers.yaml", "aliases.yaml")


def compiled(main: Path) -> str:
    ctx = compile_config(str(main), CompileOptions(environ={}))
    assert [d.code for d in ctx.sink.items] == []
    assert ctx.plan is not None
    return plan_text(ctx.plan)


def load(path: Path) -> Any:
    sink = DiagnosticSink()
    data = parse_document(str(path), path.read_text(), sink).data
    assert sink.items == []
    return data


def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]  # list order is meaning: keep it
    return value


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


WRITERS: dict[str, Callable[[Any, random.Random], str]] = {
    "json-flow-reversed": lambda data, rng: json.dumps(reversed_keys(data), indent=1),
    "json-one-line": lambda data, rng: json.dumps(shuffled(data, rng)),
    "block-sorted": lambda data, rng: yaml.safe_dump(data, sort_keys=True, default_flow_style=False),
    "block-shuffled": lambda data, rng: yaml.safe_dump(shuffled(data, rng), sort_keys=False),
    "flow-shuffled": lambda data, rng: yaml.safe_dump(
        shuffled(data, rng), sort_keys=False, default_flow_style=True
    ),
    "commented": lambda data, rng: (
        "# leading comment\n"
        + "\n".join(
            f"{line}  # c" if line.strip() and not line.endswith(("|", ">")) else line
            for line in yaml.safe_dump(data, sort_keys=False).splitlines()
        )
        + "\n# trailing comment\n"
    ),
}


def test_handwritten_variant_compiles_to_the_same_bytes() -> None:
    assert compiled(BASE / "handwritten" / "main.yaml") == compiled(BASE / "main.yaml")


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("seed", [1, 2])
def test_rewritten_sources_compile_to_the_same_bytes(tmp_path: Path, writer: str, seed: int) -> None:
    expected = compiled(BASE / "main.yaml")
    rng = random.Random(seed)
    for name in FILES:
        data = load(BASE / name)
        if name == "main.yaml" and seed == 2:
            data["include"] = list(reversed(data["include"]))
        (tmp_path / name).write_text(WRITERS[writer](data, rng))
    assert compiled(tmp_path / "main.yaml") == expected


def test_compiling_twice_gives_the_same_bytes_and_hash() -> None:
    first, second = compiled(BASE / "main.yaml"), compiled(BASE / "main.yaml")
    assert first == second
    assert json.loads(first)["content_hash"].startswith("sha256:")


def test_a_change_of_meaning_changes_the_hash(tmp_path: Path) -> None:
    for name in FILES:
        (tmp_path / name).write_text((BASE / name).read_text())
    aliases = tmp_path / "aliases.yaml"
    aliases.write_text(
        aliases.read_text().replace(
            "[ollama/qwen3:8b, groq/llama-3.1-8b-instant]", "[groq/llama-3.1-8b-instant, ollama/qwen3:8b]"
        )
    )
    before = json.loads(compiled(BASE / "main.yaml"))["content_hash"]
    after = json.loads(compiled(tmp_path / "main.yaml"))["content_hash"]
    assert before != after
