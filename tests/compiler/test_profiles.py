"""Hardware profile files: checked like any source, once, with diagnostics pointing into them."""

from __future__ import annotations

from pathlib import Path

from interlock.compiler import CompileOptions, compile_config
from interlock.compiler.report import render

CONFIG = """version: 1
providers:
  local:
    kind: ollama
    workers:
      - {name: a, url: "http://10.0.0.1:11434", profile: boxes/odd.yaml}
      - {name: b, url: "http://10.0.0.2:11434", profile: boxes/odd.yaml}
aliases:
  x: {chain: [local/qwen3:8b, local/gemma3:4b]}
"""


def lint(tmp_path: Path, profile: str) -> list[tuple[str, str, str]]:
    (tmp_path / "boxes").mkdir(exist_ok=True)
    (tmp_path / "boxes" / "odd.yaml").write_text(profile)
    (tmp_path / "main.yaml").write_text(CONFIG)
    ctx = compile_config(str(tmp_path / "main.yaml"), CompileOptions(environ={}))
    assert ctx.plan is None
    text = render(ctx.sink.items, "text", ctx.sources)
    assert f"{tmp_path.name}/boxes/odd.yaml:" in text or "boxes/odd.yaml:" in text
    return [(d.code, f"{Path(d.span.file).name}:{d.span.line}", d.message) for d in ctx.sink.sorted()]


def test_a_broken_profile_is_reported_once_and_adds_no_derived_errors(tmp_path: Path) -> None:
    rows = lint(tmp_path, "profile: odd\nhardware: {accelerator: tpu}\nworker: {max_concurrent: 2}\n")
    assert rows == [
        (
            "IL004",
            "odd.yaml:2",
            "`hardware.accelerator` must be one of `nvidia`, `apple`, `amd`, `none`, not `tpu`",
        )
    ]


def test_profile_table_problems_point_into_the_profile_once(tmp_path: Path) -> None:
    rows = lint(
        tmp_path,
        "profile: odd\nhardware: {accelerator: none, vram: 8}\n"
        'worker:\n  max_concurrent: 2\n  model_concurrency: {"q*n": 1, "*": 3}\n',
    )
    assert rows == [
        ("IL003", "odd.yaml:2", "unknown key `vram` in `hardware`"),
        (
            "IL204",
            "odd.yaml:5",
            "concurrency pattern `q*n` is not an exact name, a prefix ending in one `*`, "
            "or `*` alone (from profile `odd`)",
        ),
        (
            "IL206",
            "odd.yaml:5",
            "slot limit 3 of `*` (from profile `odd`) exceeds the worker's max_concurrent 2",
        ),
    ]
