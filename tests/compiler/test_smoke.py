"""The shipped example compiles cleanly and its plan validates against the committed schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from interlock.compiler import compile_config
from interlock.schema.canonical import canonical_json

ROOT = Path(__file__).resolve().parents[2]


def test_example_compiles_without_diagnostics(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    ctx = compile_config("config.rtx4090.yaml")
    assert [str(d) for d in ctx.sink.items] == []
    assert ctx.plan is not None
    data = json.loads(canonical_json(ctx.plan.model_dump(mode="json")))
    schema = json.loads((ROOT / "schema" / "plan.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert data["aliases"]["mana/long-form"]["candidates"][0] == "ollama/gemma3:12b"
